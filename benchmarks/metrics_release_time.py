"""Seconds per metrics row released, TFF's release managers against the suite's, at the rows a long run reaches.

The training loop releases every round's row to metrics.csv and to TensorBoard. For each `--outputs`:
- `csv`: TFF's `tff.program.CSVFileReleaseManager` against the suite's appending
  `experiment.core.run_directory.MetricsReleaseManager`. TFF 0.87 reads and rewrites the whole file at every release
  (its cost grows with the rows, so a run's grows with the square of its rounds); the suite's appends the row (the
  same bytes: `run_directory_test`).
- `tensorboard`: TFF's `tff.program.TensorBoardReleaseManager` (`tf.summary.scalar` per value, in eager mode)
  against the suite's `run_directory.TensorBoardReleaseManager` (a row's scalars in one traced call; the same events:
  `run_directory_test`).
Each manager releases `--rows` rows of `--columns` float columns (key `round`); prints the milliseconds of the
releases of rows 10, rows / 2 and rows, the total, the ratio, and the Python memory blocks kept per row
(`sys.getallocatedblocks` after the last row against after row 10; TF 2.14 on Python 3.11 keeps 16 bytes of every
eager tensor, `run_directory.TensorBoardReleaseManager`'s docstring).

    bazel run //benchmarks:metrics_release_time -- --columns=300 --rows=500
    bazel run //benchmarks:metrics_release_time -- --columns=30 --rows=2000
    bazel run //benchmarks:metrics_release_time -- --columns=2500 --rows=200 --outputs=tensorboard
"""

import asyncio
import collections
import gc
import os
import sys
import tempfile
import time

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

from absl import app
from absl import flags
import tensorflow_federated as tff

from experiment.core import run_directory

_COLUMNS = flags.DEFINE_integer('columns', 300, 'Columns of each row (ShiftEx on `windowed` at 2,000 rounds: 3,033).')
_ROWS = flags.DEFINE_integer('rows', 500, 'Rows released, one per round.')
_OUTPUTS = flags.DEFINE_multi_enum('outputs', ['csv', 'tensorboard'], ['csv', 'tensorboard'], 'Where rows go.')

# Output -> [(name, a manager writing into a new path)], TFF's first.
_MANAGERS = {
    'csv': [('TFF CSVFileReleaseManager',
             lambda path: tff.program.CSVFileReleaseManager(path + '.csv', key_fieldname='round')),
            ('suite MetricsReleaseManager',
             lambda path: run_directory.MetricsReleaseManager(path + '.csv', key_fieldname='round'))],
    'tensorboard': [('TFF TensorBoardReleaseManager', tff.program.TensorBoardReleaseManager),
                    ('suite TensorBoardReleaseManager', run_directory.TensorBoardReleaseManager)],
}


def _release_seconds(manager) -> tuple[float, dict[int, float], float]:
  """(total seconds, {row: seconds of its release} at rows 10, rows / 2 and rows, blocks kept per row)."""
  row = collections.OrderedDict((f'metric_{column}', 0.5) for column in range(_COLUMNS.value))
  marks, started, blocks = {}, time.monotonic(), {}
  for key in range(1, _ROWS.value + 1):
    release_started = time.monotonic()
    asyncio.run(manager.release(row, key=key))
    if key in (10, _ROWS.value // 2, _ROWS.value):
      marks[key] = time.monotonic() - release_started
    if key in (10, _ROWS.value):
      gc.collect()
      blocks[key] = sys.getallocatedblocks()
  return time.monotonic() - started, marks, (blocks[_ROWS.value] - blocks[10]) / max(_ROWS.value - 10, 1)


def main(argv):
  del argv  # Unused.
  with tempfile.TemporaryDirectory() as scratch:
    for output in _OUTPUTS.value:
      totals = []
      for name, make in _MANAGERS[output]:
        total, marks, blocks = _release_seconds(make(os.path.join(scratch, f'{output}_{len(totals)}')))
        totals.append(total)
        print(f'{name}: {_ROWS.value} rows of {_COLUMNS.value} columns in {total:.1f} s; one release '
              + ', '.join(f'{1000 * seconds:.1f} ms at row {key}' for key, seconds in marks.items())
              + f'; {blocks:.0f} Python blocks kept a row', flush=True)
      print(f'{output}: TFF / suite {totals[0] / totals[1]:.1f}x', flush=True)


if __name__ == '__main__':
  app.run(main)
