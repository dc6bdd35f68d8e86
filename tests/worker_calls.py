"""What the tests that measure TFF's worker over repeated calls run in their child processes: a federated sum of a
client computation's results over client datasets, and a process's resident size."""

import tensorflow_federated as tff


def rss_mb(pid: int) -> float:
  """The resident size (VmRSS) of process `pid`, in MB."""
  with open(f'/proc/{pid}/status') as status_file:
    return next(int(line.split()[1]) for line in status_file if line.startswith('VmRSS')) / 1024


def federated_total(client_computation: tff.Computation, sequence_type: tff.SequenceType) -> tff.Computation:
  """datasets {sequence_type}@CLIENTS -> the sum over clients of `client_computation(dataset)`, at the server."""

  @tff.federated_computation(tff.FederatedType(sequence_type, tff.CLIENTS))
  def total(datasets):
    return tff.federated_sum(tff.federated_map(client_computation, datasets))

  return total
