"""Files of the paper tasks' real layouts and shapes for benchmarks (the real datasets cannot be downloaded here),
written with `tasks.fake_tff_files`, with client sizes like the real ones:

  emnist         clients of ~100 digits and ~97 characters (Table 1: 341,873 / 3,383 and 329,712 / 3,400);
  cifar          CIFAR-10 clients of 100 images (the task's split), CIFAR-100 clients of 100 (TFF's);
  stackoverflow  users whose questions and answers number log-normally (median 60) with 20-word sentences; each
                 client trains on at most 512 of them (Table 2).
"""

import os

import numpy as np

from tasks import fake_tff_files

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


def write(task: str, directory: str, rng: np.random.Generator) -> None:
  """Writes `task`'s files where the task's loader reads them with `--cache_dir=directory`."""
  _WRITERS[task](directory, rng)
