"""The edges a user hits, each injected as found and held to what the suite promises: one line and exit status 2,
nothing claimed that did not happen, nothing deleted that could not be parsed, a report that says what it skipped.

Numbered as the findings they come from: (1) the open port is network_exposure_test's; (2) non-finite flags and
the accountant; (3) a method that aggregates statistics of its own under --aggregator=dp (every method:
server_step_contract_test); (4) a resume whose metrics.csv is missing, empty or truncated, or whose checkpoints do
not load; (5) a rerun
over an unparsable metrics.csv; (6) a run that failed in its first round and the corrected rerun; (7) damaged SQLite
files, garbage in metrics.csv and unknown flags; (8) a report over malformed, duplicate and unfinished runs; (9) the
secure aggregator's simulation said in the log and summary.json. Then the run directory's owner and resource
faults: (10) a second run of a directory held by a running one, `--overwrite` included, refused and the directory
untouched; (11) a full disk during a checkpoint or a row, one line and an exact resume; (12) a TFF worker that
would listen beyond loopback, one line; (13) the report's limits and reasons (a huge or binary metrics.csv, an
empty directory, checkpoints without rows).
"""

import contextlib
import errno
import gc
import json
import logging
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from unittest import mock

from absl.testing import absltest
import numpy as np
import tensorflow as tf

from algorithms.core import privacy_accounting
from benchmarks import task_files
from experiment.core import assembly
from experiment.core import run_directory
from experiment.core import training_loop
from experiment.reporting import report_writer
from experiment.reporting import run_results
from tests import in_process_run
import run_experiment
from utils import directory_lock
from utils import execution_context
from utils import loopback

_BINARY = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'run_experiment.py')
_SMALL = ['--task=synthetic', '--clients_per_round=4', '--period=4', '--total_rounds=8', '--rounds_per_eval=2',
          '--rounds_per_checkpoint=2', '--eval_batch_size=500', '--experiment_name=e']


def _error_line(test, status: int, stderr: str) -> str:
  """The one `run_experiment: error:` line of a run that must end with status 2 (an earlier run's Python warning
  may precede it in this process)."""
  test.assertEqual(status, 2, stderr[-2000:])
  errors = [line for line in stderr.strip().splitlines() if line.startswith('run_experiment: error: ')]
  test.assertLen(errors, 1, stderr[-2000:])
  test.assertEqual(errors[0], stderr.strip().splitlines()[-1])
  return errors[0]


def _rows(run_dir: str) -> list[dict]:
  """metrics.csv's rows without `round_seconds` (the one cell a resumed run may differ in)."""
  return [{key: value for key, value in row.items() if key != 'round_seconds'}
          for row in training_loop.read_metrics(run_dir)]


def _file_bytes(directory: str) -> dict[str, bytes]:
  """Relative path -> the bytes of every file under `directory`."""
  contents = {}
  for parent, _, names in os.walk(directory):
    for name in names:
      path = os.path.join(parent, name)
      with open(path, 'rb') as f:
        contents[os.path.relpath(path, directory)] = f.read()
  return contents


class FaultInjectionTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    in_process_run.start_worker()
    cls._finished = os.path.join(tempfile.mkdtemp(), 'finished')
    status, stderr = in_process_run.run([*_SMALL, f'--root_output_dir={cls._finished}'])
    assert status == 0, stderr[-2000:]

  def _copy_of_finished_run(self, at_round: int = 8) -> tuple[str, str]:
    """(root, run directory) of a copy of the finished 8-round run as a kill after `at_round` leaves it."""
    root = self.create_tempdir().full_path
    run_dir = os.path.join(root, 'e')
    shutil.copytree(os.path.join(self._finished, 'e'), run_dir)
    if at_round < 8:
      os.remove(os.path.join(run_dir, 'summary.json'))
      for name in os.listdir(os.path.join(run_dir, 'checkpoints')):
        if name.startswith('program_state_') and int(name.rpartition('_')[2]) > at_round - at_round % 2:
          shutil.rmtree(os.path.join(run_dir, 'checkpoints', name))
    return root, run_dir

  def _resume(self, root: str) -> tuple[int, str]:
    return in_process_run.run([*_SMALL, f'--root_output_dir={root}'])

  # (2) Non-finite flags: one line, exit 2, before anything is built; the accountant never reports a NaN's epsilon.
  def test_2_non_finite_float_flags_are_refused_in_one_line(self):
    for args, flag in ((['--aggregator=dp', '--dp_noise_multiplier=nan'], 'dp_noise_multiplier'),
                       (['--dp_noise_multiplier=nan'], 'dp_noise_multiplier'),
                       (['--client_learning_rate=inf'], 'client_learning_rate'),
                       (['--server_learning_rate=inf'], 'server_learning_rate'),
                       (['--algorithm=fedtkm', '--eta_max=nan'], 'eta_max'),
                       (['--scenario=evolving_domains', '--dirichlet_alpha=nan'], 'dirichlet_alpha'),
                       (['--worker_timeout=inf'], 'worker_timeout')):
      root = self.create_tempdir().full_path
      line = _error_line(self, *in_process_run.run([*_SMALL, *args, f'--root_output_dir={root}']))
      self.assertRegex(line, rf'--{flag} must be (a finite number|a number \(inf allowed\)); got (nan|inf)\.$')
      self.assertEqual(os.listdir(root), [])  # Nothing was written.
    for noise in (float('nan'), float('inf'), 0.0, -1.0):
      with self.assertRaisesRegex(ValueError, 'finite noise multiplier > 0'):
        privacy_accounting.epsilon(noise, 8)

  # (3) pFedEM's Gaussian sums under --aggregator=dp: refused, or run with the acknowledgement and recorded.
  def test_3_pfedem_under_dp_needs_the_acknowledgement_and_records_what_is_not_covered(self):
    root = self.create_tempdir().full_path
    args = ['--task=synthetic', '--algorithm=pfedem', '--clients_per_round=4', '--total_rounds=2',
            '--rounds_per_eval=2', '--eval_batch_size=500', '--aggregator=dp', '--dp_noise_multiplier=1.0',
            '--experiment_name=p', f'--root_output_dir={root}']
    line = _error_line(self, *in_process_run.run(args))
    self.assertIn('pfedem also aggregates count, weighted_means, weighted_variances in the clear', line)
    status, stdout, stderr = in_process_run.run_with_stdout([*args, '--accept_unprotected_sums'])
    self.assertEqual(status, 0, stderr[-2000:])
    self.assertIn('--aggregator=dp covers the model update and its weight, not the training metrics nor count, '
                  'weighted_means, weighted_variances', stdout)
    with open(os.path.join(root, 'p', 'summary.json')) as f:
      privacy = json.load(f)['privacy']
    self.assertEqual(privacy['not_covered']['method_sums'], ['count', 'weighted_means', 'weighted_variances'])
    self.assertAlmostEqual(privacy['epsilon'], privacy_accounting.epsilon(1.0, 2))
    (run,) = run_results.load(root)
    self.assertEqual(run_results.method_name(run), 'pfedem' + run_results.PARTLY_PRIVATE_MARK)

  # (4) A resume without the rows it continues after: refused, naming the file, the directory untouched.
  def test_4_a_resume_without_its_metrics_rows_is_refused_and_touches_nothing(self):
    for damage in ('delete', 'empty', 'three rows'):
      root, run_dir = self._copy_of_finished_run(at_round=7)
      path = os.path.join(run_dir, 'metrics.csv')
      if damage == 'delete':
        os.remove(path)
      else:
        with open(path) as f:
          lines = f.readlines()
        with open(path, 'w') as f:
          f.writelines(lines[:4] if damage == 'three rows' else [])
      before = _file_bytes(run_dir)
      line = _error_line(self, *self._resume(root))
      self.assertIn(f'{path} ', line)
      self.assertIn('resumes after round 6', line)
      self.assertIn('--overwrite', line)
      self.assertEqual(_file_bytes(run_dir), before, damage)

  def test_4_checkpoints_that_do_not_load_refuse_a_rerun_and_an_extension_touching_nothing(self):
    # Checkpoints of another state (a single-network method's, in place of vanilla's two branches), as a run made
    # before a change to its method's state leaves them: refused before the extension edits anything.
    other = self.create_tempdir().full_path
    status, stderr = in_process_run.run([*_SMALL, '--algorithm=fedavg_plus', '--total_rounds=2',
                                         f'--root_output_dir={other}'])
    self.assertEqual(status, 0, stderr[-2000:])
    root, run_dir = self._copy_of_finished_run()
    shutil.rmtree(os.path.join(run_dir, 'checkpoints'))
    shutil.copytree(os.path.join(other, 'e', 'checkpoints'), os.path.join(run_dir, 'checkpoints'))
    before = _file_bytes(run_dir)
    for longer in ([], ['--total_rounds=10']):
      line = _error_line(self, *in_process_run.run([*_SMALL, *longer, f'--root_output_dir={root}']))
      self.assertIn('loads into this run\'s state', line)
      self.assertEqual(_file_bytes(run_dir), before, longer)

  def test_4_a_killed_run_resumes_to_the_uninterrupted_summary(self):
    root, run_dir = self._copy_of_finished_run(at_round=7)
    with open(os.path.join(run_dir, 'metrics.csv')) as f:  # Row 8 was never written; row 7 is cut short.
      lines = f.readlines()[:8]
    with open(os.path.join(run_dir, 'metrics.csv'), 'w') as f:
      f.writelines(lines[:-1] + [lines[-1][:10]])
    status, stderr = self._resume(root)
    self.assertEqual(status, 0, stderr[-2000:])
    summaries = []
    for directory in (run_dir, os.path.join(self._finished, 'e')):
      with open(os.path.join(directory, 'summary.json')) as f:
        summaries.append(json.load(f)['final_metrics'])
    self.assertEqual(summaries[0]['test_accuracy_last_period_mean'], summaries[1]['test_accuracy_last_period_mean'])

  # (5) and (7) A rerun over a metrics.csv it cannot parse refuses and leaves the directory byte-identical.
  def test_5_a_rerun_over_an_unparsable_metrics_file_refuses_and_deletes_nothing(self):
    damages = {'header': lambda text: 'R' + text[1:],  # round -> Round
               'garbage row': lambda text: text.replace('\n3,', '\nthree,', 1),
               'short row': lambda text: text.replace('\n', '\n5\n', 2).replace('\n5\n', '\n', 1)}
    for name, damage in damages.items():
      for at_round in (8, 7):
        root, run_dir = self._copy_of_finished_run(at_round)
        path = os.path.join(run_dir, 'metrics.csv')
        with open(path, newline='') as f:
          text = f.read()
        with open(path, 'w', newline='') as f:
          f.write(damage(text))
        before = _file_bytes(run_dir)
        line = _error_line(self, *self._resume(root))
        self.assertIn(path, line, name)
        self.assertEqual(_file_bytes(run_dir), before, (name, at_round))

  # (6) A run stopped by a fault in its first round does not block the corrected run.
  def test_6_an_attempt_without_a_round_does_not_block_the_next_run(self):
    root = self.create_tempdir().full_path
    status, stderr = in_process_run.run([*_SMALL, '--client_learning_rate=1e30', f'--root_output_dir={root}'])
    self.assertEqual(status, 3, stderr[-2000:])
    self.assertIn('no round had completed', stderr)
    status, stdout, stderr = in_process_run.run_with_stdout([*_SMALL, f'--root_output_dir={root}'])
    self.assertEqual(status, 0, stderr[-2000:])
    self.assertIn('which had another configuration and completed no round', stdout)
    with open(os.path.join(root, 'e', 'config.json')) as f:
      self.assertNotEqual(json.load(f)['client_learning_rate'], 1e30)

  # (7) Damaged dataset files and unknown flags: one line, exit 2.
  def test_7_damaged_sqlite_files_are_named_in_one_line(self):
    cache = self.create_tempdir().full_path
    task_files.write('emnist', cache, np.random.default_rng(0))
    path = os.path.join(cache, 'emnist_all.sqlite')
    with open(path, 'rb') as f:
      intact = f.read()
    schema = os.path.join(cache, 'other.sqlite')
    with sqlite3.connect(schema) as connection:
      connection.execute('CREATE TABLE examples (a INTEGER)')
    with open(schema, 'rb') as f:
      wrong_schema = f.read()
    for name, content, reason in (('empty', b'', 'has no table "examples"'),
                                  ('truncated', intact[:len(intact) // 2], 'database disk image is malformed'),
                                  ('corrupt', b'garbage' * 4 + intact[28:], 'file is not a database'),
                                  ('wrong schema', wrong_schema, 'has no table "examples"')):
      with open(path, 'wb') as f:
        f.write(content)
      line = _error_line(self, *in_process_run.run(
          ['--task=emnist', f'--cache_dir={cache}', '--total_rounds=1', '--clients_per_round=2',
           f'--root_output_dir={self.create_tempdir().full_path}']))
      self.assertIn(path, line, name)
      self.assertIn(reason, line, name)

  def test_7_unknown_and_mistyped_flags_exit_2_in_one_line(self):
    # The binary as users run it, with its own TF_CPP_MIN_LOG_LEVEL: stderr is the one line, nothing else.
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    environment.pop('TF_CPP_MIN_LOG_LEVEL', None)
    for args, message in ((['--no_such_flag=1'], "Unknown command line flag 'no_such_flag'"),
                          (['--total_rounds=abc'], 'flag --total_rounds=abc: invalid literal'),
                          (['--client_learning_rate=fast'], 'flag --client_learning_rate=fast'),
                          (['--client_learning_rate=inf'], '--client_learning_rate must be a finite number'),
                          (['--aggregator=dp', '--dp_noise_multiplier=nan'], '--dp_noise_multiplier must be a finite')):
      result = subprocess.run([sys.executable, _BINARY, *args], env=environment, capture_output=True, text=True,
                              timeout=300)
      self.assertEqual(result.returncode, 2, result.stderr[-2000:])
      self.assertEqual(result.stderr.strip().splitlines(), [f'run_experiment: error: {result.stderr.strip()[23:]}'])
      self.assertIn(message, result.stderr)

  # (8) The report survives malformed directories, names them, counts a seed once and lists unfinished runs.
  def test_8_the_report_lists_what_it_skipped_and_counts_seeds_once(self):
    root = self.create_tempdir().full_path
    source = os.path.join(self._finished, 'e')
    damages = {'bad_config': ('config.json', '{bad'), 'cut_summary': ('summary.json', None),
               'no_config': ('config.json', ''), 'empty_metrics': ('metrics.csv', ''),
               'garbage_metrics': ('metrics.csv', 'round,x\nnot,a number\n'), 'copy': None, 'good': None}
    for name, damage in damages.items():
      shutil.copytree(source, os.path.join(root, name))
      if damage is None:
        continue
      path = os.path.join(root, name, damage[0])
      if name == 'no_config':
        os.remove(path)
        continue
      with open(path) as f:
        text = f.read()
      with open(path, 'w') as f:
        f.write(text[:len(text) // 2] if damage[1] is None else damage[1])
    unfinished = os.path.join(root, 'seed_1')
    shutil.copytree(source, unfinished)
    with open(os.path.join(unfinished, 'config.json')) as f:
      config = json.load(f)
    with open(os.path.join(unfinished, 'config.json'), 'w') as f:
      json.dump(dict(config, seed=1), f)
    os.remove(os.path.join(unfinished, 'summary.json'))
    runs, skipped = run_results.load_all(root)
    self.assertEqual([run.name for run in runs], ['copy', 'seed_1'])
    reasons = {item.name: item.reason for item in skipped}
    self.assertEqual(sorted(reasons), ['bad_config', 'cut_summary', 'empty_metrics', 'garbage_metrics', 'good',
                                       'no_config'])
    self.assertIn('duplicate of copy', reasons['good'])
    self.assertIn('config.json does not parse', reasons['bad_config'])
    self.assertIn('summary.json does not parse', reasons['cut_summary'])
    self.assertIn('no config.json', reasons['no_config'])
    self.assertIn('metrics.csv holds no rows', reasons['empty_metrics'])
    self.assertIn('metrics.csv', reasons['garbage_metrics'])
    output = os.path.join(root, 'report')
    report_writer.write(root, output)
    with open(os.path.join(output, 'tables.md')) as f:
      table = f.read()
    self.assertRegex(table, r'\| vanilla \| 1 \|')  # One seed: the copy is not counted twice, seed_1 unfinished.
    with open(os.path.join(output, 'index.html')) as f:
      page = f.read()
    self.assertIn('Skipped (6)', page)
    self.assertIn('seed_1: unfinished: 8 of 8 rounds', page)

  # (13) The report's limits and reasons: a metrics.csv over its limit or with NUL bytes is skipped unread, and an
  # empty directory or checkpoints without rows are named as what they are.
  def test_13_the_report_caps_what_it_reads_and_says_what_a_directory_holds(self):
    root = self.create_tempdir().full_path
    source = os.path.join(self._finished, 'e')
    for name in ('huge', 'binary', 'checkpoints_only', 'good'):
      shutil.copytree(source, os.path.join(root, name))
    with open(os.path.join(root, 'binary', 'metrics.csv'), 'ab') as f:
      f.write(b'\0' * 100_000)
    with open(os.path.join(root, 'huge', 'metrics.csv'), 'a') as f:
      f.write('\n' * 300_000)
    os.remove(os.path.join(root, 'checkpoints_only', 'metrics.csv'))
    os.remove(os.path.join(root, 'checkpoints_only', 'summary.json'))
    os.makedirs(os.path.join(root, 'empty'))
    os.makedirs(os.path.join(root, 'lock_only'))
    open(os.path.join(root, 'lock_only', directory_lock.LOCK_FILE), 'w').close()
    with mock.patch.object(run_results, 'MAX_METRICS_BYTES', 200_000):
      runs, skipped = run_results.load_all(root)
    self.assertEqual([run.name for run in runs], ['good'])
    reasons = {item.name: item.reason for item in skipped}
    self.assertRegex(reasons['huge'], r"^metrics\.csv is 0\.3 MB, over the report's limit of 0\.2 MB for it; not read$")
    self.assertEqual(reasons['binary'], 'metrics.csv holds binary data (a NUL byte at offset '
                     f'{os.path.getsize(os.path.join(source, "metrics.csv")):,})')
    self.assertEqual(reasons['checkpoints_only'], 'no metrics.csv, though it holds checkpoints of rounds 4, 6, 8')
    self.assertEqual(reasons['empty'], 'an empty directory')
    self.assertIn('only a run\'s lock file', reasons['lock_only'])

  # (10) A run owns its directory: a second run of it, --overwrite included, is refused in one line naming the
  # holder, and the directory is left byte for byte as it was; the first goes on to the uninterrupted rows.
  def test_10_a_directory_held_by_a_running_run_refuses_a_second_one_touching_nothing(self):
    root = self.create_tempdir().full_path
    run_dir = os.path.join(root, 'e')
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), TF_CPP_MIN_LOG_LEVEL='3')
    first = subprocess.Popen([sys.executable, _BINARY, *_SMALL, f'--root_output_dir={root}'], env=environment,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 240
    while directory_lock.holder(run_dir) is None and first.poll() is None:
      self.assertLess(time.monotonic(), deadline)
      time.sleep(0.05)
    os.kill(first.pid, 19)  # SIGSTOP: the holder writes nothing while the second run tries.
    try:
      before = _file_bytes(run_dir)
      for extra in ([], ['--overwrite']):
        line = _error_line(self, *in_process_run.run([*_SMALL, *extra, f'--root_output_dir={root}']))
        self.assertRegex(line, rf'{run_dir} is in use by another run \(pid {first.pid} on host \S+ since ')
        self.assertEqual(_file_bytes(run_dir), before, extra)
    finally:
      os.kill(first.pid, 18)  # SIGCONT.
    _, stderr = first.communicate(timeout=600)
    self.assertEqual(first.returncode, 0, stderr[-2000:])
    self.assertEqual(_rows(run_dir), _rows(os.path.join(self._finished, 'e')))
    self.assertIsNone(directory_lock.holder(run_dir))  # Released with its process.

  # (11) A full disk while a checkpoint or a row is written: one line naming the path, the free space and what a
  # checkpoint takes, exit status 5; the rerun resumes to the uninterrupted run's rows.
  def test_11_a_full_disk_ends_in_one_line_and_the_run_resumes_exactly(self):
    root, run_dir = self._copy_of_finished_run(at_round=4)
    staging = os.path.join(run_dir, 'checkpoints', '.staging')
    save, release = run_directory.Checkpoints.save, training_loop._MetricsRelease.release

    def full_at_checkpoint_6(checkpoints, state, round_num):
      if round_num == 6:
        raise tf.errors.ResourceExhaustedError(None, None, f'{{{{function_node __wrapped__SaveV2}}}} {staging}/'
                                               'program_state_6_temp7/variables/part-00000; No space left on device '
                                               '[Op:SaveV2]')
      save(checkpoints, state, round_num)

    def full_at_row_5(outputs, values, round_num):
      if round_num == 5:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), os.path.join(run_dir, 'metrics.csv'))
      release(outputs, values, round_num)

    for target, name, fault, path in (
        (run_directory.Checkpoints, 'save', full_at_checkpoint_6, f'{staging}/program_state_6'),
        (training_loop._MetricsRelease, 'release', full_at_row_5, os.path.join(run_dir, 'metrics.csv'))):
      with mock.patch.object(target, name, fault):
        status, stderr = self._resume(root)
      self.assertEqual(status, assembly.STORAGE_FAULT_STATUS, stderr[-2000:])
      line = stderr.strip().splitlines()[-1]
      self.assertRegex(line, rf'^run_experiment: error: no space left on device while writing {path}: [0-9.]+ MB '
                             r'free there, and a checkpoint of this run takes [0-9.]+ MB; free at least [0-9.]+ MB and '
                             r'rerun the command, which resumes after round 4\.$')
      self.assertNotIn('Traceback', stderr)
    status, stderr = self._resume(root)
    self.assertEqual(status, 0, stderr[-2000:])
    self.assertEqual(_rows(run_dir), _rows(os.path.join(self._finished, 'e')))

  # (12) This process's TFF worker when the loopback library is damaged: one line, exit status 2, nothing listens.
  def test_12_a_worker_that_would_listen_beyond_loopback_ends_the_run_in_one_line(self):
    damaged = self.create_tempfile('loopback_bind.so', '').full_path
    root = self.create_tempdir().full_path
    execution_context.restart_worker()
    try:
      # The worker starts inside the run and TFF gives it the run's stdout and stderr: files, not buffers.
      with mock.patch.object(loopback, 'library_path', return_value=damaged), \
          tempfile.TemporaryFile('w+') as stdout, tempfile.TemporaryFile('w+') as stderr, \
          contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        status = run_experiment.run_arguments([*_SMALL, f'--root_output_dir={root}'])
        stderr.seek(0)
        line = _error_line(self, status, stderr.read())
    finally:
      execution_context.restart_worker()
      in_process_run.start_worker()  # With this process's own stdout and stderr, outside a run's buffers.
    self.assertRegex(line, rf'^run_experiment: error: TFF worker \d+ listens beyond loopback \(.*\); it was stopped\. '
                           rf'The preload library {re.escape(damaged)} did not take effect\.$')

  # (9) The secure aggregator's sums are simulated in the clear: the log and summary.json say so.
  def test_9_secure_runs_say_their_sums_are_simulated(self):
    root = self.create_tempdir().full_path
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    logging.getLogger('tensorflow').addHandler(handler)
    try:
      status, stdout, stderr = in_process_run.run_with_stdout([*_SMALL, '--aggregator=secure', '--total_rounds=2',
                                                               f'--root_output_dir={root}'])
      gc.collect()  # TensorFlow reports an unused op when its graph is freed.
    finally:
      logging.getLogger('tensorflow').removeHandler(handler)
    self.assertEqual(status, 0, stderr[-2000:])
    # TFF's secure aggregators' unused bound checks are not reported (`utils.stderr_filter`); nothing else was.
    self.assertEqual([record.getMessage()[:80] for record in records if record.levelno >= logging.ERROR], [])
    simulated = 'simulated: the server sees the clipped, quantized sum in the clear'
    self.assertIn(simulated, stdout)
    with open(os.path.join(root, 'e', 'summary.json')) as f:
      self.assertEqual(json.load(f)['privacy']['simulated'], simulated)


if __name__ == '__main__':
  absltest.main()
