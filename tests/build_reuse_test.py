"""A run on a reused build (`experiment.core.built_methods`) trains and evaluates exactly as on a fresh build: on the
new run's held-out data, and, for every method whose build does not read the seed (`SEEDED_BUILD`), with another
seed. The methods are the registry's, so a new method that reads the seed at build time without declaring it fails
here."""

import os
import tempfile

from absl.testing import absltest
from absl.testing import parameterized

from algorithms import registry as algorithms
from experiment.core import built_methods
from tests import in_process_run


def _rows(test, args, name: str) -> list[dict]:
  """metrics.csv of the run of `args` (without each round's wall time)."""
  root = tempfile.mkdtemp()
  status, stderr = in_process_run.run([*args, f'--root_output_dir={root}', f'--experiment_name={name}'])
  test.assertEqual(status, 0, stderr[-2000:])
  return [{key: value for key, value in row.items() if key != 'round_seconds'}
          for row in in_process_run.metrics_rows(os.path.join(root, name))]


class BuildReuseTest(parameterized.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    in_process_run.start_worker()

  # Another share of unseen clients: other held-out test data under the same build; FedGMM fits its held-out
  # clients' weights, FedAvg+ tunes per client, FedTEM routes test batches.
  @parameterized.parameters('fedgmm', 'fedavg_plus', 'fedtem')
  def test_a_reused_build_evaluates_the_new_runs_held_out_data(self, algorithm):
    base = [*in_process_run.smoke_args('dirichlet_mixture'), f'--algorithm={algorithm}']
    built_methods.clear()
    _rows(self, base, 'first')
    reused = built_methods.reused()
    second = [*base, '--unseen_fraction=0.5', '--total_rounds=3', '--rounds_per_eval=1', '--rounds_per_checkpoint=1']
    on_reused_build = _rows(self, second, 'second')
    self.assertEqual(built_methods.reused(), reused + 1)
    built_methods.clear()
    self.assertEqual(on_reused_build, _rows(self, second, 'fresh'))

  @parameterized.parameters(*algorithms.ALGORITHMS)
  def test_a_build_is_reused_for_another_seed_only_when_that_gives_the_fresh_builds_rows(self, algorithm):
    built_methods.clear()
    scenario, _ = in_process_run.build_on_first_scenario(algorithm)  # Seed 0's build, kept.
    args = [*in_process_run.smoke_args(scenario, seed=1), f'--algorithm={algorithm}', '--clients_per_round=4']
    reused = built_methods.reused()
    rows = _rows(self, args, 'seed1')
    self.assertEqual(built_methods.reused(), reused + (not algorithms.seeded_build(algorithm)))
    built_methods.clear()
    self.assertEqual(rows, _rows(self, args, 'seed1_fresh'))


if __name__ == '__main__':
  absltest.main()
