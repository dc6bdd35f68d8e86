"""Helpers shared by the benchmarks: the same sampled clients for every implementation, and timing."""

import time

import tensorflow_federated as tff

from periodic_shift import client_sampler
from periodic_shift import day_probability

BATCH_SIZE = 20
WARMUP_ROUNDS = 3


def round_datasets(task, rounds, clients_per_round, batch_size=BATCH_SIZE, max_elements=None):
  """Per round, the sampled clients' preprocessed datasets, `(raw_batch, mode)` elements."""
  q = day_probability.build_day_probability_fn('linear', 32, 1.0, day_population_share=0.5)
  sampler = client_sampler.RoundSampler(task.mode_client_ids(), clients_per_round,
                                        client_sampler.day_night_probabilities(q), seed=0)
  spec = tff.simulation.baselines.ClientSpec(num_epochs=1, batch_size=batch_size, max_elements=max_elements)
  result = []
  for round_num in range(1, rounds + 1):
    sample = sampler.sample(round_num)
    result.append([task.client_dataset(mode, client_id, spec, shuffle_seed=round_num * 1000 + i)
                   for i, (client_id, mode) in enumerate(zip(sample.client_ids, sample.modes))])
  return result


def seconds_per_round(step, rounds):
  """Mean seconds of `step(round)` over `rounds` after the first WARMUP_ROUNDS."""
  for datasets in rounds[:WARMUP_ROUNDS]:
    step(datasets)
  started = time.perf_counter()
  for datasets in rounds[WARMUP_ROUNDS:]:
    step(datasets)
  return (time.perf_counter() - started) / (len(rounds) - WARMUP_ROUNDS)
