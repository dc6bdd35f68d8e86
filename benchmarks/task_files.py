"""Files of the paper tasks' real layouts and shapes for benchmarks (the real datasets cannot be downloaded here),
written with `tasks.testing.fake_tff_files`, with client sizes like the real ones:

  emnist         clients of ~100 digits and ~97 characters (Table 1: 341,873 / 3,383 and 329,712 / 3,400);
  emnist_real_digits  the EMNIST layout holding real handwriting: scikit-learn's 1,797 digits (8 x 8, counts 0-16)
                 drawn as EMNIST draws its own (each 8 x 8 image resized bilinearly to 20 x 20 and centred in 28 x 28,
                 ink dark on a background of 1.0, TFF's EMNIST convention), writers of 30 digits in a seeded order,
                 a fifth of the digits (seeded) as `all_test`; no characters;
  emnist_real_digits_night  as emnist_real_digits with a night mode made of real handwriting: each digit, by a
                 seeded coin, is either as written or turned 90 degrees counter-clockwise and labelled 10 + digit,
                 which the emnist task reads as its character (night) mode (writers hold both modes); a transform
                 other than the `digits` task's mirroring, 10 classes per mode;
  cifar          CIFAR-10 clients of 100 images (the task's split), CIFAR-100 clients of 100 (TFF's);
  stackoverflow  users whose questions and answers number log-normally (median 60) with 20-word sentences; each
                 client trains on at most 512 of them (Table 2).

Test sets are small (200 examples; Stack Overflow's 50 questions and 50 answers) unless `paper_test_sets`, which writes test sets of the sizes the tasks evaluate
on: EMNIST's whole `all_test` (77,483 examples, digits in the training split's share), CIFAR-10's and CIFAR-100's
10,000 images each, and Stack Overflow's 10,000 questions and 10,000 answers (`tasks.stackoverflow`'s test sets).
"""

import os

import numpy as np
from sklearn import datasets
import tensorflow as tf

from tasks.testing import fake_tff_files

_EMNIST_TEST_EXAMPLES, _EMNIST_DIGIT_SHARE = 77_483, 341_873 / (341_873 + 329_712)
_CIFAR_TEST_EXAMPLES = 10_000
_STACKOVERFLOW_TEST_PER_TYPE, _SMALL_STACKOVERFLOW_TEST_PER_TYPE = 10_000, 50
_SMALL_TEST = 200


def _write_emnist(directory, rng, paper_test_sets):
  clients = {f'w{i}': np.concatenate([rng.integers(0, 10, max(int(rng.normal(101, 30)), 10)),
                                      rng.integers(10, 62, max(int(rng.normal(97, 30)), 10))])
             for i in range(40)}
  fake_tff_files.write_sqlite(os.path.join(directory, 'emnist_all.sqlite'), {
      'all_train': {w: fake_tff_files.emnist_elements(rng, labels) for w, labels in clients.items()},
      'all_test': {'w0': fake_tff_files.emnist_elements(rng, _emnist_test_labels(rng, paper_test_sets))}})


def _emnist_test_labels(rng, paper_test_sets):
  if not paper_test_sets:
    return rng.integers(0, 62, _SMALL_TEST)
  digits = rng.random(_EMNIST_TEST_EXAMPLES) < _EMNIST_DIGIT_SHARE
  return np.where(digits, rng.integers(0, 10, _EMNIST_TEST_EXAMPLES), rng.integers(10, 62, _EMNIST_TEST_EXAMPLES))


def _write_cifar(directory, rng, paper_test_sets):
  test_size = _CIFAR_TEST_EXAMPLES if paper_test_sets else _SMALL_TEST
  fake_tff_files.write_cifar10(os.path.join(directory, 'cifar-10-batches-py'), rng, train_per_batch=600,
                               test_size=test_size)
  fake_tff_files.write_sqlite(os.path.join(directory, 'cifar100.sqlite'), {
      'train': {str(i): fake_tff_files.cifar100_elements(rng, rng.integers(0, 100, 100)) for i in range(30)},
      'test': {'0': fake_tff_files.cifar100_elements(rng, rng.integers(0, 100, test_size))}})


def _write_stackoverflow(directory, rng, paper_test_sets):
  os.makedirs(os.path.join(directory, 'datasets'), exist_ok=True)
  with open(os.path.join(directory, 'datasets', 'stackoverflow.word_count'), 'w') as f:
    f.writelines(f'w{i} {100000 - i}\n' for i in range(10000))

  def sentences(count, kind):
    return [(' '.join(f'w{j}' for j in rng.zipf(1.3, 20) % 12000), kind) for _ in range(count)]

  test_per_type = _STACKOVERFLOW_TEST_PER_TYPE if paper_test_sets else _SMALL_STACKOVERFLOW_TEST_PER_TYPE
  users = {}
  for i in range(120):
    size = lambda: int(np.clip(rng.lognormal(np.log(60), 1.0), 1, 2000))
    users[f'u{i}'] = fake_tff_files.stackoverflow_elements(sentences(size(), 'question') +
                                                          sentences(size(), 'answer'))
  fake_tff_files.write_sqlite(os.path.join(directory, 'stackoverflow.sqlite'), {
      'train': users, 'heldout': {'h': fake_tff_files.stackoverflow_elements(sentences(1, 'question'))},
      'test': {'t': fake_tff_files.stackoverflow_elements(sentences(test_per_type, 'question') +
                                                          sentences(test_per_type, 'answer'))}})


def emnist_layout_digits() -> tuple[np.ndarray, np.ndarray]:
  """(pixels [1797, 28, 28] float32, labels [1797] int64): scikit-learn's digits drawn as EMNIST draws its own (the
  module docstring's `emnist_real_digits`)."""
  digits = datasets.load_digits()
  ink = tf.image.resize(digits.images[..., None].astype(np.float32) / 16.0, (20, 20), 'bilinear').numpy()[..., 0]
  pixels = 1.0 - np.pad(np.clip(ink, 0.0, 1.0), ((0, 0), (4, 4), (4, 4)))
  return pixels.astype(np.float32), digits.target.astype(np.int64)


def _write_emnist_real_digits(directory, rng, paper_test_sets):
  del paper_test_sets  # The digits are what they are.
  _write_emnist_digits(directory, rng, *emnist_layout_digits())


def _write_emnist_digits(directory, rng, pixels, labels):
  """Writers of 30 examples in a seeded order and a fifth of the examples (seeded) as `all_test`."""
  order = rng.permutation(len(pixels))
  test, train = order[:len(order) // 5], order[len(order) // 5:]
  element = lambda i: {'label': labels[i], 'pixels': pixels[i]}
  writers = {f'd{w:03d}': [element(i) for i in train[start:start + 30]]
             for w, start in enumerate(range(0, len(train), 30))}
  fake_tff_files.write_sqlite(os.path.join(directory, 'emnist_all.sqlite'), {
      'all_train': writers, 'all_test': {'t0': [element(i) for i in test]}})


def _write_emnist_real_digits_night(directory, rng, paper_test_sets):
  del paper_test_sets  # The digits are what they are.
  pixels, labels = emnist_layout_digits()
  night = rng.random(len(pixels)) < 0.5
  pixels = np.where(night[:, None, None], np.rot90(pixels, axes=(1, 2)), pixels)
  _write_emnist_digits(directory, rng, pixels, np.where(night, labels + 10, labels))


_WRITERS = {'emnist': _write_emnist, 'emnist_real_digits': _write_emnist_real_digits,
            'emnist_real_digits_night': _write_emnist_real_digits_night, 'cifar': _write_cifar,
            'stackoverflow': _write_stackoverflow}


def write(task: str, directory: str, rng: np.random.Generator, paper_test_sets: bool = False) -> None:
  """Writes `task`'s files where the task's loader reads them with `--cache_dir=directory`."""
  _WRITERS[task](directory, rng, paper_test_sets)
