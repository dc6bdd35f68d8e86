"""Every method on every scenario: a two-round run of each pair ends with its scenario's metrics.

The runs call run_experiment's `main` in this process (flags reset to their defaults before each), which spares each
of the pairs the interpreter, TensorFlow and TFF start-up of a subprocess (about 5 of its 10 seconds here); the
binary as users run it is tested in run_experiment_test.
"""

import contextlib
import csv
import io
import json
import os

from absl import flags
from absl.testing import absltest
from absl.testing import parameterized
import tensorflow as tf
import tensorflow_federated as tff

import run_experiment
from utils import execution_context


def _run_in_process(args) -> tuple[int, str]:
  """run_experiment's main with `args` (other flags at their defaults): (exit status, stderr)."""
  for flag in flags.FLAGS.flags_by_module_dict().get(run_experiment.__name__, []):
    flag.unparse()
  flags.FLAGS(['run_experiment', *args])
  stdout, stderr = io.StringIO(), io.StringIO()
  with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
    try:
      run_experiment.main(['run_experiment'])
      status = 0
    except SystemExit as exit_:
      status = exit_.code
  return status, stderr.getvalue()


def _rows(output_dir):
  with open(os.path.join(output_dir, 'metrics.csv')) as f:
    return list(csv.DictReader(f))


class MethodScenarioMatrixTest(parameterized.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    # TFF starts its worker with this process's stdout and stderr, which the runs redirect to buffers without
    # file descriptors: start it first (the runs then share it).
    execution_context.install()
    tff.tensorflow.computation(lambda: tf.constant(0))()

  @parameterized.product(
      scenario=['mixture_drift', 'evolving_domains', 'concept_drift', 'windowed', 'dirichlet_mixture'],
      algorithm=['vanilla', 'nds', 'vanilla_single', 'nds_single', 'scsgd', 'tshot_kmeans', 'min_loss', 'fedem',
                 'fedtem', 'fedtkm', 'pfedem', 'cfl', 'fedgmm', 'fedprox', 'fedavg_plus', 'local'])
  def test_every_method_runs_on_every_scenario(self, scenario, algorithm):
    root = self.create_tempdir().full_path
    settings = {
        # One mixture cycle over 4 rounds: a(1) = 1/2, a(2) = 1.
        'mixture_drift': ['--num_clients=20', '--num_cycles=0.5'],
        'evolving_domains': ['--num_domains=4', '--num_clients=6'],
        # Every client changes concept at round 2 (of 2), recurring every round.
        'concept_drift': ['--drift_type=recurring', '--drift_start=1', '--drift_end=1', '--concept_period=1'],
        # Windows of one round: round 2 is window 1, where half of the clients hold the new regime.
        'windowed': ['--window_rounds=1', '--windowing=sliding', '--window_overlap=0'],
        # 12 day clients, 3 of them unseen.
        'dirichlet_mixture': ['--num_clients=12', '--unseen_fraction=0.25'],
    }[scenario]
    status, stderr = _run_in_process([
        '--task=synthetic', f'--scenario={scenario}', f'--algorithm={algorithm}', '--clients_per_round=3',
        '--total_rounds=2', '--period=2', '--rounds_per_eval=2', '--eval_batch_size=500',
        f'--root_output_dir={root}', '--experiment_name=s', *settings])
    if algorithm == 'local' and scenario != 'dirichlet_mixture':  # Local needs clients' own test data.
      self.assertEqual((status, stderr.strip().splitlines()[-1]), (
          2, 'run_experiment: error: local evaluates every client on its own test data and needs a scenario with '
          'per-client test data (--scenario=dirichlet_mixture).'))
      return
    self.assertEqual(status, 0, stderr[-3000:])
    rows = _rows(os.path.join(root, 's'))
    self.assertLen(rows, 2)
    shift_free = algorithm.startswith('nds')
    if scenario == 'mixture_drift':
      self.assertEqual(float(rows[1]['scheduled_share_0']), 0.5 if shift_free else 1.0)
      self.assertBetween(float(rows[1]['test_mixture_accuracy']), 0.0, 1.0)
    elif scenario == 'evolving_domains':
      self.assertEqual(float(rows[1]['source_domains']), 3.0)
      # The target, rotated by 3 x 15 degrees, is the last domain; test_mixture_accuracy is its accuracy.
      target = 'test_day_rot0_accuracy' if shift_free else 'test_day_rot45_accuracy'
      self.assertEqual(rows[1]['test_mixture_accuracy'], rows[1][target])
    elif scenario == 'windowed':
      self.assertEqual([float(row['window']) for row in rows], [0.0, 0.0 if shift_free else 1.0])
      self.assertBetween(float(rows[1]['new_regime_share']), 0.0, 1.0)
      with open(os.path.join(root, 's', 'summary.json')) as f:
        windows = json.load(f)['window_metrics']
      # Evaluated at round 2 only: window 2 (round 2) has its max there and no pre-shift evaluation in window 1.
      self.assertEqual([w['window'] for w in windows], [2] if not shift_free else [1])
      self.assertEqual(windows[0]['max_accuracy'], float(rows[1]['test_accuracy']))
    elif scenario == 'dirichlet_mixture':
      # Two components (the day base and its transformed copy); accuracy on the clients' own and unseen data.
      self.assertAlmostEqual(float(rows[1]['domain_share_0']) + float(rows[1]['domain_share_1']), 1.0)
      columns = ('personalized_accuracy', 'unseen_accuracy') + (('test_day_T_accuracy',) if algorithm != 'local' else ())
      for column in columns:
        self.assertBetween(float(rows[1][column]), 0.0, 1.0)
    else:
      self.assertEqual(float(rows[0]['concept_share_0']), 1.0)  # Before every change point.
      self.assertEqual(float(rows[1]['concept_share_1']), 0.0 if shift_free else 1.0)
      self.assertBetween(float(rows[1]['test_night_c1_accuracy']), 0.0, 1.0)
      with open(os.path.join(root, 's', 'summary.json')) as f:
        self.assertEqual(json.load(f)['forgetting'], {})  # One evaluation: no concept has come back yet.


if __name__ == '__main__':
  absltest.main()
