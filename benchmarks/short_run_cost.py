"""Where a short run's time goes: the fixed cost that the test suite pays about 400 times.

The suite's end-to-end tests make two-round runs (the method x scenario matrix alone 151 of them), and such a run is
almost all fixed cost: building the method's learning process (tracing its TF computations), TFF compiling them at
the first call, evaluating once and writing checkpoints. For each method this runs `run_experiment`'s main in
process (`tests.in_process_run`, after one warm-up run), two rounds on the synthetic task under the chosen scenario,
and times its phases by wrapping the functions that do them:

  build      `assembly.build`: task and scenario, the evaluator over the held-out data, the round data, and the
             method's process (`registry.build`, also shown alone as `method`)
  rounds     the training loop less its evaluations and checkpoints (the first round compiles `next`)
  evaluate   `Evaluator.evaluate`
  checkpoint `Checkpoints.save`
  other      the rest of the run (validation, outputs, summary)

    bazel run //benchmarks:short_run_cost -- --timed_methods=vanilla,fedtem,fedgmm --run_scenario=dirichlet_mixture

Each timed run builds its method afresh (the process's kept builds are cleared first, `built_methods.clear`): a
grid's job or a test file pays this for every configuration it has not built yet. docs/performance.md ("The test
suite") gives the figures on this machine.
"""

import collections
import contextlib
import functools
import os
import tempfile
import time

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

from absl import app
from absl import flags

from algorithms import registry
from algorithms.core import evaluation
from experiment.core import assembly
from experiment.core import built_methods
from experiment.core import run_directory
from experiment.core import training_loop
from tests import in_process_run

_METHODS = flags.DEFINE_list('timed_methods', ['vanilla', 'fedprox', 'fedtem', 'cfl', 'fedgmm'], 'Methods to time.')
_SCENARIO = flags.DEFINE_enum('run_scenario', 'dirichlet_mixture', ['periodic', 'dirichlet_mixture'],
                              'Scenario of the runs (with the matrix test\'s settings).')
_SCENARIO_FLAGS = {'periodic': [], 'dirichlet_mixture': ['--num_clients=12', '--unseen_fraction=0.25']}
_PHASES = ((assembly, 'build', 'build'), (registry, 'build', 'method'), (training_loop, 'run', 'loop'),
           (evaluation.Evaluator, 'evaluate', 'evaluate'), (run_directory.Checkpoints, 'save', 'checkpoint'))


@contextlib.contextmanager
def _timed_phases(seconds: dict):
  """Adds each phase's wall time to `seconds[phase]` while the context is open."""
  originals = [(owner, name, getattr(owner, name)) for owner, name, _ in _PHASES]

  def timed(function, phase):
    @functools.wraps(function)
    def wrapper(*args, **kwargs):
      start = time.perf_counter()
      try:
        return function(*args, **kwargs)
      finally:
        seconds[phase] += time.perf_counter() - start
    return wrapper

  for (owner, name, phase), (_, _, original) in zip(_PHASES, originals):
    setattr(owner, name, timed(original, phase))
  try:
    yield
  finally:
    for owner, name, original in originals:
      setattr(owner, name, original)


def _run(method: str, root: str) -> dict:
  """Seconds per phase of one two-round run of `method`."""
  seconds = collections.defaultdict(float)
  args = ['--task=synthetic', f'--scenario={_SCENARIO.value}', f'--algorithm={method}', '--clients_per_round=3',
          '--total_rounds=2', '--period=2', '--rounds_per_eval=2', '--eval_batch_size=500', '--seed=0',
          *_SCENARIO_FLAGS[_SCENARIO.value], f'--root_output_dir={root}', f'--experiment_name={method}']
  start = time.perf_counter()
  with _timed_phases(seconds):
    status, stderr = in_process_run.run(args)
  if status:
    raise RuntimeError(f'{method}: exit status {status}: {stderr.strip().splitlines()[-1]}')
  seconds['total'] = time.perf_counter() - start
  seconds['rounds'] = seconds['loop'] - seconds['evaluate'] - seconds['checkpoint']
  seconds['other'] = seconds['total'] - seconds['build'] - seconds['loop']
  return seconds


def main(argv):
  del argv  # Unused.
  in_process_run.start_worker()
  root = tempfile.mkdtemp()
  _run('vanilla', os.path.join(root, 'warm_up'))  # Imports and TFF's first computations, paid once per process.
  columns = ('total', 'build', 'method', 'rounds', 'evaluate', 'checkpoint', 'other')
  print('| method | ' + ' | '.join(f'{c} s' for c in columns) + ' |')
  print('|---' * (len(columns) + 1) + '|')
  for method in _METHODS.value:
    built_methods.clear()
    seconds = _run(method, root)
    print(f'| {method} | ' + ' | '.join(f'{seconds[c]:.2f}' for c in columns) + ' |', flush=True)


if __name__ == '__main__':
  app.run(main)
