"""A paper-scale run's wall time on this machine, per task and method, from short runs of `run_experiment`.

Each cell is a run of `run_experiment` in this process (`--total_rounds=R+2 --rounds_per_eval=R/2`: evaluations
after rounds R/2, R and the last) on files of the task's real layouts, client sizes and test-set sizes
(`benchmarks.task_files` with `paper_test_sets`: EMNIST's 77,483 test examples, CIFAR's 10,000 + 10,000, Stack
Overflow's 10,000 questions + 10,000 answers), at Table 2 settings (10 clients and batch 20 on EMNIST and CIFAR, 50
clients of at most 512 sentences and batch 16 on Stack Overflow). From its metrics.csv:

  round s  the median `round_seconds` of the rounds after 3 warm-up rounds away from an evaluation (everything a
           round does: the scenario's plan, the clients' datasets, the learning process's `next`);
  eval s   what one evaluation on the task's test sets adds to the run: the `round_seconds` of round R and of round
           R + 1 minus two medians (the second evaluation of the run: the first also traces the evaluation's
           functions, once per run). Evaluated in turn (`--overlap_evaluation=false`) round R holds the whole
           evaluation; overlapped (the default) the evaluation runs while round R + 1 trains, and the two rounds
           hold what it still costs: the wait for it and the slower training beside it. The last round's
           evaluation, with no round to overlap, is left out;
  run h    the projection of a Table 2 run: total_rounds x round s + evaluations x eval s, with an evaluation every
           `--eval_every` rounds (default 8, run_experiment's `--rounds_per_eval` default; the paper gives no cadence);
  eval %   the evaluations' share of that time; the ratio to Vanilla's round on the same task.

    bazel run //benchmarks:task_round_time -- --tasks=emnist --rounds=10
    bazel run //benchmarks:task_round_time -- --tasks=cifar,stackoverflow --rounds=8 --methods=vanilla
"""

import math
import os
import shutil
import statistics
import tempfile

# Quiet TensorFlow C++ logs here and in TFF's worker process (set TF_CPP_MIN_LOG_LEVEL=0 to see them).
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

from absl import app
from absl import flags
import numpy as np

from benchmarks import task_files
from benchmarks import timing
from tasks import registry
from tests import in_process_run

_ROUNDS = flags.DEFINE_integer('rounds', 8, 'R: evaluations after rounds R / 2 and R of a run of R + 2 rounds (R '
                               'even, at least 8): 3 warm-up rounds, the timed ones, the evaluations.')
_TASKS = flags.DEFINE_list('tasks', ['emnist', 'cifar', 'stackoverflow'], 'Tasks to time.')
_METHODS = flags.DEFINE_list('methods', ['vanilla', 'fedtem', 'fedtkm'],
                             'Methods to time (any of run_experiment\'s --algorithm values); the first is the base '
                             'of the ratios.')
_EVAL_EVERY = flags.DEFINE_integer('eval_every', 8, 'Evaluation cadence of the projected run, in rounds.')
_RUN_FLAGS = flags.DEFINE_list('run_flags', [], 'More run_experiment flags for every run, e.g. '
                               '--run_flags=--eval_inference_batch_size=512.')


def _cell(task: str, method: str, cache_dir: str, scratch: str) -> tuple[float, float]:
  """(median round seconds, evaluation seconds) of a short run of `method` on `task`."""
  root = tempfile.mkdtemp(dir=scratch)
  rounds, every = _ROUNDS.value, _ROUNDS.value // 2
  status, stderr = in_process_run.run([
      f'--task={task}', f'--cache_dir={cache_dir}', f'--algorithm={method}', f'--total_rounds={rounds + 2}',
      f'--rounds_per_eval={every}', f'--root_output_dir={root}', '--experiment_name=run',
      *timing.METHOD_FLAGS.get(method, []), *_RUN_FLAGS.value])
  if status != 0:
    raise RuntimeError(f'{method} on {task}: {stderr.strip()}')
  seconds = {int(row['round']): float(row['round_seconds'])
             for row in in_process_run.metrics_rows(os.path.join(root, 'run'))}
  near_evaluation = {every, every + 1, rounds, rounds + 1, rounds + 2}
  round_seconds = statistics.median(s for round_num, s in seconds.items()
                                    if round_num > timing.WARMUP_ROUNDS and round_num not in near_evaluation)
  return round_seconds, seconds[rounds] + seconds[rounds + 1] - 2 * round_seconds


def main(argv):
  del argv  # Unused.
  if _ROUNDS.value % 2 or _ROUNDS.value < 2 * (timing.WARMUP_ROUNDS + 1):
    raise app.UsageError(f'--rounds must be even and at least {2 * (timing.WARMUP_ROUNDS + 1)} (warm-up, timed, '
                         'two evaluations).')
  in_process_run.start_worker()
  scratch = tempfile.mkdtemp()
  print(f'{_ROUNDS.value} rounds per run; evaluation every {_EVAL_EVERY.value} rounds in the projection', flush=True)
  for task in _TASKS.value:
    cache_dir = os.path.join(scratch, task)
    if task != 'synthetic':
      task_files.write(task, cache_dir, np.random.default_rng(0), paper_test_sets=True)
    total_rounds = registry.defaults(task)['total_rounds']
    evaluations = math.ceil(total_rounds / _EVAL_EVERY.value)
    base = None
    for method in _METHODS.value:
      round_seconds, eval_seconds = _cell(task, method, cache_dir, scratch)
      base = base or round_seconds
      hours = (total_rounds * round_seconds + evaluations * eval_seconds) / 3600
      print(f'{task:14s} {method:10s} round {round_seconds:7.3f} s ({round_seconds / base:.2f}x) | eval '
            f'{eval_seconds:7.2f} s | {total_rounds} rounds, {evaluations} evaluations: {hours:6.2f} h, eval '
            f'{100 * evaluations * eval_seconds / (3600 * hours):4.1f}%', flush=True)
  shutil.rmtree(scratch)


if __name__ == '__main__':
  app.run(main)
