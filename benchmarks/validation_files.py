"""A validation split carved from the training data of `benchmarks.task_files`' real-handwriting EMNIST layout, for
tuning what a paper leaves unstated without looking at the test split.

    python -m benchmarks.validation_files DIR [--seed=0]

`emnist_real_digits` (written with `numpy.random.default_rng(seed)`) holds a seeded fifth of scikit-learn's digits
as its test split (`all_test`) and the rest as writers of 30 digits. This writes the same layout from the rest only:
the test fifth is dropped, a seeded fifth of the remaining digits becomes `all_test` (the validation split) and the
others become writers of 30. A run with `--cache_dir=DIR` then trains and "tests" on training digits only; no digit
of the real test split is read. The test fifth is found as `task_files` finds it: the first permutation its seed
draws.
"""

import argparse
import os
import sys

import numpy as np

from benchmarks import task_files
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


def main(argv) -> int:
  parser = argparse.ArgumentParser(prog='validation_files')
  parser.add_argument('directory')
  parser.add_argument('--seed', type=int, default=0)
  args = parser.parse_args(argv)
  write(args.directory, args.seed)
  return 0


if __name__ == '__main__':
  sys.exit(main(sys.argv[1:]))
