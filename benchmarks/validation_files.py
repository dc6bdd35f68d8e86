"""Validation splits carved from training data, for tuning what a paper leaves unstated without looking at the test
split: of `benchmarks.task_files`' real-handwriting EMNIST layout (`--cache_dir`), and of the real Fashion-MNIST
(`--fashion_mnist_dir`).

    python -m benchmarks.validation_files DIR [--seed=0]
    python -m benchmarks.validation_files DIR --data=fashion_mnist [--seed=0] [--fashion_mnist_dir=Debian's]

`emnist_real_digits` (written with `numpy.random.default_rng(seed)`) holds a seeded fifth of scikit-learn's digits
as its test split (`all_test`) and the rest as writers of 30 digits. This writes the same layout from the rest only:
the test fifth is dropped, a seeded fifth of the remaining digits becomes `all_test` (the validation split) and the
others become writers of 30. A run with `--cache_dir=DIR` then trains and "tests" on training digits only; no digit
of the real test split is read. The test fifth is found as `task_files` finds it: the first permutation its seed
draws.

`fashion_mnist` writes Fashion-MNIST's four IDX files (`tasks.fashion_mnist_files`) from its 60,000 training images
only: a seeded fifth (12,000) as the "test" files (the validation split) and the other 48,000 as the training files.
A run with `--fashion_mnist_dir=DIR` then reads no image of the real test split.
"""

import gzip

import argparse
import os
import sys

import numpy as np

from benchmarks import task_files
from tasks import fashion_mnist_files
from tasks.testing import fake_tff_files

_WRITER_SIZE = 30


def split(count: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """(test, validation, train) indices of `count` digits: the test fifth of `emnist_real_digits` with `seed`, a fifth
  of the rest by a second seeded draw, and the remaining indices."""
  rng = np.random.default_rng(seed)
  order = rng.permutation(count)  # `task_files`' own first draw: its test split is order[:count // 5].
  test, rest = order[:count // 5], order[count // 5:]
  rest = rest[np.random.default_rng([seed, 1]).permutation(len(rest))]
  return test, rest[:len(rest) // 5], rest[len(rest) // 5:]


def write(directory: str, seed: int = 0) -> None:
  """Writes the validation layout of `emnist_real_digits` with `seed` into `directory` (`--cache_dir`)."""
  pixels, labels = task_files.emnist_layout_digits()
  _, validation, train = split(len(pixels), seed)
  element = lambda i: {'label': labels[i], 'pixels': pixels[i]}
  writers = {f'd{w:03d}': [element(i) for i in train[start:start + _WRITER_SIZE]]
             for w, start in enumerate(range(0, len(train), _WRITER_SIZE))}
  os.makedirs(directory, exist_ok=True)
  fake_tff_files.write_sqlite(os.path.join(directory, 'emnist_all.sqlite'), {
      'all_train': writers, 'all_test': {'t0': [element(i) for i in validation]}})


def _write_idx(path: str, array: np.ndarray) -> None:
  """`array` (uint8) as a gzipped IDX file: zero, zero, 0x08 (unsigned bytes), its dimensions, then its bytes."""
  header = bytes([0, 0, 0x08, array.ndim]) + np.asarray(array.shape, '>u4').tobytes()
  with gzip.open(path, 'wb', compresslevel=1) as f:  # Written once, read a few times: speed over size.
    f.write(header + np.ascontiguousarray(array, np.uint8).tobytes())


def fashion_split(count: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
  """(validation, train) indices of Fashion-MNIST's `count` training images: a seeded fifth, and the rest."""
  order = np.random.default_rng([seed, 2]).permutation(count)
  return order[:count // 5], order[count // 5:]


def write_fashion_mnist(directory: str, seed: int = 0, source: str = None) -> None:
  """Writes the validation layout of Fashion-MNIST's training images (read from `source`, default Debian's) into
  `directory` (`--fashion_mnist_dir`)."""
  images, labels = fashion_mnist_files.load(source)['train']
  validation, train = fashion_split(len(labels), seed)
  os.makedirs(directory, exist_ok=True)
  for split, chosen in (('train', train), ('test', validation)):
    images_file, labels_file = fashion_mnist_files.FILES[split]
    _write_idx(os.path.join(directory, images_file), images[chosen])
    _write_idx(os.path.join(directory, labels_file), labels[chosen].astype(np.uint8))


def main(argv) -> int:
  parser = argparse.ArgumentParser(prog='validation_files')
  parser.add_argument('directory')
  parser.add_argument('--seed', type=int, default=0)
  parser.add_argument('--data', choices=('emnist_real_digits', 'fashion_mnist'), default='emnist_real_digits')
  parser.add_argument('--fashion_mnist_dir', default=None)
  args = parser.parse_args(argv)
  if args.data == 'fashion_mnist':
    write_fashion_mnist(args.directory, args.seed, args.fashion_mnist_dir)
  else:
    write(args.directory, args.seed)
  return 0


if __name__ == '__main__':
  sys.exit(main(sys.argv[1:]))
