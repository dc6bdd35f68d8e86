r"""Runs a grid of experiments: every combination of the swept flags, N runs at a time, resumably.

    bazel run //experiment:matrix -- --grid=experiment/grids/fedevolve.toml --root=/tmp/fedevolve
    python -m experiment.matrix --sweep=algorithm=vanilla,fedtkm --sweep=seed=0,1,2 --set=total_rounds=64 \
        --root=/tmp/m

The grid comes from a TOML file (`--grid`, format in `experiment/core/grid.py`) and/or flags: `--sweep=flag=v1,v2`
adds or replaces a swept flag, `--set=flag=value` fixes one for every run. Each run writes to `<root>/<name>/`;
rerunning the same command skips finished runs and resumes interrupted ones (`experiment/core/matrix_runner.py`).
`--dry_run` lists the runs and their flags. At the end the matrix writes the report of its root (`<root>/report`,
`experiment/reporting/report_writer.py`; the grid's [report] table shapes its main table, which is printed). The
grid file, the command line, the repository's commit and the start time are recorded in `<root>/.matrix/grid.json`
for the report's page, and each finished run's command and commit beside its log (`matrix_runner.provenance_path`),
which `experiment.results` collects into a results page's data file.
"""

import datetime
import json
import os
import subprocess
import sys

from absl import app
from absl import flags

from experiment.core import grid as grid_lib
from experiment.core import matrix_runner

_GRID = flags.DEFINE_string('grid', None, 'A TOML grid file (experiment/grids/).')
_SWEEP = flags.DEFINE_multi_string('sweep', [], 'flag=v1,v2,...: sweep a run_experiment flag over these values.')
_SET = flags.DEFINE_multi_string('set', [], 'flag=value: give every run this run_experiment flag.')
_ROOT = flags.DEFINE_string('root', None, 'Directory of the runs (each in <root>/<run name>/).')
_JOBS = flags.DEFINE_integer('jobs', os.cpu_count() or 1, 'Runs at a time. Default: the machine\'s cores.')
_DRY_RUN = flags.DEFINE_bool('dry_run', False, 'List the runs and their flags, run nothing.')
_REPORT = flags.DEFINE_bool('report', True, 'Write <root>/report at the end and print its main table.')


def _pair(text: str, flag: str) -> tuple[str, str]:
  name, separator, value = text.partition('=')
  if not separator or not name:
    raise grid_lib.GridError(f'--{flag} takes flag=value; got {text!r}.')
  return name, value


def _from_working_directory(path: str) -> str:
  """`path` relative to where the user ran the command (`bazel run` runs binaries in their runfiles)."""
  return os.path.join(os.environ.get('BUILD_WORKING_DIRECTORY', os.getcwd()), path)


def _fail(message: str) -> None:
  print(f'matrix: error: {message}', file=sys.stderr)
  sys.exit(2)


def _commit(repository: str) -> str:
  """The repository's commit (with '+changes' when its tree differs from it), or '' outside a git checkout."""
  try:
    commit = subprocess.run(['git', '-C', repository, 'rev-parse', 'HEAD'], capture_output=True, text=True,
                            check=True).stdout.strip()
    dirty = subprocess.run(['git', '-C', repository, 'status', '--porcelain', '--untracked-files=no'],
                           capture_output=True, text=True, check=True).stdout.strip()
  except (OSError, subprocess.CalledProcessError):
    return ''
  return commit + ('+changes' if dirty else '')


def _provenance(repository: str, argv: list[str]) -> dict:
  """What was run, from which commit."""
  return {'grid': _GRID.value or '', 'command': ' '.join(['python -m experiment.matrix'] + argv[1:]),
          'commit': _commit(repository)}


def _record_grid(root: str, provenance: dict) -> None:
  """<root>/.matrix/grid.json: what the report's page says was run."""
  started = datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')
  with open(os.path.join(root, matrix_runner.LOG_DIR, 'grid.json'), 'w') as f:
    json.dump(dict(provenance, started=started), f, indent=2)


def _write_report(root: str, grid: grid_lib.Grid) -> None:
  """The report of the root's runs, its main table printed; a report that cannot be written is one line."""
  # Imported here: matplotlib loads only once the runs are done, and a bad command line stays one line (matplotlib
  # warns on stderr when it finds no writable config directory, as in Bazel's test sandbox).
  from experiment.reporting import report_writer  # pylint: disable=g-import-not-at-top
  report_writer.write_and_print('matrix: report', root, os.path.join(root, 'report'),
                                columns=list(grid.report_columns), percent=grid.report_percent, show_table=True)


def main(argv):
  if len(argv) > 1:
    _fail(f'unexpected arguments: {" ".join(argv[1:])}')
  try:
    sweeps = [(name, values.split(',')) for name, values in (_pair(s, 'sweep') for s in _SWEEP.value)]
    grid_path = _GRID.value and _from_working_directory(_GRID.value)
    grid = grid_lib.load(grid_path, [_pair(s, 'set') for s in _SET.value], sweeps)
    runs = grid.runs()
    if _JOBS.value < 1:
      raise grid_lib.GridError(f'--jobs must be >= 1; got {_JOBS.value}.')
    if _DRY_RUN.value:
      for run in runs:
        print(run.name, ' '.join(run.arguments()))
      return
    if not _ROOT.value:
      raise grid_lib.GridError('--root is required: the directory of the runs.')
    root = os.path.abspath(_from_working_directory(_ROOT.value))
    repository = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [repository, os.environ.get('PYTHONPATH')])),
               TF_CPP_MIN_LOG_LEVEL=os.environ.get('TF_CPP_MIN_LOG_LEVEL', '3'))
    provenance = _provenance(repository, sys.argv)
    outcomes = matrix_runner.run_matrix(runs, root, _JOBS.value, matrix_runner.default_command(), env=env,
                                        on_start=lambda: _record_grid(root, provenance), provenance=provenance)
  except (grid_lib.GridError, matrix_runner.MatrixError) as error:
    _fail(str(error))
  if _REPORT.value:
    _write_report(root, grid)
  unsuccessful = [o for o in outcomes if o.status != 'finished']
  for outcome in unsuccessful:
    print(f'matrix: {outcome.status}: {outcome.name}: {outcome.message}')
  sys.exit(1 if unsuccessful else 0)


if __name__ == '__main__':
  app.run(main)
