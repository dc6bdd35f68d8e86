"""Seed 002's baselines learn: 8-round runs on the synthetic task (20 classes, chance 0.05) end at three times
chance or more.

Their outputs, routing metrics and parameter counts on every scenario are checked by method_scenario_matrix_test;
this test adds that training moves them. The runs call run_experiment's `main` in this process
(`tests.in_process_run`).
"""

import json
import os

from absl.testing import absltest
from absl.testing import parameterized

from tests import in_process_run


class BaselinesLearnTest(parameterized.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    in_process_run.start_worker()

  @parameterized.parameters('scsgd', 'tshot_kmeans', 'min_loss', 'fedem', 'vanilla_single', 'nds_single')
  def test_ends_above_chance(self, algorithm):
    root = self.create_tempdir().full_path
    # T = 4: T-shot k-means collects centers in rounds 1-4 and routes by them in rounds 5-8.
    status, stderr = in_process_run.run([
        '--task=synthetic', f'--algorithm={algorithm}', '--clients_per_round=5', '--period=4', '--total_rounds=8',
        '--rounds_per_eval=8', '--eval_batch_size=500', f'--root_output_dir={root}', '--experiment_name=b'])
    self.assertEqual(status, 0, stderr[-3000:])
    with open(os.path.join(root, 'b', 'summary.json')) as f:
      accuracy = json.load(f)['final_metrics']['test_accuracy']
    self.assertGreater(accuracy, 0.15)  # Three times chance; 0.28-0.55 measured.


if __name__ == '__main__':
  absltest.main()
