"""Soak benchmark: resident memory of the driver and of TFF's worker over a long run.

    bazel run //benchmarks:soak_memory -- --total_rounds=2000 --algorithms=vanilla,fedtem

    bazel run //benchmarks:soak_memory -- --algorithms=fedgmm,shiftex

    bazel run //benchmarks:soak_memory -- --algorithms=vanilla --benchmark_task=cifar --total_rounds=300

Runs `run_experiment.py` with the task's defaults (the synthetic task: 10 clients per round, evaluation every 8
rounds, checkpoints every 8), each method with per-client state or a server-side pool on the scenario where it
matters (`_TARGETS`: FedGMM on `dirichlet_mixture` with all 300 clients of `gaussian_mixture`, ShiftEx on `windowed`
with its census rounds), and reads the resident set size (VmRSS in /proc) of the driver process and of its TFF
`worker_binary` child every `--sample_every` rounds, when the run prints that round's progress line, with the size
of the run's checkpoints directory. `--benchmark_task` soaks every method on a paper task's files of the real
layouts and sizes (`benchmarks.task_files`) at the task's defaults instead. Growth is measured from the sample at
`--baseline_round` (after TF's one-off allocations: tracing, the first evaluation and checkpoint) to the last
sample. Writes every sample to <output_dir>/<algorithm>_memory.csv as it is taken and prints one line per method.
Not part of the test suite (minutes per method).
"""

import csv
import os
import re
import subprocess
import sys
import tempfile

from absl import app
from absl import flags
import numpy as np

from benchmarks import task_files
from experiment.core import run_directory
from utils import execution_context

_ALGORITHMS = flags.DEFINE_list('algorithms', ['vanilla', 'fedtem'], 'Methods to soak.')
_TOTAL_ROUNDS = flags.DEFINE_integer('total_rounds', 2000, 'Rounds of each run.')
_SAMPLE_EVERY = flags.DEFINE_integer('sample_every', 50, 'Rounds between memory samples.')
_BASELINE_ROUND = flags.DEFINE_integer('baseline_round', 100, 'The sample growth is measured from.')
_TASK = flags.DEFINE_enum('benchmark_task', None, ['emnist', 'cifar', 'stackoverflow'],
                          'A paper task to soak every method on, from files of the real layouts (not --task: '
                          'absl would mix it with run_experiment\'s); default: each method\'s target above.')
_RUN_FLAGS = flags.DEFINE_list('run_flags', [], 'More run_experiment flags for every run, e.g. '
                                '--run_flags=--overlap_evaluation=false.')
_OUTPUT_DIR = flags.DEFINE_string('output_dir', None, 'Where the runs and samples go (default: a temporary '
                                  'directory).')

_BINARY = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'run_experiment.py')
# Methods soaked where their state grows with the run (every other name: the synthetic task's periodic scenario).
_TARGETS = {
    # Measured here beside two other runs: 4.4-5.9 s a round of 30 clients of 3,000 examples, 28-32 s an
    # evaluation of the 300 clients' held-out data; 40 evaluations and checkpoints in 2,000 rounds.
    'fedgmm': ['--task=gaussian_mixture', '--scenario=dirichlet_mixture', '--num_clients=300',
               '--rounds_per_eval=50', '--rounds_per_checkpoint=50'],
    # An evaluation covers the test sets of every window's domain of the run (125 windows of 16 rounds in 2,000);
    # evaluating every 8 rounds would make the soak over 2 h, so 40 evaluations, as for FedGMM.
    'shiftex': ['--task=synthetic', '--scenario=windowed', '--window_rounds=16', '--num_branches=4',
                '--rounds_per_eval=50', '--rounds_per_checkpoint=50'],
}


_PROGRESS = re.compile(r'^round (\d+)/\d+ ')


def _rss_mb(pid: int) -> float:
  with open(f'/proc/{pid}/status') as f:
    for line in f:
      if line.startswith('VmRSS:'):
        return int(line.split()[1]) / 1024.0
  return float('nan')


def _directory_mb(path: str) -> float:
  """The size of the files under `path` (a file renamed away while it is walked, a save's, counts 0)."""
  def size(file_path):
    try:
      return os.path.getsize(file_path)
    except FileNotFoundError:
      return 0
  return sum(size(os.path.join(folder, name)) for folder, _, names in os.walk(path) for name in names) / 2**20


def _soak(algorithm: str, root: str, task_flags: list[str]) -> list[tuple[int, float, float, float]]:
  """[(round, driver MB, worker MB, checkpoints MB)] every `--sample_every` rounds, each also written to
  <root>/<algorithm>_memory.csv as it is taken (a soak stopped early keeps its samples)."""
  command = [sys.executable, _BINARY, *(task_flags or _TARGETS.get(algorithm, ['--task=synthetic'])),
             f'--algorithm={algorithm}', *_RUN_FLAGS.value,
             f'--total_rounds={_TOTAL_ROUNDS.value}', f'--root_output_dir={root}', f'--experiment_name={algorithm}',
             '--overwrite']
  env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), TF_CPP_MIN_LOG_LEVEL='3')
  child = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
  samples = []
  with open(os.path.join(root, f'{algorithm}_memory.csv'), 'w', newline='') as samples_file:
    writer = csv.writer(samples_file)
    writer.writerow(['round', 'driver_rss_mb', 'worker_rss_mb', 'checkpoints_mb'])
    for line in child.stdout:
      progress = _PROGRESS.match(line)  # TFF's worker writes to the same stdout: other lines, cut ones, are skipped.
      if progress is None:
        continue
      round_num = int(progress.group(1))
      if round_num % _SAMPLE_EVERY.value == 0:
        samples.append((round_num, _rss_mb(child.pid), _rss_mb(execution_context.worker_pids(child.pid)[0]),
                        _directory_mb(os.path.join(root, algorithm, run_directory.CHECKPOINTS))))
        writer.writerow(samples[-1])
        samples_file.flush()
  if child.wait() != 0:
    raise RuntimeError(f'{algorithm} run failed')
  return samples


def _growth(samples, column: int) -> float:
  baseline = next(sample for sample in samples if sample[0] >= _BASELINE_ROUND.value)
  return (samples[-1][column] - baseline[column]) / baseline[column]


def main(argv):
  del argv  # Unused.
  root = _OUTPUT_DIR.value or tempfile.mkdtemp(prefix='soak_memory_')
  os.makedirs(root, exist_ok=True)
  task_flags = []
  if _TASK.value:
    cache_dir = os.path.join(root, 'cache')
    task_files.write(_TASK.value, cache_dir, np.random.default_rng(0), paper_test_sets=True)
    task_flags = [f'--task={_TASK.value}', f'--cache_dir={cache_dir}']
  for algorithm in _ALGORITHMS.value:
    samples = _soak(algorithm, root, task_flags)
    first, baseline, last = samples[0], next(s for s in samples if s[0] >= _BASELINE_ROUND.value), samples[-1]
    print(f'{algorithm}: driver {first[1]:.0f} MB (round {first[0]}) / {baseline[1]:.0f} MB (round {baseline[0]}) '
          f'-> {last[1]:.0f} MB (round {last[0]}), growth {100 * _growth(samples, 1):+.1f}%; worker '
          f'{first[2]:.0f} / {baseline[2]:.0f} -> {last[2]:.0f} MB, growth {100 * _growth(samples, 2):+.1f}%; '
          f'checkpoints {baseline[3]:.1f} -> {last[3]:.1f} MB', flush=True)
  print(f'Samples in {root}')


if __name__ == '__main__':
  app.run(main)
