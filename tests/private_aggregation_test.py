"""--aggregator=dp: TFF's DP-FedAvg aggregator in a run, its noise, its refusal, and the reported epsilon against the
exact privacy curve of the Gaussian mechanism (Balle and Wang, "Improving the Gaussian Mechanism for Differential
Privacy", 2018), computed here with scipy. --aggregator=secure: TFF's secure aggregator in a run, and its refusals.

T rounds of a Gaussian mechanism of noise multiplier z on clipped (sensitivity-1 after scaling) contributions are
one Gaussian mechanism of multiplier z / sqrt(T); its exact delta(epsilon) is
Phi(-epsilon s + 1 / (2 s)) - e^epsilon Phi(-epsilon s - 1 / (2 s)) with s = z / sqrt(T). The RDP accountant's
epsilon is an upper bound on the exact one, and a tight one for these parameters.
"""

import functools
import io
import json
import os
import re
import tempfile

from absl.testing import absltest
import numpy as np
from scipy import optimize
from scipy import stats
import tensorflow_federated as tff

from algorithms.core import learning_process
from algorithms.core import privacy_accounting
from experiment.core import grid as grid_lib
from experiment.reporting import report_tables
from experiment.reporting import run_results
from tests import in_process_run
from utils import strict_json

_RUN = ['--task=synthetic', '--clients_per_round=5', '--period=8', '--total_rounds=8', '--rounds_per_eval=8',
        '--eval_batch_size=500', '--experiment_name=r']


def _exact_epsilon(noise_multiplier: float, rounds: int, delta: float) -> float:
  sigma = noise_multiplier / np.sqrt(rounds)
  curve = lambda eps: (stats.norm.cdf(-eps * sigma + 1 / (2 * sigma))
                       - np.exp(eps) * stats.norm.cdf(-eps * sigma - 1 / (2 * sigma)) - delta)
  return optimize.brentq(curve, 0.0, 500.0)


def _not_json(constant: str):
  raise AssertionError(f'summary.json holds {constant}, which is not JSON')


@functools.lru_cache(maxsize=None)
def _run(args: tuple):
  """summary.json of a run with `args`, with its report row under 'report' (each run made once per process)."""
  root = tempfile.mkdtemp()
  status, stderr = in_process_run.run([*_RUN, *args, f'--root_output_dir={root}'])
  if status != 0:
    raise AssertionError(stderr[-3000:])
  with open(os.path.join(root, 'r', 'summary.json')) as f:
    text = f.read()
  json.loads(text, parse_constant=_not_json)  # Strict JSON: no Infinity or NaN (`utils.strict_json`).
  summary = strict_json.load(io.StringIO(text))
  (run,) = run_results.load(root)
  summary['report'] = report_tables.run_metrics(run)
  return summary


class PrivateAggregationTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    in_process_run.start_worker()

  def test_epsilon_bounds_the_exact_gaussian_curve_tightly(self):
    for noise, rounds in ((1.0, 100), (2.0, 1000), (0.8, 10)):
      exact = _exact_epsilon(noise, rounds, 1e-5)
      reported = privacy_accounting.epsilon(noise, rounds, 1e-5)
      self.assertBetween(reported, exact, 1.3 * exact, (noise, rounds))
    for bad in (0.0, -1.0, float('nan'), float('inf')):
      with self.assertRaisesRegex(ValueError, '^the privacy accountant needs a finite noise multiplier > 0'):
        privacy_accounting.epsilon(bad, 10)

  def test_the_docs_privacy_table_states_the_grids_epsilons(self):
    # docs/operations.md's privacy table heads its columns "z = <z> (epsilon <e>)" for the privacy grid's runs: each
    # e must be the accountant's epsilon for the grid's rounds at the default delta, rounded as printed.
    repository = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    grid = grid_lib.load(os.path.join(repository, 'experiment', 'grids', 'privacy.toml'))
    rounds = {int(dict(run.flags)['total_rounds']) for run in grid.runs()}
    self.assertLen(rounds, 1)
    rounds = rounds.pop()
    with open(os.path.join(repository, 'docs', 'operations.md')) as f:
      stated = re.findall(r'z = ([0-9.]+) \(epsilon ([0-9]+)\)', f.read())
    self.assertCountEqual([float(z) for z, _ in stated], [0.5, 1.0])  # The grid's noise multipliers above 0.
    for z, epsilon in stated:
      self.assertEqual(int(epsilon), round(privacy_accounting.epsilon(float(z), rounds)), z)

  def test_dp_runs_report_epsilon_and_noise_costs_accuracy(self):
    mean = _run(())
    clipped = _run(('--aggregator=dp',))
    noisy = _run(('--aggregator=dp', '--dp_noise_multiplier=1.0'))
    self.assertNotIn('privacy', mean)
    self.assertEqual(clipped['privacy']['epsilon'], float('inf'))
    self.assertAlmostEqual(noisy['privacy']['epsilon'], privacy_accounting.epsilon(1.0, 8))
    self.assertAlmostEqual(noisy['report']['dp_epsilon'], noisy['privacy']['epsilon'])  # The report's column.
    self.assertNotIn('dp_epsilon', mean['report'])
    accuracy = lambda summary: summary['final_metrics']['test_accuracy']
    # Clipping alone (no noise) still learns, as the mean does; noise of 1.0 on 5 clients' sum drowns the update.
    self.assertGreater(accuracy(clipped), 0.15)
    self.assertGreater(accuracy(clipped), accuracy(noisy) + 0.05)

  def test_secure_runs_sum_securely_and_learn_as_the_mean_does(self):
    # The aggregator's round holds TFF's secure sum; the run (whose context replaces it by its plain body) ends where
    # the mean's does, up to the coordinate bounds and quantization of the secure sum.
    aggregator = learning_process.build_model_aggregator('secure').create(tff.types.TensorType(np.float32, [3]),
                                                 tff.types.TensorType(np.float32))
    proto = tff.framework.ConcreteComputation.get_proto(aggregator.next).SerializeToString()
    self.assertIn(b'federated_secure_sum_bitwidth', proto)
    mean, secure = _run(()), _run(('--aggregator=secure',))
    accuracy = lambda summary: summary['final_metrics']['test_accuracy']
    self.assertGreater(accuracy(mean), 0.15)
    self.assertAlmostEqual(accuracy(secure), accuracy(mean), delta=0.03)
    # The summary says the secure sums were simulated in the clear, and claims no epsilon.
    self.assertEqual(secure['privacy']['simulated'],
                     'simulated: the server sees the clipped, quantized sum in the clear')
    self.assertNotIn('epsilon', secure['privacy'])
    self.assertNotIn('dp_epsilon', secure['report'])

  def test_methods_with_their_own_aggregation_and_bad_settings_are_refused_in_one_line(self):
    for args, message in ((['--algorithm=cfl', '--aggregator=dp'], 'aggregates its updates its own way'),
                          (['--algorithm=cfl', '--aggregator=secure'], 'aggregates its updates its own way'),
                          (['--aggregator=secure', '--workers=127.0.0.1:9'], 'secure runs on this machine only'),
                          (['--aggregator=median'], 'aggregator must be one of mean, dp, secure'),
                          (['--dp_noise_multiplier=0.5'], 'is the noise of --aggregator=dp')):
      status, stderr = in_process_run.run([*_RUN, *args, f'--root_output_dir={tempfile.mkdtemp()}'])
      self.assertEqual(status, 2, stderr[-2000:])
      # One line (a Python warning an earlier run of this process triggered may precede it).
      errors = [line for line in stderr.strip().splitlines() if line.startswith('run_experiment: error: ')]
      self.assertLen(errors, 1, stderr[-2000:])
      self.assertEqual(errors[0], stderr.strip().splitlines()[-1])
      self.assertIn(message, errors[0])


if __name__ == '__main__':
  absltest.main()
