"""Seconds per metrics.csv row: TFF's `tff.program.CSVFileReleaseManager` against the suite's appending
`experiment.core.run_directory.MetricsReleaseManager`, at the rows a long run reaches.

Each manager releases `--rows` rows of `--columns` float columns (key `round`) into a new file, as the training loop
does once a round; prints the milliseconds of the releases of rows 10, rows / 2 and rows, the total, and the ratio.
TFF 0.87 reads and rewrites the whole file at every release (its cost grows with the rows, so a run's grows with
the square of its rounds); the suite's appends the row (the same bytes: `run_directory_test`).

    bazel run //benchmarks:metrics_release_time -- --columns=300 --rows=500
    bazel run //benchmarks:metrics_release_time -- --columns=30 --rows=2000
"""

import asyncio
import collections
import os
import tempfile
import time

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

from absl import app
from absl import flags
import tensorflow_federated as tff

from experiment.core import run_directory

_COLUMNS = flags.DEFINE_integer('columns', 300, 'Columns of each row (ShiftEx on `windowed`: 1,529).')
_ROWS = flags.DEFINE_integer('rows', 500, 'Rows released, one per round.')


def _release_seconds(manager_class, path: str) -> tuple[float, dict[int, float]]:
  """(total seconds, {row: seconds of its release} at rows 10, rows / 2 and rows)."""
  manager = manager_class(path, key_fieldname='round')
  row = collections.OrderedDict((f'metric_{column}', 0.5) for column in range(_COLUMNS.value))
  marks, started = {}, time.monotonic()
  for key in range(1, _ROWS.value + 1):
    release_started = time.monotonic()
    asyncio.run(manager.release(row, key=key))
    if key in (10, _ROWS.value // 2, _ROWS.value):
      marks[key] = time.monotonic() - release_started
  return time.monotonic() - started, marks


def main(argv):
  del argv  # Unused.
  totals = {}
  with tempfile.TemporaryDirectory() as scratch:
    for name, manager_class in (('TFF CSVFileReleaseManager', tff.program.CSVFileReleaseManager),
                                ('suite MetricsReleaseManager', run_directory.MetricsReleaseManager)):
      totals[name], marks = _release_seconds(manager_class, os.path.join(scratch, f'{len(totals)}.csv'))
      print(f'{name}: {_ROWS.value} rows of {_COLUMNS.value} columns in {totals[name]:.1f} s; one release '
            + ', '.join(f'{1000 * seconds:.1f} ms at row {key}' for key, seconds in marks.items()), flush=True)
  tff_total, suite_total = totals.values()
  print(f'TFF / suite: {tff_total / suite_total:.1f}x')


if __name__ == '__main__':
  app.run(main)
