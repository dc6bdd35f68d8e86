"""A paper-scale run's wall time on this machine, per task and method, from short runs of `run_experiment`.

Each cell is two runs of `run_experiment` in this process, R rounds each, on files of the task's real layouts,
client sizes and test-set sizes (`benchmarks.task_files` with `paper_test_sets`: EMNIST's 77,483 test examples,
CIFAR's 10,000 + 10,000, Stack Overflow's 10,000 questions + 10,000 answers), at Table 2 settings (10 clients and
batch 20 on EMNIST and CIFAR, 50 clients of at most 512 sentences and batch 16 on Stack Overflow): one evaluated
only after its last round, one evaluated every R/4 rounds (4 evaluations). From their metrics.csv:

  round s  the median `round_seconds` of the first run's rounds after 3 warm-up rounds, the last left out
           (everything a round does: the scenario's plan, the clients' datasets, the learning process's `next`);
  eval s   what one evaluation on the task's test sets adds to a run: the second run's time (the sum of its
           `round_seconds`) minus the first's, over the 3 evaluations more (each run has one evaluation that also
           traces the evaluation's functions). With `--overlap_evaluation` (the default) an evaluation runs while the
           next rounds train, so this is what it still costs: the wait for it and the slower rounds beside it;
           `--run_flags=--overlap_evaluation=false` gives the evaluation's whole time;
  run h    the projection of a Table 2 run: total_rounds x round s + evaluations x eval s, with an evaluation every
           `--eval_every` rounds (default 8, run_experiment's `--rounds_per_eval` default; the paper gives no cadence);
  eval %   the evaluations' share of that time; the ratio to Vanilla's round on the same task.

And, per task, the bound of that run on this machine with TensorFlow's kernels (`--bound`): the same work in plain
TensorFlow in this process, timed in wall and CPU seconds (every thread, all cores summed): a round of the client
steps (`timing.plain_tf_step`, round_time's (b): batches in memory, no federation) and an evaluation's model work
(the model alone on every test batch of every domain, at `--eval_batch_size` 64, batches in memory, no metrics).
No schedule of this work, however it overlaps evaluation with training, takes less than
max(total_rounds x round wall s, (total_rounds x round CPU s + evaluations x evaluation CPU s) / cores): the rounds
follow one another, and the cores cannot do more than their seconds. Both terms depend on TensorFlow's threads
(`--bound_threads`, only without runs): its default (one per core) gives the shortest round, one thread the fewest
CPU seconds for the same work. So any run takes at least the second term at one thread (the floor), and a run on one
TFF worker (one process training each round) at least the first term at the default too. With methods, the floor is
timed in a child process at one thread (TFF's worker, once started, makes this process's TensorFlow take every
core), on the same files, and each projection is printed as a multiple of it.

    bazel run //benchmarks:task_round_time -- --tasks=emnist --rounds=10
    bazel run //benchmarks:task_round_time -- --tasks=cifar,stackoverflow --rounds=8 --methods=vanilla
    bazel run //benchmarks:task_round_time -- --tasks=emnist,cifar --methods= --bound
    bazel run //benchmarks:task_round_time -- --tasks=emnist,cifar --methods= --bound --bound_threads=1
"""

import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

# Quiet TensorFlow C++ logs here and in TFF's worker process (set TF_CPP_MIN_LOG_LEVEL=0 to see them).
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

from absl import app
from absl import flags
import numpy as np
import tensorflow as tf

from benchmarks import task_files
from benchmarks import timing
from experiment.core import assembly
from tasks import registry
from tests import in_process_run

_ROUNDS = flags.DEFINE_integer('rounds', 8, 'Rounds per run (a multiple of 4, at least 8): 3 warm-up, the timed '
                               'ones, the last; the second run evaluates after every quarter.')
_TASKS = flags.DEFINE_list('tasks', ['emnist', 'cifar', 'stackoverflow'], 'Tasks to time.')
_METHODS = flags.DEFINE_list('methods', ['vanilla', 'fedtem', 'fedtkm'],
                             'Methods to time (any of run_experiment\'s --algorithm values); the first is the base '
                             'of the ratios.')
_EVAL_EVERY = flags.DEFINE_integer('eval_every', 8, 'Evaluation cadence of the projected run, in rounds.')
_BOUND = flags.DEFINE_bool('bound', True, 'Also time the run\'s work in plain TensorFlow and print the bound above.')
_BOUND_THREADS = flags.DEFINE_integer('bound_threads', 0, 'TensorFlow\'s intra- and inter-op threads in this '
                                     'process, for the bound (0: TensorFlow\'s default); only with --methods=.')
_FILES_DIR = flags.DEFINE_string('files_dir', None, 'Where the tasks\' files are (one directory per task), written '
                                 'there when absent and kept; default: a temporary directory, removed at the end.')
_RUN_FLAGS = flags.DEFINE_list('run_flags', [], 'More run_experiment flags for every run, e.g. '
                               '--run_flags=--eval_inference_batch_size=512.')


def _round_seconds(task: str, method: str, cache_dir: str, scratch: str, rounds_per_eval: int) -> list[float]:
  """The `round_seconds` of a run of `method` on `task`, evaluated every `rounds_per_eval` rounds."""
  root = tempfile.mkdtemp(dir=scratch)
  status, stderr = in_process_run.run([
      f'--task={task}', f'--cache_dir={cache_dir}', f'--algorithm={method}', f'--total_rounds={_ROUNDS.value}',
      f'--rounds_per_eval={rounds_per_eval}', f'--root_output_dir={root}', '--experiment_name=run',
      *timing.METHOD_FLAGS.get(method, []), *_RUN_FLAGS.value])
  if status != 0:
    raise RuntimeError(f'{method} on {task}: {stderr.strip()}')
  return [float(row['round_seconds']) for row in in_process_run.metrics_rows(os.path.join(root, 'run'))]


def _cell(task: str, method: str, cache_dir: str, scratch: str) -> tuple[float, float]:
  """(median round seconds, evaluation seconds) of `method` on `task`."""
  once = _round_seconds(task, method, cache_dir, scratch, _ROUNDS.value)
  four_times = _round_seconds(task, method, cache_dir, scratch, _ROUNDS.value // 4)
  return statistics.median(once[timing.WARMUP_ROUNDS:-1]), (sum(four_times) - sum(once)) / 3


def _evaluation_pass(task, batch_size: int) -> tuple[float, float]:
  """(wall s, CPU s) of the model alone on every test batch of every domain of `task`, materialized beforehand."""
  model = task.model_fn(assembly.TrainingConfig().num_branches)
  infer = tf.function(lambda x: model(x, training=False))
  batches = [batch['x'] for mode in range(len(task.domain_list)) for batch in task.test_dataset(mode, batch_size)]
  return timing.wall_and_core_seconds_per_round(lambda xs: [infer(x) for x in xs], [batches] * 2, warmup=1)


def _bound_line(task_name: str, cache_dir: str, total_rounds: int, evaluations: int) -> str:
  """The bound of a Table 2 run of `task_name` on this machine (the module docstring)."""
  defaults = registry.defaults(task_name)
  task, rounds = timing.run_data(task_name, 'periodic', None, timing.WARMUP_ROUNDS + 5,
                                 defaults['clients_per_round'], defaults['client_batch_size'], cache_dir)
  model_fn = lambda: task.model_fn(assembly.TrainingConfig().num_branches)
  step, batch_rounds = timing.plain_tf_step(model_fn, task.batch_fn, rounds, defaults['client_learning_rate'])
  round_wall, round_cpu = timing.wall_and_core_seconds_per_round(step, batch_rounds)
  eval_wall, eval_cpu = _evaluation_pass(task, assembly.EvaluationConfig().eval_batch_size)
  cores = len(os.sched_getaffinity(0))
  in_turn = (total_rounds * round_wall + evaluations * eval_wall) / 3600
  rounds_in_a_row = total_rounds * round_wall / 3600
  all_cores = (total_rounds * round_cpu + evaluations * eval_cpu) / cores / 3600
  return (f'{task_name:14s} plain TF: round {round_wall:7.3f} s, {round_cpu:.3f} CPU s | evaluation {eval_wall:7.2f} '
          f's, {eval_cpu:.2f} CPU s | {total_rounds} rounds, {evaluations} evaluations: {in_turn:6.2f} h in turn, '
          f'rounds in a row {rounds_in_a_row:6.2f} h, all CPU s on {cores} cores {all_cores:6.2f} h '
          f'({all_cores * 3600:.1f} s), '
          f'bound at these threads {max(rounds_in_a_row, all_cores):6.2f} h')


def _floor_seconds(task_name: str, files_dir: str) -> float:
  """The floor of a Table 2 run of `task_name` in seconds: its work's CPU seconds at one thread on every core (the
  module docstring), timed by this benchmark in a child process on the files in `files_dir`; prints the child's
  line. The floor is plain TF's: on the synthetic task's tiny model the suite's round beats plain TF's loop of one
  `tf.function` call a batch, and its projection lies below it."""
  child = subprocess.run([sys.executable, '-m', 'benchmarks.task_round_time', f'--tasks={task_name}', '--methods=',
                          '--bound_threads=1', f'--files_dir={files_dir}', f'--eval_every={_EVAL_EVERY.value}'],
                         capture_output=True, text=True, check=True)
  line = [line for line in child.stdout.splitlines() if line.startswith(f'{task_name} ')][-1]
  print(f'{line} (one thread)', flush=True)
  return float(re.search(r'all CPU s on \d+ cores +[0-9.]+ h \(([0-9.]+) s\)', line).group(1))


def main(argv):
  del argv  # Unused.
  if _BOUND_THREADS.value and _METHODS.value:
    raise app.UsageError('--bound_threads needs --methods= (TFF\'s worker would override the threads).')
  if _ROUNDS.value % 4 or _ROUNDS.value < 8:
    raise app.UsageError('--rounds must be a multiple of 4 and at least 8 (warm-up, timed rounds, 4 evaluations).')
  if _BOUND_THREADS.value:
    tf.config.threading.set_intra_op_parallelism_threads(_BOUND_THREADS.value)
    tf.config.threading.set_inter_op_parallelism_threads(_BOUND_THREADS.value)
  if _METHODS.value:
    in_process_run.start_worker()  # After it TensorFlow's eager ops here take every core, whatever --bound_threads.
  scratch = tempfile.mkdtemp()
  files_dir = _FILES_DIR.value or scratch
  print(f'{_ROUNDS.value} rounds per run; evaluation every {_EVAL_EVERY.value} rounds in the projection', flush=True)
  for task in _TASKS.value:
    cache_dir = os.path.join(files_dir, task)
    if task != 'synthetic' and not os.path.isdir(cache_dir):
      task_files.write(task, cache_dir, np.random.default_rng(0), paper_test_sets=True)
    total_rounds = registry.defaults(task)['total_rounds']
    evaluations = math.ceil(total_rounds / _EVAL_EVERY.value)
    base, projected = None, {}
    for method in _METHODS.value:
      round_seconds, eval_seconds = _cell(task, method, cache_dir, scratch)
      base = base or round_seconds
      projected[method] = hours = (total_rounds * round_seconds + evaluations * eval_seconds) / 3600
      print(f'{task:14s} {method:10s} round {round_seconds:7.3f} s ({round_seconds / base:.2f}x) | eval '
            f'{eval_seconds:7.2f} s | {total_rounds} rounds, {evaluations} evaluations: {hours:6.2f} h, eval '
            f'{100 * evaluations * eval_seconds / (3600 * hours):4.1f}%', flush=True)
    if _BOUND.value:
      print(_bound_line(task, cache_dir if task != 'synthetic' else None, total_rounds, evaluations), flush=True)
      if projected:
        floor = _floor_seconds(task, files_dir)
        print(f'{task:14s} projection / floor: ' + ', '.join(f'{method} {3600 * hours / floor:.2f}x'
                                                           for method, hours in projected.items()), flush=True)
  shutil.rmtree(scratch)


if __name__ == '__main__':
  app.run(main)
