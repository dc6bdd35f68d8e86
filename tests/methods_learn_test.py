"""Every method, run by name at its own defaults (its module's `DEFAULTS`: its paper's server step ...) under the
scenario its paper evaluates it on, learns real handwriting: the `digits` task (scikit-learn's 1,797 handwritten
digits; day as written, night mirrored), 60 rounds of 10 clients.

What a run must reach: training accuracy averaged over its last 10 rounds of at least `_LEARNED` (chance is 1/20 on
the two-mode scenarios and 1/10 on one mode); Local, which trains nothing in the rounds (each held-out client trains
from scratch at evaluation), its clients' personalized accuracy. A method whose defaults leave it at chance, as
FedEvp and FedEvolve were under FedAdam at the task's rate, fails here. The runs go through run_experiment's `main`
in this process (`tests.in_process_run`), with nothing set but the schedule and each scenario's size on this task.
"""

import csv
import os

from absl.testing import absltest
from absl.testing import parameterized

from algorithms import registry as algorithms
from tests import in_process_run

_ROUNDS, _LAST = 60, 10
_LEARNED = 0.3
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

  @parameterized.named_parameters((name, name) for name in algorithms.ALGORITHMS)
  def test_learns_real_digits_at_its_defaults(self, name):
    scenario = algorithms.METHODS[name].module.DEFAULTS.scenario
    root = self.create_tempdir().full_path
    status, stderr = in_process_run.run([
        '--task=digits', f'--scenario={scenario}', f'--algorithm={name}', f'--total_rounds={_ROUNDS}', '--period=8',
        '--clients_per_round=10', f'--rounds_per_eval={_ROUNDS}', f'--rounds_per_checkpoint={_ROUNDS}',
        f'--root_output_dir={root}', '--experiment_name=run', *_SCENARIO_FLAGS.get(scenario, [])])
    self.assertEqual(status, 0, stderr)
    rows = _rows(os.path.join(root, 'run'))
    if name == 'local':  # Its rounds train nothing.
      learned = float(rows[-1]['personalized_accuracy'])
    else:
      learned = sum(float(row['train_accuracy']) for row in rows[-_LAST:]) / _LAST
    self.assertGreaterEqual(learned, _LEARNED, f'{name} on {scenario} at its defaults')


if __name__ == '__main__':
  absltest.main()
