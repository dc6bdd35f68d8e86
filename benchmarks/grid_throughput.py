"""Grid throughput: the every-method x every-scenario matrix of two-round runs, wall time and runs per minute.

The grid is the method x scenario matrix test's (`tests/method_scenario_matrix_test.py`): every method of the
registry on every scenario, each scenario with its `SMOKE_RUN` flags on the synthetic task (two rounds, 3 clients a
round), one seed; `experiment.matrix` runs it with `--jobs` jobs, as a researcher runs a grid. Each checkout named in
`--checkouts` runs the same grid from its own tree (`python -m experiment.matrix` with it as working directory and
PYTHONPATH), one after the other in this invocation, so two versions of the runner are compared on the same machine
in one sitting; the runs that both finish are then compared row by row (metrics.csv without the wall time).

    python -m benchmarks.grid_throughput --checkouts=/tmp/before,. --root=/tmp/grid_throughput

Prints, per checkout: runs finished and refused, wall time, finished runs per minute; then the ratio of each wall
time to the first checkout's and how many runs have identical metrics in every checkout.
"""

import csv
import os
import subprocess
import sys
import time

from absl import app
from absl import flags

from algorithms import registry as algorithms
from periodic_shift import scenarios
from tests import in_process_run

_CHECKOUTS = flags.DEFINE_list('checkouts', ['.'], 'Repository trees to run the grid from, the baseline first.')
_ROOT = flags.DEFINE_string('root', None, 'Directory of the runs (<root>/<checkout index>/<run name>).', required=True)
_JOBS = flags.DEFINE_integer('jobs', 2, 'Runs at a time.')
_SEED = 0


def _toml_value(value) -> str:
  if isinstance(value, bool):
    return 'true' if value else 'false'
  return repr(value) if isinstance(value, (int, float)) else f'"{value}"'


def grid_spec() -> str:
  """The grid as a TOML file: every method x every scenario, each scenario's smoke flags."""
  common = [a[2:].split('=', 1) for a in in_process_run.smoke_args('periodic', _SEED) if not a.startswith('--scenario')]
  scenario_flags = {name: scenarios.module(name).SMOKE_RUN.flags for name in scenarios.SCENARIOS}
  shared = {flag: value for flag, value in common if all(flag not in f for f in scenario_flags.values())}
  lines = ['name = "{scenario}_{algorithm}"', '[sweep]',
           'scenario = [' + ', '.join(f'"{s}"' for s in scenarios.SCENARIOS) + ']',
           'algorithm = [' + ', '.join(f'"{a}"' for a in algorithms.ALGORITHMS) + ']', '[flags]']
  lines += [f'{flag} = "{value}"' for flag, value in shared.items()]
  for name, settings in scenario_flags.items():
    lines.append(f'[when.scenario.{name}]')
    lines += [f'{flag} = {_toml_value(value)}' for flag, value in settings.items()]
  return '\n'.join(lines) + '\n'


def _rows(run_dir: str) -> list[dict]:
  with open(os.path.join(run_dir, 'metrics.csv')) as f:
    return [{key: value for key, value in row.items() if key != 'round_seconds'} for row in csv.DictReader(f)]


def _run_grid(checkout: str, grid_path: str, root: str) -> tuple[float, str]:
  """(wall seconds, the matrix's output) of the grid run from `checkout`."""
  checkout = os.path.abspath(checkout)
  env = dict(os.environ, PYTHONPATH=checkout, TF_CPP_MIN_LOG_LEVEL='3')
  started = time.monotonic()
  result = subprocess.run([sys.executable, '-m', 'experiment.matrix', f'--grid={grid_path}', f'--root={root}',
                           f'--jobs={_JOBS.value}', '--report=false'], cwd=checkout, env=env, capture_output=True,
                          text=True)
  return time.monotonic() - started, result.stdout


def main(argv):
  del argv  # Unused.
  os.makedirs(_ROOT.value, exist_ok=True)
  grid_path = os.path.join(os.path.abspath(_ROOT.value), 'grid.toml')
  with open(grid_path, 'w') as f:
    f.write(grid_spec())
  finished, seconds = [], []
  print('| checkout | finished | refused | wall s | runs / min |')
  print('|---|---|---|---|---|')
  for index, checkout in enumerate(_CHECKOUTS.value):
    root = os.path.join(os.path.abspath(_ROOT.value), str(index))
    wall, output = _run_grid(checkout, grid_path, root)
    done = {name for name in os.listdir(root) if os.path.exists(os.path.join(root, name, 'summary.json'))}
    refused = output.count(' refused (exit status 2)')
    finished.append(done)
    seconds.append(wall)
    print(f'| {checkout} | {len(done)} | {refused} | {wall:.0f} | {len(done) / wall * 60:.1f} |', flush=True)
  common = set.intersection(*finished)
  roots = [os.path.join(os.path.abspath(_ROOT.value), str(i)) for i in range(len(_CHECKOUTS.value))]
  identical = sum(all(_rows(os.path.join(r, name)) == _rows(os.path.join(roots[0], name)) for r in roots[1:])
                  for name in common)
  print('wall time against the first checkout: ' + ', '.join(f'{s / seconds[0]:.2f}x' for s in seconds))
  print(f'identical metrics in every checkout: {identical} of the {len(common)} runs all finished')


if __name__ == '__main__':
  app.run(main)
