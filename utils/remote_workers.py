"""A round's clients on several TFF workers: TFF's mergeable-computation execution over remote C++ workers.

TFF 0.87 splits one call of a computation whose aggregations do not depend on each other into subrounds
(`tff.backends.native.compile_to_mergeable_comp_form`): each subround runs the computation up to its aggregation on
a slice of the CLIENTS-placed argument, on one worker; the partial aggregates are merged in order and the rest of
the computation runs once. This module builds that context over workers given as `host:port` addresses (each a
`worker_binary`, `tools/start_worker.sh`):

  address -> `grpc.insecure_channel` -> `tff.framework.RemoteExecutorGrpcStub` -> `tff.framework.RemoteExecutor`
  (inside a `tff.framework.ResourceManagingExecutorFactory`) -> `tff.framework.AsyncExecutionContext` (TFF's native
  compiler and TensorFlow argument transforms, as its local contexts use) -> one
  `tff.backends.native.create_mergeable_comp_execution_context` over all workers.

Only a round's computation runs there (`round_context`, installed around the call by the training loop); the
small server-side computations (initialize, reading and setting model weights) stay on this process's own worker.

Choices and guards:
- Splitting follows the clients: TFF slices every CLIENTS-placed value of the argument, but takes the slices'
  positions from the *last* element of the argument; if that element is not CLIENTS-placed, every subround gets the
  first slice and sums come out wrong without an error. `check_splittable` refuses such a computation, and one
  whose aggregations depend on each other (which TFF cannot split), each with one line, before any round.
- Data: a file-backed client dataset reaches a worker as a graph holding the absolute paths of the task's files, so
  every worker host needs them at the same path; `check_paths` asks each worker whether it sees the run's data
  directories (`--cache_dir`, `--tfds_data_dir`) before any round.
- A worker that does not answer: `wait_until_ready` (start-up) waits at most `timeout_seconds` for every address.
  During a run TFF retries a failed call forever; here each retry first waits for the worker at most
  `timeout_seconds`, then the call fails with `WorkerUnavailableError` (one line naming the worker), so a run keeps
  its last checkpoint and stops instead of hanging.
- The service has no TLS and no authentication: workers listen on their host's loopback (`utils.loopback`) and
  are reached from other hosts through SSH tunnels the run opens (`ssh://` addresses, `utils.ssh_tunnels`); a plain
  address that is not loopback is used with a warning (docs/operations.md, "Several machines").
"""

import functools
import ipaddress
import os
import subprocess
import sys
import time
from typing import Optional, Sequence

import grpc
import tensorflow as tf
import tensorflow_federated as tff
from tensorflow_federated.python.core.impl.types import computation_types
from tensorflow_federated.python.core.impl.types import placements

from utils import execution_context
from utils import ssh_tunnels

# TFF's own options for its local worker's channel: messages of any size (a model's weights are sent whole).
_CHANNEL_OPTIONS = (('grpc.max_message_length', -1), ('grpc.max_receive_message_length', -1),
                    ('grpc.max_send_message_length', -1))


def worker_binary_path() -> str:
  """TFF's C++ worker, as shipped in its wheel."""
  return os.path.join(os.path.dirname(tff.__file__), 'data', 'worker_binary')


def start_local_worker(port: int, **popen_kwargs) -> subprocess.Popen:
  """A worker on this host serving `port` (for tests and benchmarks; hosts use tools/start_worker.sh), started as
  `utils.execution_context` starts TFF's own worker (it ends with this process)."""
  return execution_context.start_worker_process(
      [worker_binary_path(), f'--port={port}', '--max_concurrent_computation_calls=-1'], **popen_kwargs)


class WorkerUnavailableError(RuntimeError):
  """A worker did not answer within the timeout; the message names it."""


def parse(spec: str) -> list[str]:
  """`host:port,...` or `ssh://[user@]host:port,...` -> addresses; ValueError (one line) for an address without a
  host or a numeric port."""
  addresses = [part.strip() for part in spec.split(',') if part.strip()]
  for address in addresses:
    if ssh_tunnels.is_tunneled(address):
      ssh_tunnels.parse(address)
      continue
    host, _, port = address.rpartition(':')
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
      raise ValueError(f'--workers takes host:port or ssh://[user@]host:port addresses separated by commas; got '
                       f'{address!r}.')
  if len(set(addresses)) != len(addresses):
    raise ValueError(f'--workers lists an address twice: {spec!r}.')
  return addresses


def _channel(address: str) -> grpc.Channel:
  return grpc.insecure_channel(address, _CHANNEL_OPTIONS)


def is_loopback(address: str) -> bool:
  """Whether `address` (`host:port`) names this host's loopback."""
  host = address.rpartition(':')[0].strip('[]')
  if host == 'localhost':
    return True
  try:
    return ipaddress.ip_address(host).is_loopback
  except ValueError:
    return False


def connect(addresses: Sequence[str], timeout_seconds: float) -> list[str]:
  """The addresses to dial for `addresses`: an `ssh://` one through the SSH tunnel it opens (`utils.ssh_tunnels`),
  the others as they are, after a warning on stderr for each that is not loopback (a worker reached that way
  listens beyond loopback, without TLS or authentication)."""
  dialed = []
  for address in addresses:
    if ssh_tunnels.is_tunneled(address):
      dialed.append(ssh_tunnels.open_tunnel(address, timeout_seconds))
      continue
    if not is_loopback(address):
      print(f'WARNING: the TFF worker {address} is reached over the network without TLS or authentication, so it '
            'listens beyond loopback and anyone who reaches it can run code on its host; use '
            f'--workers=ssh://USER@{address} with a worker on loopback (docs/operations.md, "Several machines").',
            file=sys.stderr, flush=True)
    dialed.append(address)
  return dialed


def wait_until_ready(addresses: Sequence[str], timeout_seconds: float) -> None:
  """Returns when every worker answers; WorkerUnavailableError naming those that did not within the timeout."""
  silent = []
  for address in addresses:
    channel = _channel(address)
    try:
      grpc.channel_ready_future(channel).result(timeout=timeout_seconds)
    except grpc.FutureTimeoutError:
      silent.append(address)
    finally:
      channel.close()
  if silent:
    raise WorkerUnavailableError(f'TFF worker{"s" if len(silent) > 1 else ""} {", ".join(silent)} did not answer '
                                 f'within {timeout_seconds:g} s (start one with tools/start_worker.sh --port=P).')


def _executor_factory(address: str, timeout_seconds: float) -> tff.framework.ResourceManagingExecutorFactory:
  """Executors on the worker at `address`; creating one (each call and each of TFF's retries) first waits for the
  worker at most `timeout_seconds`."""
  stub = tff.framework.RemoteExecutorGrpcStub(_channel(address))

  def executor(cardinalities):
    deadline = time.monotonic() + timeout_seconds
    while not stub.is_ready:
      if time.monotonic() > deadline:
        raise WorkerUnavailableError(f'TFF worker {address} stopped answering (waited {timeout_seconds:g} s).')
      time.sleep(0.1)
    remote = execution_context.remote_executor(stub)
    # The merge and the computation after it hold no client values; the worker still wants a client count.
    remote.set_cardinalities({placements.CLIENTS: 0, **cardinalities})
    return remote

  return tff.framework.ResourceManagingExecutorFactory(executor_stack_fn=executor)


def round_context(addresses: Sequence[str], num_subrounds: Optional[int] = None,
                  timeout_seconds: float = 60.0) -> tff.framework.MergeableCompExecutionContext:
  """The context that runs a computation's clients in `num_subrounds` subrounds (default: one per worker) over the
  workers at `addresses`, merging their aggregates in client order. The workers' contexts share one compiler
  cache: each subround's computation is compiled once, not once per worker (each TFF context caches only its own)."""
  compile_once = functools.lru_cache(maxsize=None)(execution_context.compile_for_simulation)
  contexts = [tff.framework.AsyncExecutionContext(
      executor_fn=_executor_factory(address, timeout_seconds),
      compiler_fn=compile_once,
      transform_args=tff.tensorflow.transform_args,
      transform_result=tff.tensorflow.transform_result) for address in addresses]
  return tff.backends.native.create_mergeable_comp_execution_context(contexts, num_subrounds)


def _call_on_worker(computation: tff.Computation, address: str, timeout_seconds: float):
  """The result of calling the argument-less `computation` on the worker at `address`."""
  context = tff.framework.SyncExecutionContext(
      executor_fn=_executor_factory(address, timeout_seconds),
      compiler_fn=execution_context.compile_for_simulation)
  with tff.framework.get_context_stack().install(context):
    return computation()


def check_paths(addresses: Sequence[str], paths: Sequence[str], timeout_seconds: float = 60.0) -> None:
  """FileNotFoundError (one line) naming, per worker, the `paths` (the run's data directories) it does not see: a
  client dataset reaches a worker as a graph that reads the task's files by absolute path."""
  paths = [path for path in paths if path]
  if not paths:
    return

  @tff.tensorflow.computation
  def seen():
    return tf.stack([tf.size(tf.io.matching_files(path)) > 0 for path in paths])

  missing = []
  for address in addresses:
    found = _call_on_worker(seen, address, timeout_seconds)
    missing += [f'{address} lacks {path}' for path, here in zip(paths, found) if not here]
  if missing:
    raise FileNotFoundError(f'every worker needs the run\'s data at the same path: {"; ".join(missing)}.')


_DEVICE_TYPES = ('CPU', 'GPU', 'TPU')


def device_types(addresses: Sequence[str], timeout_seconds: float = 60.0) -> dict[str, str]:
  """Per worker, the device type its TensorFlow places a computation's ops on when they are not pinned (as the
  suite's client work is not): a computation there runs `tf.raw_ops.DeviceIndex`, which returns the index of the
  device it runs on among `_DEVICE_TYPES` ('unknown' when none of them)."""

  @tff.tensorflow.computation
  def device_index():
    return tf.raw_ops.DeviceIndex(device_names=list(_DEVICE_TYPES))

  indices = {address: int(_call_on_worker(device_index, address, timeout_seconds)) for address in addresses}
  return {address: _DEVICE_TYPES[index] if index < len(_DEVICE_TYPES) else 'unknown'
          for address, index in indices.items()}


def check_splittable(computation: tff.Computation, name: str) -> None:
  """ValueError (one line) when TFF cannot split `computation` (`name` in the message) into subrounds correctly:
  its aggregations depend on each other, or its last argument is not the clients' data (see the module docstring)."""
  parameter = computation.type_signature.parameter
  if isinstance(parameter, computation_types.StructType) and len(parameter):
    last = parameter[len(parameter) - 1]
  else:
    last = parameter
  if not (isinstance(last, computation_types.FederatedType) and last.placement is placements.CLIENTS
          and not last.all_equal):
    raise ValueError(f'{name} cannot run on several workers: TFF splits the clients by the last argument, which is '
                     f'not a value per client ({last}).')
  try:
    tff.backends.native.compile_to_mergeable_comp_form(computation)
  except ValueError as error:
    reason = ('one of its aggregations depends on another' if 'dependent on another' in str(error) else
              str(error).splitlines()[0][:200])
    raise ValueError(f'{name} cannot run on several workers: {reason}.') from None
