"""Two rounds of run_experiment.py on each paper task, and of every baseline on EMNIST, from small files in TFF's
cache layout and tensorflow-datasets' prepared layout, offline. The runs call run_experiment's `main` in this process
(`tests.in_process_run`); the missing-file case runs the binary."""

import csv
import json
import os
import subprocess
import sys
import tempfile

from absl.testing import absltest
from absl.testing import parameterized

from tasks.testing import fake_tff_files
from tasks.testing import fake_tfds_files
from tests import in_process_run

_BINARY = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'run_experiment.py')
_OVERHEADS = {'emnist': '0.7', 'cifar': '0.5', 'stackoverflow': '1.6'}


def _run(args):
  env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), TF_CPP_MIN_LOG_LEVEL='3')
  return subprocess.run([sys.executable, _BINARY, *args], env=env, capture_output=True, text=True, timeout=900)


class PaperTasksEndToEndTest(parameterized.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    in_process_run.start_worker()
    cls.cache_dir = tempfile.mkdtemp(dir=absltest.get_default_test_tmpdir())
    cls.expected_populations = fake_tff_files.write_small_cache(cls.cache_dir)
    cls.tfds_data_dir = tempfile.mkdtemp(dir=absltest.get_default_test_tmpdir())
    fake_tfds_files.write('mnist', cls.tfds_data_dir, {  # Fashion-MNIST is the real one (Debian's files).
        'train': fake_tfds_files.random_images((28, 28, 1), 250, 10, 0),
        'test': fake_tfds_files.random_images((28, 28, 1), 30, 10, 10)})

  @parameterized.parameters(('emnist', 'vanilla'), ('emnist', 'fedtem'), ('emnist', 'fedtkm'),
                            ('cifar', 'fedtkm'), ('stackoverflow', 'fedtem'), ('emnist', 'scsgd'),
                            ('emnist', 'tshot_kmeans'), ('emnist', 'min_loss'), ('emnist', 'fedem'),
                            ('emnist', 'vanilla_single'), ('emnist', 'nds_single'))
  def test_two_rounds(self, task, algorithm):
    root = self.create_tempdir().full_path
    status, stdout, stderr = in_process_run.run_with_stdout([
        f'--task={task}', f'--algorithm={algorithm}', f'--cache_dir={self.cache_dir}', '--total_rounds=2',
        '--clients_per_round=2', '--max_elements_per_client=20', '--rounds_per_eval=2', f'--root_output_dir={root}',
        '--experiment_name=run'])
    self.assertEqual(status, 0, stderr[-3000:])
    if not algorithm.endswith('_single'):
      self.assertIn(f'({_OVERHEADS[task]}% of the single-branch network)', stdout)
    with open(os.path.join(root, 'run', 'summary.json')) as f:
      summary = json.load(f)
    self.assertEqual(summary['population'], self.expected_populations[task])
    if not algorithm.endswith('_single'):
      self.assertEqual(f'{summary["parameters"]["branch_overhead_percent"]:.1f}', _OVERHEADS[task])
    with open(os.path.join(root, 'run', 'metrics.csv')) as f:
      rows = list(csv.DictReader(f))
    self.assertLen(rows, 2)
    self.assertBetween(float(rows[-1]['test_accuracy']), 0.0, 1.0)
    self.assertGreater(float(rows[-1]['train_examples']), 0.0)

  @parameterized.parameters('fedevp', 'fedevolve')
  def test_fedadam_at_the_tasks_rate_is_refused_on_the_papers_network_unless_a_rate_is_chosen(self, algorithm):
    args = lambda: ['--task=emnist', f'--cache_dir={self.cache_dir}', '--scenario=evolving_domains',
                    '--num_domains=3', '--num_clients=2', '--clients_per_round=2', f'--algorithm={algorithm}',
                    f'--root_output_dir={self.create_tempdir().full_path}']  # A directory of its own each.
    status, stderr, built = in_process_run.build_only([*args(), '--server_optimizer=adam'])
    self.assertEqual((status, built), (2, None), stderr[-2000:])
    self.assertRegex(stderr.strip().splitlines()[-1], f'^run_experiment: error: --server_optimizer=adam at task '
                     f"emnist's learning rate is refused for {algorithm}: .*; set --server_learning_rate")
    for chosen in (['--server_optimizer=adam', '--server_learning_rate=0.01'], []):  # A rate chosen; the default.
      status, stderr, built = in_process_run.build_only([*args(), *chosen])
      self.assertEqual(status, 0, stderr[-2000:])
      self.assertIsNotNone(built)
    # A run started with a chosen rate resumes without the flag: the rate it recorded stands and is not refused.
    started = [*args(), '--server_optimizer=adam', '--total_rounds=1', '--rounds_per_eval=1']
    status, stderr = in_process_run.run([*started, '--server_learning_rate=0.01'])
    self.assertEqual(status, 0, stderr[-2000:])
    status, stdout, stderr = in_process_run.run_with_stdout([*started[:-2], '--total_rounds=2', '--rounds_per_eval=1'])
    self.assertEqual(status, 0, stderr[-2000:])
    self.assertIn('server_learning_rate=0.01', stdout)

  @parameterized.parameters(
      ('emnist', 'evolving_domains', ['--num_domains=3', '--num_clients=2']),
      # CIFAR's ResNet runs in test_two_rounds (a minute of building and tracing per run here): not once more.
      ('emnist', 'mixture_drift', ['--num_clients=2', '--num_cycles=0.5']),
      ('emnist', 'concept_drift', ['--drift_type=incremental', '--drift_start=0', '--drift_end=0.5',
                                   '--drift_length=2']),
      ('emnist', 'windowed', ['--window_rounds=1', '--corruptions=blur,haze,jitter', '--label_skew_alpha=0.5']),
      ('emnist', 'dirichlet_mixture', ['--num_clients=4', '--unseen_fraction=0.25']),
      ('mnist', 'evolving_domains', ['--num_domains=2', '--rotation_step=30', '--num_clients=1',
                                     '--dirichlet_alpha=0.5']),
      ('emnist_fashion', 'mixture_drift', ['--num_clients=2', '--num_cycles=0.5']))
  def test_scenarios_on_image_tasks(self, task, scenario, settings):
    root = self.create_tempdir().full_path
    if task in ('mnist', 'emnist_fashion'):
      settings = [*settings, f'--tfds_data_dir={self.tfds_data_dir}']
    status, stderr = in_process_run.run([
        f'--task={task}', f'--scenario={scenario}', f'--cache_dir={self.cache_dir}', '--total_rounds=2',
        f'--clients_per_round={1 if task == "mnist" else 2}', '--max_elements_per_client=20', '--rounds_per_eval=2',
        f'--root_output_dir={root}', '--experiment_name=run', *settings])
    self.assertEqual(status, 0, stderr[-3000:])
    with open(os.path.join(root, 'run', 'metrics.csv')) as f:
      rows = list(csv.DictReader(f))
    self.assertLen(rows, 2)
    self.assertBetween(float(rows[-1]['test_accuracy']), 0.0, 1.0)
    if scenario == 'evolving_domains':  # Images rotated by 0, 15 and 30 (or 0 and 30) degrees; the last is the target.
      self.assertEqual(rows[-1]['test_mixture_accuracy'], rows[-1]['test_day_rot30_accuracy'])
      self.assertBetween(float(rows[-1]['target_accuracy']), 0.0, 1.0)  # Every client's own target data.
    if task == 'emnist_fashion':  # K = 3: digits, characters and Fashion-MNIST.
      self.assertAlmostEqual(sum(float(rows[-1][f'domain_share_{k}']) for k in range(3)), 1.0)
      self.assertBetween(float(rows[-1]['test_fashion_accuracy']), 0.0, 1.0)
    if scenario == 'dirichlet_mixture':  # Digits, and digits rotated, flipped, inverted and relabelled.
      for column in ('personalized_accuracy', 'unseen_accuracy', 'test_day_T_accuracy'):
        self.assertBetween(float(rows[-1][column]), 0.0, 1.0)

  def test_missing_file_is_one_line_naming_it_and_the_flag(self):
    empty = self.create_tempdir().full_path
    result = _run(['--task=emnist', f'--cache_dir={empty}', f'--root_output_dir={empty}'])
    self.assertEqual(result.returncode, 2)
    lines = result.stderr.strip().splitlines()
    self.assertLen(lines, 1, result.stderr)
    self.assertIn(os.path.join(empty, 'emnist_all.sqlite'), lines[0])
    self.assertIn('--cache_dir', lines[0])
    self.assertEqual(os.listdir(empty), [])  # Nothing written.


if __name__ == '__main__':
  absltest.main()
