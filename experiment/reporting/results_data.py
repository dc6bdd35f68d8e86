"""A grid's results as data: one CSV row per finished run (`docs/results/data/<grid>.csv`), kilobytes where the run
directories are megabytes, committed beside the pages they make.

A row holds the run's name, the grid's swept flags (the seed among them), the method as the report names it (marked
when the run read test labels or test domains, or is the No-Dist-Shift reference), the figures the page's tables
and claims read (`report_tables.run_metrics` of the run's summary), and its provenance: the commit it ran from and
the grid's command, as the matrix recorded them when the run finished (`matrix_runner.provenance_path`), and the
fingerprint of its method's code at that commit (`METHOD_CODE`, which `staleness` compares with the tree's). A run
without that record, or from a tree with uncommitted changes, is refused, never guessed. Unfinished runs and runs
outside the grid are left out; the tables say how many seeds each row has.

A data file grows by merging: collecting a root replaces the rows of the runs it holds and keeps the file's other
rows of the grid, so a grid may run in parts (seeds, or the methods a code change made stale), each row with its own
provenance.
"""

import csv
import io
import json
import os
from typing import Callable, Optional, Sequence

from experiment.core import grid as grid_lib
from experiment.core import matrix_runner

RUN, COMMIT, COMMAND, METHOD_CODE = 'run', 'commit', 'command', 'method_code'
# The method as the report names it: with its marks when its run read test labels or test domains, or is the
# No-Dist-Shift reference (`run_results.method_name`).
REPORTED_AS = 'reported_as'
DATA_DIR = os.path.join('docs', 'results', 'data')


class DataError(ValueError):
  """Runs that cannot be collected; its message names them."""


def path(repository: str, grid_name: str) -> str:
  return os.path.join(repository, DATA_DIR, f'{grid_name}.csv')


def output_path(repository: str, name: str) -> str:
  """The data file of an output a program prints (`results_outputs`)."""
  return os.path.join(repository, DATA_DIR, f'{name}.json')


def read_output(repository: str, name: str) -> Optional[dict]:
  """A stored output (its table, command, commit and code), or None before it is produced."""
  if not os.path.exists(output_path(repository, name)):
    return None
  with open(output_path(repository, name)) as f:
    return json.load(f)


def grid_names(repository: str) -> list[str]:
  """The grids that have a data file."""
  directory = os.path.join(repository, DATA_DIR)
  return sorted(name[:-len('.csv')] for name in os.listdir(directory) if name.endswith('.csv'))


def _figure(value: float) -> str:
  return format(float(value), '.10g')


def collect(grid: grid_lib.Grid, root: str, figures: Sequence[str],
            method_code: Callable[[str, str], Optional[str]]) -> list[dict]:
  """The rows of the grid's finished runs under `root`, with `figures` (module docstring). `method_code(commit,
  algorithm)`: the fingerprint of the method's code at the commit, or None when the commit cannot vouch for it."""
  # Imported here: the report's tables import TensorFlow (through the routing summary), which reading, writing and
  # checking the data files do not need.
  from experiment.reporting import report_tables  # pylint: disable=g-import-not-at-top
  from experiment.reporting import run_results  # pylint: disable=g-import-not-at-top
  finished = {run.name: run for run in run_results.load(root) if run.finished}
  swept = [flag for flag, _ in grid.sweep]
  rows, unrecorded, uncommitted = [], [], []
  for run in grid.runs():
    if run.name not in finished:
      continue
    provenance_file = matrix_runner.provenance_path(root, run.name)
    if not os.path.exists(provenance_file):
      unrecorded.append(run.name)
      continue
    with open(provenance_file) as f:
      provenance = json.load(f)
    algorithm = dict(run.flags)['algorithm']
    code = method_code(provenance['commit'], algorithm)
    if code is None:
      uncommitted.append(f'{run.name} ({provenance["commit"]})')
      continue
    metrics = report_tables.run_metrics(finished[run.name])
    settings = dict(run.settings)
    method = {} if 'algorithm' in settings else {'algorithm': algorithm}  # Fixed by the grid.
    rows.append({RUN: run.name, **method, **{flag: settings[flag] for flag in swept},
                 REPORTED_AS: run_results.method_name(finished[run.name]),
                 **{figure: _figure(metrics[figure]) if figure in metrics else '' for figure in figures},
                 COMMIT: provenance['commit'], METHOD_CODE: code, COMMAND: provenance['command']})
  if unrecorded:
    raise DataError(f'{len(unrecorded)} finished runs have no provenance record ({_some(unrecorded)}): run them with '
                    'experiment.matrix.')
  if uncommitted:
    raise DataError(f'{len(uncommitted)} finished runs ran from code this repository cannot show '
                    f'({_some(uncommitted)}): run them from a worktree of a commit.')
  return rows


def _some(names: Sequence[str]) -> str:
  return ', '.join(names[:5]) + (', ...' if len(names) > 5 else '')


def merge(grid: grid_lib.Grid, kept: Sequence[dict], collected: Sequence[dict]) -> list[dict]:
  """`collected` and the rows of `kept` (a data file's) for the grid's other runs, in the grid's order. Both must have
  the same columns: a row without a figure the pages read would leave a hole in a table."""
  if kept and collected and list(kept[0]) != list(collected[0]):
    raise DataError(f'the data file has the columns {", ".join(kept[0])}, the runs collected '
                    f'{", ".join(collected[0])}: collect every run of the grid again into a new file.')
  by_run = {row[RUN]: row for row in kept}
  by_run.update((row[RUN], row) for row in collected)
  return [by_run[run.name] for run in grid.runs() if run.name in by_run]


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
