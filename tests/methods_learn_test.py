"""Every method, run by name at its own defaults (its module's `DEFAULTS`: its paper's server step ...) under the
scenario its paper evaluates it on, learns real handwriting: the `digits` task (scikit-learn's 1,797 handwritten
digits; day as written, night mirrored: 20 classes, 10 a mode), 40 rounds of 10 clients.

What a run must reach: training accuracy averaged over its last 10 rounds of at least `_LEARNED` (3 times the chance
of one mode's 10 classes, 6 times that of 20); Local, which trains nothing in the rounds (each held-out client trains
from scratch at evaluation), its clients' personalized accuracy of at least 3 times the chance of 20 classes. A
method whose defaults leave it near chance fails here, as FedEvp did under FedAdam at the emnist task's rate.

The scale is the test's: rounds, clients, each scenario's size on this task, and five local epochs. The digits
task's clients hold 20 digits, two batches; the papers' one local epoch runs over clients of hundreds of examples,
and with parameter averaging (most papers' server step) two local steps a round leave a windowed run at chance for
60 rounds; five epochs give a round the local work of one epoch over a client of 100 digits. The runs go through
run_experiment's `main` in this process (`tests.in_process_run`).
"""

import csv
import os

from absl.testing import absltest
from absl.testing import parameterized

from algorithms import registry as algorithms
from tests import in_process_run

_ROUNDS, _LAST = 40, 10
_LEARNED = 0.3
_CHANCE = 1 / 20
# The scenarios' sizes for the digits task's 62 clients of 20 digits, 31 a mode (a scenario not listed runs at its
# defaults), after the flags every run has.
_SCENARIO_FLAGS = {
    'evolving_domains': ['--num_domains=4', '--num_clients=6', '--clients_per_round=6'],
    'dirichlet_mixture': ['--num_clients=16', '--unseen_fraction=0.25'],
    'mixture_drift': ['--num_clients=20', '--num_cycles=0.5'],
    'concept_drift': ['--drift_type=recurring', '--drift_start=0.3', '--drift_end=0.3', '--concept_period=10'],
    'windowed': ['--window_rounds=10', '--num_clients=40'],
}


def _rows(output_dir: str) -> list[dict]:
  with open(os.path.join(output_dir, 'metrics.csv')) as f:
    return list(csv.DictReader(f))


class MethodsLearnTest(parameterized.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    in_process_run.start_worker()

  @parameterized.named_parameters((name, name) for name in algorithms.ALGORITHMS)
  def test_learns_real_digits_at_its_defaults(self, name):
    scenario = algorithms.METHODS[name].module.DEFAULTS.scenario
    root = self.create_tempdir().full_path
    status, stderr = in_process_run.run([
        '--task=digits', f'--scenario={scenario}', f'--algorithm={name}', f'--total_rounds={_ROUNDS}', '--period=8',
        '--clients_per_round=10', '--client_epochs=5', f'--rounds_per_eval={_ROUNDS}',
        f'--rounds_per_checkpoint={_ROUNDS}',
        f'--root_output_dir={root}', '--experiment_name=run', *_SCENARIO_FLAGS.get(scenario, [])])
    self.assertEqual(status, 0, stderr)
    rows = _rows(os.path.join(root, 'run'))
    if name == 'local':  # Its rounds train nothing.
      self.assertGreaterEqual(float(rows[-1]['personalized_accuracy']), 3 * _CHANCE, f'{name} on {scenario}')
      return
    learned = sum(float(row['train_accuracy']) for row in rows[-_LAST:]) / _LAST
    self.assertGreaterEqual(learned, _LEARNED, f'{name} on {scenario} at its defaults')


if __name__ == '__main__':
  absltest.main()
