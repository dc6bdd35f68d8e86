import dataclasses
import textwrap

from absl.testing import absltest
import numpy as np
from scipy import stats

from experiment.reporting import claims


def _claim(**fields):
  spec = dict(text='m beats b', grid='g', figure='accuracy', method='m', direction='higher', against=('b',),
              per=('windowing',))
  spec.update(fields)
  return claims.Claim(where='', paper='', **spec)


def _rows(figures: dict, windowing='tumbling'):
  """Rows of a data file: {(method, seed): {figure: value}}."""
  return [{'algorithm': method, 'seed': str(seed), 'windowing': windowing, **{k: repr(v) for k, v in values.items()}}
          for (method, seed), values in figures.items()]


class VerdictTest(absltest.TestCase):

  def test_interval_and_verdict_against_scipys_paired_t(self):
    rng = np.random.default_rng(3)
    a, b = rng.normal(0.8, 0.03, 7), rng.normal(0.6, 0.03, 7)
    rows = _rows({**{('m', s): {'accuracy': a[s]} for s in range(7)},
                  **{('b', s): {'accuracy': b[s]} for s in range(7)}, ('b', 9): {'accuracy': 0.0}})
    verdict, = claims.verdicts(_claim(), rows)
    low, high = stats.t.interval(0.95, 6, loc=np.mean(a - b), scale=stats.sem(a - b))
    self.assertEqual(verdict.difference.n, 7)  # Seed 9 has no pair.
    self.assertAlmostEqual(verdict.difference.mean, float(np.mean(a - b)))
    self.assertAlmostEqual(verdict.difference.low, low)
    self.assertAlmostEqual(verdict.difference.high, high)
    self.assertGreater(low, 0)
    self.assertEqual(verdict.verdict, claims.REPRODUCED)
    self.assertEqual(claims.verdicts(_claim(direction='lower'), rows)[0].verdict, claims.NOT_REPRODUCED)

  def test_below_the_minimum_or_across_zero_is_inconclusive(self):
    self.assertEqual(claims.verdict(claims.Interval(5, 0.15, 0.01, 0.1, 0.2), 'higher', 10), 'inconclusive (5 seeds)')
    self.assertEqual(claims.verdict(claims.Interval(10, 0.15, 0.01, 0.1, 0.2), 'higher', 10), claims.REPRODUCED)
    self.assertEqual(claims.verdict(claims.Interval(12, 0.05, 0.05, -0.1, 0.2), 'higher', 5), 'inconclusive (12 seeds)')
    self.assertEqual(claims.verdict(claims.Interval(5, -0.25, 0.01, -0.3, -0.2), 'lower', 5), claims.REPRODUCED)
    self.assertEqual(claims.verdict(claims.interval([0.3]), 'higher', 5), 'inconclusive (1 seeds)')

  def test_a_figure_against_the_runs_own_floor_per_setting(self):
    rows = _rows({('m', s): {'corr': 0.5 + 0.01 * s, 'floor': 0.3} for s in range(5)}, 'linear')
    rows += _rows({('m', s): {'corr': 0.1, 'floor': 0.3} for s in range(5)}, 'cosine')
    claim = _claim(figure='corr', against=(), against_figure='floor')
    linear, cosine = claims.verdicts(claim, rows)
    self.assertEqual((linear.setting, linear.baseline, linear.difference.n), ((('windowing', 'linear'),), None, 5))
    self.assertAlmostEqual(linear.difference.mean, 0.22)
    self.assertEqual(cosine.verdict, claims.NOT_REPRODUCED)  # 0.1 - 0.3 every seed: a zero-width interval below.

  def test_runs_selected_by_at_against_a_value(self):
    rows = _rows({('m', s): {'ari': 0.2 + 0.01 * s} for s in range(6)}, 'tumbling')
    rows += _rows({('m', s): {'ari': -0.5} for s in range(6)}, 'sliding')
    claim = _claim(figure='ari', against=(), against_value=0.0, per=(), at=(('windowing', ('tumbling',)),))
    verdict, = claims.verdicts(claim, rows)
    self.assertEqual((verdict.setting, verdict.difference.n), ((), 6))
    self.assertAlmostEqual(verdict.difference.mean, 0.225)
    self.assertEqual(verdict.verdict, claims.REPRODUCED)
    with self.assertRaisesRegex(claims.ClaimError, 'two runs of m, seed 0 in one setting'):
      claims.verdicts(dataclasses.replace(claim, at=()), rows)  # Both windowings' runs in one setting.

  def test_no_rows_is_no_seeds(self):
    verdict, = claims.verdicts(_claim(), [])
    self.assertEqual((verdict.difference.n, verdict.verdict), (0, 'inconclusive (0 seeds)'))


class LoadTest(absltest.TestCase):

  def _load(self, text):
    return claims.load(self.create_tempfile('c.toml', textwrap.dedent(text)).full_path)

  def test_a_claim_file(self):
    loaded = self._load('''
        page = "docs/results/p.md"
        [[claim]]
        text = "m beats b"
        grid = "g"
        figure = "accuracy"
        method = "m"
        against = ["b", "c"]
        direction = "higher"
        at = {shift_p = ["0.25", "4"], leak = "0"}
        min_seeds = 10
        ''')
    self.assertEqual(loaded.page, 'docs/results/p.md')
    self.assertEqual(loaded.claims[0].against, ('b', 'c'))
    self.assertEqual(loaded.claims[0].min_seeds, 10)
    self.assertEqual(loaded.claims[0].per, ())
    self.assertEqual(loaded.claims[0].at, (('leak', ('0',)), ('shift_p', ('0.25', '4'))))

  def test_bad_claims_name_the_file_and_claim(self):
    base = 'page = "p"\n[[claim]]\ntext = "t"\ngrid = "g"\nfigure = "f"\nmethod = "m"\n'
    for extra, message in [('against = ["b"]\ndirection = "up"', 'direction must be'),
                           ('direction = "higher"', 'give one of against'),
                           ('against = ["b"]\nagainst_figure = "x"\ndirection = "higher"', 'give one of against'),
                           ('against = ["b"]\ndirection = "higher"\nmin_seeds = 3', 'min_seeds must be'),
                           ('against = ["b"]\ndirection = "higher"\nseeds = 3', 'unknown keys')]:
      with self.subTest(message=message):
        with self.assertRaisesRegex(claims.ClaimError, f'claim 1: {message}'):
          self._load(base + extra)


if __name__ == '__main__':
  absltest.main()
