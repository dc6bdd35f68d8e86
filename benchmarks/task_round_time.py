"""Seconds per round of Vanilla, FedTEM and FedTKM on the paper's tasks at Table 2 settings, on this machine.

The real datasets cannot be downloaded here, so each task reads files of the real layouts and shapes, with client
sizes like the real ones (`benchmarks.task_files`), through the task's real loader.

Table 2 settings: 10 clients per round and batch 20 (EMNIST, CIFAR), 50 clients and batch 16 (Stack Overflow),
one local epoch. Timing starts after 3 warm-up rounds.

    bazel run //benchmarks:task_round_time -- --rounds=5 --tasks=emnist,cifar,stackoverflow
"""

import collections
import os
import tempfile

# Quiet TensorFlow C++ logs here and in TFF's worker process (set TF_CPP_MIN_LOG_LEVEL=0 to see them).
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

from absl import app
from absl import flags
import numpy as np
import tensorflow as tf

from algorithms.core import learning_process
from algorithms.methods import fedtem
from algorithms.methods import fedtkm
from algorithms.methods import vanilla
from benchmarks import task_files
from benchmarks import timing
from tasks import registry
from utils import execution_context

_ROUNDS = flags.DEFINE_integer('rounds', 5, 'Timed rounds per method (after 3 warm-up rounds).')
_TASKS = flags.DEFINE_list('tasks', ['emnist', 'cifar', 'stackoverflow'], 'Tasks to time.')
_METHODS = flags.DEFINE_list('methods', ['vanilla', 'fedtem', 'fedtkm'], 'Methods to time.')


def _build(method, model_fn, task, element_spec, defaults):
  args = (model_fn, task.batch_fn, element_spec, defaults['client_learning_rate'],
          defaults['server_learning_rate'], defaults['server_adam_epsilon'])
  if method == 'vanilla':
    return vanilla.build_process(*args)
  if method == 'fedtem':
    return fedtem.build_process(*args, 2, 2, fedtem.Config(period=defaults['period']))
  return fedtkm.build_process(*args, 2, 2, fedtkm.Config(period=defaults['period']))


def _seconds_per_round(process, model_fn, rounds):
  state = [process.set_model_weights(process.initialize(), learning_process.initial_weights(model_fn, 0))]

  def step(datasets):
    state[0] = process.next(state[0], datasets).state

  return timing.seconds_per_round(step, rounds)


def main(argv):
  del argv  # Unused.
  execution_context.install()
  tf.get_logger().setLevel('ERROR')
  rng = np.random.default_rng(0)
  results = collections.defaultdict(dict)
  with tempfile.TemporaryDirectory() as cache_dir:
    for name in _TASKS.value:
      task_files.write(name, cache_dir, rng)
      defaults = registry.defaults(name)
      task = registry.create(name, cache_dir, seed=0)
      rounds = timing.round_datasets(task, _ROUNDS.value + timing.WARMUP_ROUNDS, defaults['clients_per_round'],
                                     defaults['client_batch_size'], defaults.get('max_elements_per_client'))
      model_fn = lambda task=task: task.model_fn(2)
      for method in _METHODS.value:
        process = _build(method, model_fn, task, rounds[0][0].element_spec, defaults)
        results[name][method] = _seconds_per_round(process, model_fn, rounds)
        print(f'{name:14s} {method:8s} {results[name][method]:7.2f} s/round '
              f'({defaults["clients_per_round"]} clients, batch {defaults["client_batch_size"]})', flush=True)


if __name__ == '__main__':
  app.run(main)
