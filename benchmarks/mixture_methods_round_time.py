"""pFedEM's, CFL's and FedGMM's seconds per round against Vanilla's on the same clients.

Workloads: the synthetic task and EMNIST-shaped data (`clustering_round_time`'s), 10 clients per round, the same
sampled clients and batches for every method, all as TFF learning processes. pFedEM runs with its defaults
(K = 2 full networks, the GMM over network 1's features) and with `branches`; CFL with 2 networks. Both train
K networks' worth of parameters where Vanilla's K-branch network shares its extractor, so the network, not the
method's extra work, is most of the ratio; `vanilla_networks` (Vanilla's client work on the same 2-network model)
separates the two. FedGMM runs with 2 Gaussians x 2 learners (2 networks; full covariances over x itself on the
synthetic task, over a 48-dimensional random projection of x on EMNIST-shaped data).

    bazel run //benchmarks:mixture_methods_round_time -- --rounds=20
"""

import collections
import os

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

from absl import app
from absl import flags
import tensorflow as tf

from algorithms.core import evaluation
from algorithms.core import learning_process
from algorithms.core import method
from algorithms.methods import cfl
from algorithms.methods import fedgmm
from algorithms.methods import pfedem
from algorithms.methods import vanilla
from benchmarks import timing
from models import multi_branch
from utils import execution_context

_ROUNDS = flags.DEFINE_integer('rounds', 20, 'Timed rounds (after 3 warm-up rounds).')
_CLIENTS_PER_ROUND = flags.DEFINE_integer('clients_per_round', 10, 'Clients per round.')
_CLIENT_LR, _SERVER_LR, _EPSILON = 0.05, 0.01, 1e-4
_SERVER_STEP = learning_process.ServerStep.named('adam', _SERVER_LR, _EPSILON)


def _seconds(algorithm_or_process, model_fn, rounds, initial_client_state=None):
  process = getattr(algorithm_or_process, 'process', algorithm_or_process)
  if initial_client_state is not None:
    rounds = timing.with_client_states(rounds, initial_client_state)
  return timing.process_seconds_per_round(model_fn, process, rounds)


def _measure(task, rounds):
  element_spec = rounds[0][0].element_spec
  hparams = method.Hyperparameters(_CLIENT_LR, _SERVER_STEP, num_branches=2)
  evaluator = evaluation.Evaluator(task.model_fn(2), {})
  branches_fn = lambda: task.model_fn(2)
  networks_fn = lambda: multi_branch.build_multi_network_model(lambda: task.model_fn(1), 2)
  seconds = collections.OrderedDict()
  for name, model_fn in (('vanilla', branches_fn), ('vanilla_networks', networks_fn)):
    process = vanilla.build_process(model_fn, task.batch_fn, element_spec, _CLIENT_LR, _SERVER_STEP)
    seconds[name] = _seconds(process, model_fn, rounds)
  for name, config in (('pfedem', pfedem.Config()), ('pfedem_branches', pfedem.Config(submodels='branches'))):
    algorithm = pfedem.build_algorithm(task, element_spec, hparams, evaluator, config)
    seconds[name] = _seconds(algorithm, algorithm.model_fn, rounds)
  algorithm = cfl.build_algorithm(task, element_spec, hparams, evaluator, cfl.Config())
  seconds['cfl'] = _seconds(algorithm, algorithm.model_fn, rounds, cfl.initial_client_state())
  features = 'raw' if task.name == 'synthetic' else 'random_projection'
  config = fedgmm.Config(gaussians=2, learners=2, features=features)
  algorithm = fedgmm.build_algorithm(task, element_spec, hparams, evaluator, config)
  seconds['fedgmm'] = _seconds(algorithm, algorithm.model_fn, rounds, fedgmm.initial_client_state(config))
  return seconds


def main(argv):
  del argv  # Unused.
  execution_context.install()
  tf.get_logger().setLevel('ERROR')
  print(f'clients/round {_CLIENTS_PER_ROUND.value}, {_ROUNDS.value} timed rounds')
  for name in ('synthetic', 'emnist_shaped'):
    task, rounds = timing.periodic_workload(name, _ROUNDS.value + timing.WARMUP_ROUNDS, _CLIENTS_PER_ROUND.value)
    print(timing.ratio_line(name, _measure(task, rounds), 'vanilla'))


if __name__ == '__main__':
  app.run(main)
