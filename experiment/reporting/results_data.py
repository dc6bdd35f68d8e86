"""A grid's results as data: one CSV row per finished run (`docs/results/data/<grid>.csv`), kilobytes where the run
directories are megabytes, committed beside the pages they make.

A row holds the run's name, the grid's swept flags (the seed among them), the method as the report names it (marked
when the run read test labels or test domains, or is the No-Dist-Shift reference), the figures the page's tables
and claims read (`report_tables.run_metrics` of the run's summary), and its provenance: the commit it ran from and
the grid's command, as the matrix recorded them when the run finished (`matrix_runner.provenance_path`). A run
without that record is refused, never guessed: a row's commit is what `experiment.reporting.staleness` compares with
the history of the code its methods import. Unfinished runs and runs outside the grid are left out; the tables say
how many seeds each row has.
"""

import csv
import io
import json
import os
from typing import Sequence

from experiment.core import grid as grid_lib
from experiment.core import matrix_runner

RUN, COMMIT, COMMAND = 'run', 'commit', 'command'
# The method as the report names it: with its marks when its run read test labels or test domains, or is the
# No-Dist-Shift reference (`run_results.method_name`).
REPORTED_AS = 'reported_as'
DATA_DIR = os.path.join('docs', 'results', 'data')


class DataError(ValueError):
  """Runs that cannot be collected; its message names them."""


def path(repository: str, grid_name: str) -> str:
  return os.path.join(repository, DATA_DIR, f'{grid_name}.csv')


def _figure(value: float) -> str:
  return format(float(value), '.10g')


def collect(grid: grid_lib.Grid, root: str, figures: Sequence[str]) -> list[dict]:
  """The rows of the grid's finished runs under `root`, with `figures` (module docstring)."""
  # Imported here: the report's tables import TensorFlow (through the routing summary), which reading, writing and
  # checking the data files do not need.
  from experiment.reporting import report_tables  # pylint: disable=g-import-not-at-top
  from experiment.reporting import run_results  # pylint: disable=g-import-not-at-top
  finished = {run.name: run for run in run_results.load(root) if run.finished}
  swept = [flag for flag, _ in grid.sweep]
  rows, unrecorded = [], []
  for run in grid.runs():
    if run.name not in finished:
      continue
    provenance_file = matrix_runner.provenance_path(root, run.name)
    if not os.path.exists(provenance_file):
      unrecorded.append(run.name)
      continue
    with open(provenance_file) as f:
      provenance = json.load(f)
    metrics = report_tables.run_metrics(finished[run.name])
    settings = dict(run.settings)
    method = {} if 'algorithm' in settings else {'algorithm': dict(run.flags)['algorithm']}  # Fixed by the grid.
    rows.append({RUN: run.name, **method, **{flag: settings[flag] for flag in swept},
                 REPORTED_AS: run_results.method_name(finished[run.name]),
                 **{figure: _figure(metrics[figure]) if figure in metrics else '' for figure in figures},
                 COMMIT: provenance['commit'], COMMAND: provenance['command']})
  if unrecorded:
    raise DataError(f'{len(unrecorded)} finished runs have no provenance record ({", ".join(unrecorded[:5])}'
                    f'{", ..." if len(unrecorded) > 5 else ""}): run them with experiment.matrix.')
  return rows


def to_csv(rows: Sequence[dict]) -> str:
  output = io.StringIO()
  writer = csv.DictWriter(output, fieldnames=list(rows[0]), lineterminator='\n')
  writer.writeheader()
  writer.writerows(rows)
  return output.getvalue()


def read(csv_path: str) -> list[dict]:
  """The rows of a data file, each a dict of strings."""
  with open(csv_path, newline='') as f:
    return list(csv.DictReader(f))
