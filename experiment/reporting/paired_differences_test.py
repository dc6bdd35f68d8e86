"""Tests the paired differences against scipy's paired t test on runs with known figures."""

from absl.testing import absltest
import numpy as np
from scipy import stats

from experiment.reporting import paired_differences
from experiment.reporting import run_results


def _run(algorithm: str, seed: int, windowing: str, accuracy: float, drop: float) -> run_results.RunResult:
  config = {'algorithm': algorithm, 'seed': seed, 'windowing': windowing, 'total_rounds': 10}
  summary = {'final_metrics': {'test_mixture_accuracy': accuracy},
             'window_metrics': [{'window': 1, 'max_accuracy': accuracy}, {'window': 2, 'drop': drop,
                                                                            'max_accuracy': accuracy}]}
  return run_results.RunResult(f'{algorithm}_{windowing}_s{seed}', config, [], summary)


class PairedDifferencesTest(absltest.TestCase):

  def test_the_interval_is_scipys_paired_t_and_the_verdict_follows_the_better_side(self):
    rng = np.random.default_rng(0)
    a, b = rng.normal(0.8, 0.05, 6), rng.normal(0.7, 0.05, 6)
    drops_a, drops_b = rng.normal(0.02, 0.01, 6), rng.normal(0.10, 0.01, 6)
    runs = [_run('a', s, 'tumbling', a[s], drops_a[s]) for s in range(6)]
    runs += [_run('b', s, 'tumbling', b[s], drops_b[s]) for s in range(6)]
    runs += [_run('b', 9, 'tumbling', 0.1, 0.5)]  # A seed only the baseline ran is not paired.
    rows = paired_differences.paired_rows(runs, 'a', ['test_mixture_accuracy', 'window_drop'])
    self.assertLen(rows, 2)
    accuracy, drop = rows
    self.assertEqual((accuracy.baseline, accuracy.difference.n), ('b', 6))
    self.assertAlmostEqual(accuracy.difference.mean, float(np.mean(a - b)))
    self.assertAlmostEqual(accuracy.difference.mean / accuracy.difference.standard_error,
                           stats.ttest_rel(a, b).statistic)
    low, high = stats.t.interval(0.95, 5, loc=np.mean(a - b), scale=stats.sem(a - b))
    self.assertAlmostEqual(accuracy.difference.low, low)
    self.assertAlmostEqual(accuracy.difference.high, high)
    self.assertEqual(accuracy.verdict, 'better')
    self.assertEqual(drop.verdict, 'better')  # A smaller drop is better: the interval lies below 0.
    worse = paired_differences.paired_rows(runs, 'b', ['test_mixture_accuracy'])[0]
    self.assertEqual(worse.verdict, 'worse')

  def test_an_interval_across_zero_or_one_seed_is_inconclusive_per_setting(self):
    runs = [_run('a', s, w, 0.5 + 0.1 * (-1) ** s, 0.0) for s in range(4) for w in ('sliding', 'tumbling')]
    runs += [_run('b', s, w, 0.5, 0.0) for s in range(4) for w in ('sliding', 'tumbling')]
    runs += [_run('a', 0, 'none', 0.9, 0.0), _run('b', 0, 'none', 0.1, 0.0)]
    rows = paired_differences.paired_rows(runs, 'a', ['test_mixture_accuracy'])
    self.assertEqual([dict(row.setting)['windowing'] for row in rows], ['none', 'sliding', 'tumbling'])
    self.assertEqual([row.verdict for row in rows], ['inconclusive (1 seeds)', 'inconclusive (4 seeds)',
                                                     'inconclusive (4 seeds)'])
    self.assertIn('| windowing=sliding | b | test_mixture_accuracy | 4 |',
                  paired_differences.markdown(rows, 'a'))


if __name__ == '__main__':
  absltest.main()
