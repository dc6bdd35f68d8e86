"""The Diurnal-or-Nocturnal paper's baselines learn as FedAvg does: 8-round runs on the synthetic task (20 classes,
chance 0.05), each compared with FedAvg (`vanilla`) run on the same seeded clients and rounds.

Every baseline trains its branches with FedAvg's client step, so over the same rounds it must gain accuracy between
rounds 4 and 8 (at least half of FedAvg's gain) and end at no less than 0.6 of FedAvg's accuracy; a baseline whose
routing or training were broken (a branch never trained, routing to an untrained branch) stays near chance and fails
both. Measured here: FedAvg 0.22 -> 0.38; the baselines 0.15-0.28 -> 0.28-0.55 (T-shot k-means lowest: it routes by
its centers only from round 5).

Their outputs, routing metrics and parameter counts on every scenario are checked by method_scenario_matrix_test;
this test adds that training moves them as much as it moves FedAvg. The runs call run_experiment's `main` in this
process (`tests.in_process_run`).
"""

import os
import tempfile

from absl.testing import absltest
from absl.testing import parameterized

from tests import in_process_run


def _accuracy_by_round(algorithm: str, root: str) -> dict[int, float]:
  # T = 4: T-shot k-means collects centers in rounds 1-4 and routes by them in rounds 5-8.
  status, stderr = in_process_run.run([
      '--task=synthetic', f'--algorithm={algorithm}', '--clients_per_round=5', '--period=4', '--total_rounds=8',
      '--rounds_per_eval=4', '--eval_batch_size=500', f'--root_output_dir={root}', '--experiment_name=b'])
  if status != 0:
    raise AssertionError(stderr[-3000:])
  rows = in_process_run.metrics_rows(os.path.join(root, 'b'))
  return {int(row['round']): float(row['test_accuracy']) for row in rows if row.get('test_accuracy')}


class BaselinesLearnTest(parameterized.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    in_process_run.start_worker()
    cls._fedavg = _accuracy_by_round('vanilla', tempfile.mkdtemp())

  @parameterized.parameters('scsgd', 'tshot_kmeans', 'min_loss', 'fedem', 'vanilla_single', 'nds_single')
  def test_learns_as_fedavg_does(self, algorithm):
    accuracy = _accuracy_by_round(algorithm, self.create_tempdir().full_path)
    fedavg = self._fedavg
    self.assertGreater(fedavg[8], 0.15)  # The reference itself learned: three times chance.
    self.assertGreater(accuracy[8] - accuracy[4], 0.5 * (fedavg[8] - fedavg[4]), (accuracy, fedavg))
    self.assertGreater(accuracy[8], 0.6 * fedavg[8], (accuracy, fedavg))


if __name__ == '__main__':
  absltest.main()
