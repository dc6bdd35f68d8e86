"""FedEvolve, FedEvp and FedRep (seed 001) learn on evolving domains: short runs on the synthetic task rotated by 20
degrees per domain must predict the unseen target domain far above chance (10 classes: 0.1).

Measured with these settings (20 rounds): FedEvolve 0.91 on the target test set, its clients' target data 0.90 with
pooled prototypes (server view) and 0.73 with each client's own; FedEvp 0.93 / 0.93 / 0.94 (personalized); FedRep
0.89 / 0.92 / 0.96 (its clients' own heads).
"""

import os

from absl.testing import absltest
from absl.testing import parameterized

from tests import in_process_run


class EvolvingMethodsTest(parameterized.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    in_process_run.start_worker()

  @parameterized.parameters('fedevolve', 'fedevp', 'fedrep')
  def test_learns_to_predict_the_unseen_target_domain(self, algorithm):
    root = self.create_tempdir().full_path
    status, stderr = in_process_run.run([
        '--task=synthetic', '--scenario=evolving_domains', '--num_domains=5', '--rotation_step=20',
        '--num_clients=8', '--clients_per_round=4', '--client_batch_size=64', f'--algorithm={algorithm}',
        '--total_rounds=20', '--rounds_per_eval=20', f'--root_output_dir={root}', '--experiment_name=s'])
    self.assertEqual(status, 0, stderr[-3000:])
    rows = in_process_run.metrics_rows(os.path.join(root, 's'))
    final = rows[-1]
    self.assertGreater(float(final['test_mixture_accuracy']), 0.6)  # The centralized target test set.
    self.assertGreater(float(final['target_server_accuracy']), 0.6)  # Every client's own target data.
    self.assertGreater(float(final['target_accuracy']), 0.5)
    self.assertGreater(float(final['train_accuracy']), float(rows[0]['train_accuracy']) + 0.2)


if __name__ == '__main__':
  absltest.main()
