"""Seconds per round of Vanilla, FedTEM and FedTKM on the paper's tasks at Table 2 settings, on this machine.

The real datasets cannot be downloaded here, so each task reads files of the real layouts and shapes written to a
temporary directory (`tasks.fake_tff_files`) through the task's real loader, with client sizes like the real ones:

  emnist         clients of ~100 digits and ~97 characters (Table 1: 341,873 / 3,383 and 329,712 / 3,400);
  cifar          CIFAR-10 clients of 100 images (the task's split), CIFAR-100 clients of 100 (TFF's);
  stackoverflow  users whose questions and answers number log-normally (median 60) with 20-word sentences; each
                 client trains on at most 512 of them (Table 2).

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
from benchmarks import timing
from tasks import fake_tff_files
from tasks import registry
from utils import execution_context

_ROUNDS = flags.DEFINE_integer('rounds', 5, 'Timed rounds per method (after 3 warm-up rounds).')
_TASKS = flags.DEFINE_list('tasks', ['emnist', 'cifar', 'stackoverflow'], 'Tasks to time.')
_METHODS = flags.DEFINE_list('methods', ['vanilla', 'fedtem', 'fedtkm'], 'Methods to time.')


def _write_emnist(directory, rng):
  clients = {f'w{i}': np.concatenate([rng.integers(0, 10, max(int(rng.normal(101, 30)), 10)),
                                      rng.integers(10, 62, max(int(rng.normal(97, 30)), 10))])
             for i in range(40)}
  fake_tff_files.write_sqlite(os.path.join(directory, 'emnist_all.sqlite'), {
      'all_train': {w: fake_tff_files.emnist_elements(rng, labels) for w, labels in clients.items()},
      'all_test': {'w0': fake_tff_files.emnist_elements(rng, rng.integers(0, 62, 200))}})


def _write_cifar(directory, rng):
  fake_tff_files.write_cifar10(os.path.join(directory, 'cifar-10-batches-py'), rng, train_per_batch=600,
                               test_size=200)
  fake_tff_files.write_sqlite(os.path.join(directory, 'cifar100.sqlite'), {
      'train': {str(i): fake_tff_files.cifar100_elements(rng, rng.integers(0, 100, 100)) for i in range(30)},
      'test': {'0': fake_tff_files.cifar100_elements(rng, rng.integers(0, 100, 200))}})


def _write_stackoverflow(directory, rng):
  os.makedirs(os.path.join(directory, 'datasets'), exist_ok=True)
  with open(os.path.join(directory, 'datasets', 'stackoverflow.word_count'), 'w') as f:
    f.writelines(f'w{i} {100000 - i}\n' for i in range(10000))

  def sentences(count, kind):
    return [(' '.join(f'w{j}' for j in rng.zipf(1.3, 20) % 12000), kind) for _ in range(count)]

  users = {}
  for i in range(120):
    size = lambda: int(np.clip(rng.lognormal(np.log(60), 1.0), 1, 2000))
    users[f'u{i}'] = fake_tff_files.stackoverflow_elements(sentences(size(), 'question') +
                                                          sentences(size(), 'answer'))
  fake_tff_files.write_sqlite(os.path.join(directory, 'stackoverflow.sqlite'), {
      'train': users, 'heldout': {'h': fake_tff_files.stackoverflow_elements(sentences(1, 'question'))},
      'test': {'t': fake_tff_files.stackoverflow_elements(sentences(50, 'question') + sentences(50, 'answer'))}})


_WRITERS = {'emnist': _write_emnist, 'cifar': _write_cifar, 'stackoverflow': _write_stackoverflow}


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
      _WRITERS[name](cache_dir, rng)
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
