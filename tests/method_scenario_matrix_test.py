"""Every method on every scenario: a two-round run of each pair ends with its scenario's metrics.

The runs call run_experiment's `main` in this process (`tests.in_process_run`).
"""

import json
import os

from absl.testing import absltest
from absl.testing import parameterized

from tests import in_process_run


class MethodScenarioMatrixTest(parameterized.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    in_process_run.start_worker()

  @parameterized.product(
      scenario=['mixture_drift', 'evolving_domains', 'concept_drift', 'windowed', 'dirichlet_mixture'],
      algorithm=['vanilla', 'nds', 'vanilla_single', 'nds_single', 'scsgd', 'tshot_kmeans', 'min_loss', 'fedem',
                 'fedtem', 'fedtkm', 'pfedem', 'cfl', 'fedgmm', 'fedprox', 'fedavg_plus', 'local', 'fedevolve',
                 'fedevp', 'fedrep'])
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
    status, stderr = in_process_run.run([
        '--task=synthetic', f'--scenario={scenario}', f'--algorithm={algorithm}', '--clients_per_round=3',
        '--total_rounds=2', '--period=2', '--rounds_per_eval=2', '--eval_batch_size=500',
        f'--root_output_dir={root}', '--experiment_name=s', *settings])
    if algorithm == 'local' and scenario not in ('dirichlet_mixture', 'evolving_domains'):  # Clients' test data.
      self.assertEqual((status, stderr.strip().splitlines()[-1]), (
          2, 'run_experiment: error: local evaluates every client on its own test data and needs a scenario with '
          'per-client test data (--scenario=dirichlet_mixture or evolving_domains).'))
      return
    if algorithm == 'fedevolve' and scenario != 'evolving_domains':  # Only there are domains time stages.
      self.assertEqual((status, stderr.strip().splitlines()[-1]), (
          2, 'run_experiment: error: fedevolve learns from the order of a client\'s domains and needs a scenario '
          'whose domains are time stages, at least 3 (--scenario=evolving_domains --num_domains>=3); this one has '
          '1.'))
      return
    self.assertEqual(status, 0, stderr[-3000:])
    rows = in_process_run.metrics_rows(os.path.join(root, 's'))
    self.assertLen(rows, 2)
    shift_free = algorithm.startswith('nds')
    if scenario == 'mixture_drift':
      self.assertEqual(float(rows[1]['scheduled_share_0']), 0.5 if shift_free else 1.0)
      self.assertBetween(float(rows[1]['test_mixture_accuracy']), 0.0, 1.0)
    elif scenario == 'evolving_domains':
      self.assertEqual(float(rows[1]['source_domains']), 3.0)
      # Each client's own target data, and for methods with a global model the centralized target test set: the
      # target, rotated by 3 x 15 degrees, is the last domain, and test_mixture_accuracy is its accuracy.
      self.assertBetween(float(rows[1]['target_accuracy']), 0.0, 1.0)
      if algorithm in ('fedevolve', 'fedevp', 'fedavg_plus', 'fedrep'):  # Personalized, and the global model's view.
        self.assertBetween(float(rows[1]['target_server_accuracy']), 0.0, 1.0)
      if algorithm != 'local':
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
