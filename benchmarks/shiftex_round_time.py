"""Seconds per round of the ShiftEx paper's methods, ShiftEx and its baseline FedDrift, against FedAvg's on the same
clients, and ShiftEx's detection and assignment costs.

Workload: the synthetic task under `windowed` (windows of 4 rounds), the same sampled clients and batches for all,
as TFF learning processes: training rounds (ShiftEx detects only in census rounds, where every party reports;
their cost is the parties' inference and tests below, times the population). FedAvg is the task's single-branch network; ShiftEx runs `--num_branches=4` (3 experts and theta_0),
each party training one of them, and embeds its data and its kept sample with all K networks (one inference pass
of the multi-network model); FedDrift runs 4 models, each client training one and scoring all four on its data
(one inference pass). Then, outside TFF, the two pieces the paper times: one party's detection (its two
permutation tests: MMD^2 of two samples of 32 embeddings, JSD of two label histograms, 99 random splits each) and the
window's assignment (k-means with k by Davies-Bouldin, matching, spawning) on a full buffer of shifted profiles.

    bazel run //benchmarks:shiftex_round_time -- --rounds=12
"""

import collections
import os

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

from absl import app
from absl import flags
import numpy as np
import tensorflow as tf

from algorithms.core import learning_process
from algorithms.core import drift_statistics
from algorithms.core import method
from algorithms.methods import feddrift
from algorithms.methods import shiftex
from algorithms.methods import vanilla
from benchmarks import timing
from periodic_shift import windowed
from utils import execution_context

_ROUNDS = flags.DEFINE_integer('rounds', 12, 'Timed rounds (after the warm-up rounds).')
_CLIENTS_PER_ROUND = flags.DEFINE_integer('clients_per_round', 10, 'Clients per round.')
_CLIENT_LR, _SERVER_LR, _EPSILON = 0.05, 0.01, 1e-4
_SERVER_STEP = learning_process.ServerStep.named('adam', _SERVER_LR, _EPSILON)
_WINDOW_ROUNDS = 4


def _windowed(task: str):
  """The task with the windowed scenario's domains, and per round its sampled clients' datasets, as a run builds
  them."""
  return timing.run_data(task, 'windowed', windowed.Settings(),
                         _ROUNDS.value + timing.WARMUP_ROUNDS, _CLIENTS_PER_ROUND.value, window_rounds=_WINDOW_ROUNDS)


def _round_seconds(task, rounds) -> dict:
  element_spec = rounds[0][0].element_spec
  seconds = collections.OrderedDict()
  model_fn, process = vanilla.build_single_network_process(task, element_spec, _CLIENT_LR, _SERVER_STEP)
  seconds['fedavg'] = timing.process_seconds_per_round(model_fn, process, rounds)
  hparams = method.Hyperparameters(_CLIENT_LR, _SERVER_STEP, num_branches=4)
  config = shiftex.Config(window_rounds=_WINDOW_ROUNDS, num_branches=4, clients_per_round=_CLIENTS_PER_ROUND.value)
  model_fn, process, initial_state = shiftex.build_process(task, element_spec, hparams, config)
  seconds['shiftex'] = timing.process_seconds_per_round(model_fn, process,
                                                       timing.with_client_states(rounds, initial_state))
  config = feddrift.Config(window_rounds=_WINDOW_ROUNDS, num_branches=4)
  model_fn, process = feddrift.build_process(task, element_spec, hparams, config)
  seconds['feddrift'] = timing.process_seconds_per_round(
      model_fn, process, timing.with_client_states(rounds, feddrift.initial_client_state()))
  return seconds


def _detection_and_assignment_seconds(samples: int, feature_dim: int, config: shiftex.Config) -> tuple[float, float]:
  rng = np.random.default_rng(0)
  current, previous = (tf.constant(rng.normal(size=(samples, feature_dim)), tf.float32) for _ in range(2))
  counts = [tf.constant(rng.multinomial(60, rng.dirichlet(np.ones(20))), tf.float32) for _ in range(2)]
  weights = tf.ones([samples])

  @tf.function
  def detect():  # A party's two permutation tests in a census round (`shiftex.build_client_round`).
    seed = tf.constant([1, 2])
    return (drift_statistics.mmd_permutation_test(current, weights, previous, weights, seed, config.permutations),
            drift_statistics.jsd_permutation_test(*counts, seed + 2, config.permutations))

  centers = rng.normal(0, 5, size=(3, feature_dim))
  state = tf.nest.map_structure(tf.constant, shiftex.initial_server_state(feature_dim, 2, 20, config)._replace(
      pending_profiles=(centers[np.arange(config.census_capacity) % 3]
                        + rng.normal(size=(config.census_capacity, feature_dim))).astype(np.float32),
      pending_count=np.int32(config.census_capacity), pending_sizes=np.ones([config.census_capacity], np.float32),
      profile_gamma=np.float32(0.01)))
  assign = tf.function(lambda state: shiftex.assign_clusters(state, config))
  timings = []
  for fn, arg in ((detect, ()), (assign, (state,))):
    fn(*arg)  # Trace.
    timings.append(timing.seconds_per_round(lambda _: fn(*arg), [None] * (timing.WARMUP_ROUNDS + 20)))
  return timings[0], timings[1]


def main(argv):
  del argv  # Unused.
  execution_context.install()
  tf.get_logger().setLevel('ERROR')
  print(f'clients/round {_CLIENTS_PER_ROUND.value}, batch {timing.BATCH_SIZE}, {_ROUNDS.value} timed rounds, '
        f'windows of {_WINDOW_ROUNDS} rounds')
  task, rounds = _windowed('synthetic')
  print(timing.ratio_line('synthetic windowed', _round_seconds(task, rounds), 'fedavg'))
  config = shiftex.Config(census_capacity=320)  # 320 shifted parties to cluster.
  detection, assignment = _detection_and_assignment_seconds(32, 512, config)
  print(f'one party\'s detection (two permutation tests, 32 + 32 embeddings of 512 dimensions): '
        f'{1000 * detection:.2f} ms; '
        f'the window\'s assignment ({config.census_capacity} profiles, k <= {config.max_clusters}): '
        f'{1000 * assignment:.1f} ms')


if __name__ == '__main__':
  app.run(main)
