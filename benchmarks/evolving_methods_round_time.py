"""FedEvolve's, FedEvp's and FedRep's seconds per round against FedAvg's on the same clients (Tan et al., 2024).

Workloads: the synthetic task and Circle under `evolving_domains` (synthetic: 5 domains rotated 20 degrees apart,
each client holding its 4 sources; Circle: the paper's 30 domains, 29 sources), the same sampled clients and
batches for every method, all as TFF learning processes. FedAvg is the task's single-branch network (on both
tasks the same layers as FedEvp's tower and head); FedEvolve trains two towers and no head; each with every
layout of its batches: by stage (FedEvolve's `stage_pairs`, FedEvp's `stage_sweep` and `stage_strata`) and the
client's mixed batches (`packed`); FedRep (default 10
head epochs and one representation epoch) every client at its first round (the same computation as later rounds).

    bazel run //benchmarks:evolving_methods_round_time -- --rounds=10
"""

import collections
import os

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

from absl import app
from absl import flags
import tensorflow as tf

from algorithms.core import learning_process
from algorithms.core import method
from algorithms.methods import fedevolve
from algorithms.methods import fedevp
from algorithms.methods import fedrep
from algorithms.methods import vanilla
from benchmarks import timing
from periodic_shift import evolving_domains
from utils import execution_context

_ROUNDS = flags.DEFINE_integer('rounds', 10, 'Timed rounds (after the warm-up rounds).')
_CLIENTS_PER_ROUND = flags.DEFINE_integer('clients_per_round', 10, 'Clients per round.')
_BATCH_SIZE = flags.DEFINE_integer('batch_size', 128, 'Client batch size (docs/results/fedevolve.md\'s runs use 128).')
_CLIENT_LR, _SERVER_LR, _EPSILON = 0.05, 0.01, 1e-4
_SERVER_STEP = learning_process.ServerStep.named('adam', _SERVER_LR, _EPSILON)


def _evolving(task, num_domains, rotation_step, num_clients):
  """The task with the scenario's domains, and per round its sampled clients' datasets, as a run builds them."""
  settings = evolving_domains.Settings(num_domains=num_domains, rotation_step=rotation_step, num_clients=num_clients)
  return timing.run_data(task, 'evolving_domains', settings, _ROUNDS.value + timing.WARMUP_ROUNDS,
                         _CLIENTS_PER_ROUND.value, _BATCH_SIZE.value)


def _measure(task, rounds):
  element_spec = rounds[0][0].element_spec
  hparams = method.Hyperparameters(_CLIENT_LR, _SERVER_STEP, num_branches=1)
  seconds = collections.OrderedDict()
  model_fn, process = vanilla.build_single_network_process(task, element_spec, _CLIENT_LR, _SERVER_STEP)
  seconds['fedavg'] = timing.process_seconds_per_round(model_fn, process, rounds)
  for name, module in (('fedevp', fedevp), ('fedevolve', fedevolve)):
    for batching in module.BATCHINGS:
      seconds[f'{name}_{batching}'] = timing.process_seconds_per_round(
          *module.build_process(task, element_spec, hparams, module.Config(batching=batching)), rounds)
  model_fn, process, initial_state = fedrep.build_process(task, element_spec, hparams, fedrep.Config())
  seconds['fedrep'] = timing.process_seconds_per_round(model_fn, process,
                                                      timing.with_client_states(rounds, initial_state))
  return seconds


def main(argv):
  del argv  # Unused.
  execution_context.install()
  tf.get_logger().setLevel('ERROR')
  print(f'clients/round {_CLIENTS_PER_ROUND.value}, batch {_BATCH_SIZE.value}, {_ROUNDS.value} timed rounds')
  for name, (task, rounds) in (('synthetic', _evolving('synthetic', 5, 20.0, 20)),
                               ('circle', _evolving('circle', 30, 180.0 / 29, 20))):
    print(timing.ratio_line(name, _measure(task, rounds), 'fedavg'))


if __name__ == '__main__':
  app.run(main)
