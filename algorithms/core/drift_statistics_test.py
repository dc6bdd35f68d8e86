"""Checks the ShiftEx paper's shift statistics against numpy references written from Eq. 1, scipy's Jensen-Shannon
distance and the detection rule's false-positive rate on windows without a shift."""

import numpy as np
from scipy import stats
from scipy.spatial import distance
import tensorflow as tf

from algorithms.core import drift_statistics


def _mmd_reference(x, y, gamma_k, unbiased):
  """Eq. 1 by explicit loops over pairs."""
  def mean_kernel(a, b, skip_diagonal):
    total, count = 0.0, 0
    for i in range(len(a)):
      for j in range(len(b)):
        if skip_diagonal and i == j:
          continue
        total += np.exp(-gamma_k * np.sum((a[i] - b[j])**2))
        count += 1
    return total / count
  return mean_kernel(x, x, unbiased) + mean_kernel(y, y, unbiased) - 2 * mean_kernel(x, y, False)


class MmdTest(tf.test.TestCase):

  def test_biased_and_unbiased_estimators_match_pairwise_sums(self):
    rng = np.random.default_rng(0)
    for unbiased in (False, True):
      x, y = rng.normal(size=(7, 3)), rng.normal(0.5, 1.0, size=(5, 3))
      got = drift_statistics.mmd_squared(tf.constant(x, tf.float32), tf.constant(y, tf.float32), 0.3,
                                         unbiased=unbiased)
      self.assertAllClose(got, _mmd_reference(x, y, 0.3, unbiased), rtol=1e-4, atol=1e-5)

  def test_zero_weights_drop_padding_rows(self):
    rng = np.random.default_rng(1)
    x, y = rng.normal(size=(6, 4)), rng.normal(size=(4, 4))
    padded = np.concatenate([x, rng.normal(size=(3, 4)) * 100], 0)
    weights = np.array([1] * 6 + [0] * 3, np.float32)
    for unbiased in (False, True):
      got = drift_statistics.mmd_squared(tf.constant(padded, tf.float32), tf.constant(y, tf.float32), 0.5,
                                         x_weights=weights, unbiased=unbiased)
      self.assertAllClose(got, _mmd_reference(x, y, 0.5, unbiased), rtol=1e-4, atol=1e-5)

  def test_unbiased_estimator_centres_on_zero_without_shift(self):
    rng = np.random.default_rng(2)
    values = [drift_statistics.mmd_squared(tf.constant(rng.normal(size=(20, 2)), tf.float32),
                                           tf.constant(rng.normal(size=(20, 2)), tf.float32), 0.5,
                                           unbiased=True).numpy() for _ in range(200)]
    self.assertLess(abs(np.mean(values)), 3 * np.std(values) / np.sqrt(len(values)))

  def test_median_heuristic(self):
    rng = np.random.default_rng(3)
    x = rng.normal(size=(9, 3))
    squared = [np.sum((x[i] - x[j])**2) for i in range(9) for j in range(i + 1, 9)]
    self.assertAllClose(drift_statistics.median_heuristic_gamma(tf.constant(x, tf.float32)),
                        1 / np.median(squared), rtol=1e-4)


class JensenShannonTest(tf.test.TestCase):

  def test_matches_scipy(self):
    rng = np.random.default_rng(4)
    for _ in range(10):
      p, q = rng.dirichlet(np.ones(6) * 0.5), rng.dirichlet(np.ones(6) * 0.5)
      p[rng.integers(6)] = 0
      p /= p.sum()
      self.assertAllClose(drift_statistics.jensen_shannon(tf.constant(p, tf.float32), tf.constant(q, tf.float32)),
                          distance.jensenshannon(p, q)**2, rtol=1e-4, atol=1e-6)

  def test_range(self):
    self.assertAllClose(drift_statistics.jensen_shannon(tf.constant([1.0, 0.0]), tf.constant([0.0, 1.0])),
                        np.log(2))
    self.assertAllClose(drift_statistics.jensen_shannon(tf.constant([0.3, 0.7]), tf.constant([0.3, 0.7])), 0.0)

  def test_label_counts(self):
    self.assertAllClose(drift_statistics.label_counts(tf.constant([0, 2, 2, 3]), 5), [1, 0, 2, 1, 0])


class PermutationTest(tf.test.TestCase):
  """The permutation tests against scipy.stats.permutation_test on the same data (independent random splits: the
  p-values agree within their Monte Carlo error) and the exactness of the randomized p-value."""

  def test_mmd_test_matches_scipy_and_pads(self):
    rng = np.random.default_rng(4)
    for shift in (0.0, 0.6):
      x, y = rng.normal(size=(15, 3)), rng.normal(shift, 1.0, size=(12, 3))
      padded_x = np.concatenate([x, np.zeros((5, 3))]).astype(np.float32)
      x_weights = np.concatenate([np.ones(15), np.zeros(5)]).astype(np.float32)
      mmd, p = drift_statistics.mmd_permutation_test(
          tf.constant(padded_x), tf.constant(x_weights), tf.constant(y, tf.float32), tf.ones([12]),
          tf.constant([1, 2]), 1999)
      gamma_k = float(drift_statistics.median_heuristic_gamma(tf.constant(np.concatenate([x, y]), tf.float32)))
      pooled = np.concatenate([x, y])  # scipy permutes 1-D samples: they are the rows' indices.
      statistic = lambda a, b: _numpy_mmd(pooled[a.astype(int)], pooled[b.astype(int)], gamma_k)
      reference = stats.permutation_test((np.arange(15), np.arange(15, 27)), statistic, n_resamples=1999,
                                         alternative='greater', vectorized=False, random_state=0)
      self.assertAllClose(mmd, reference.statistic, rtol=1e-4)
      self.assertLess(abs(float(p) - reference.pvalue), 0.03)  # Two Monte Carlo p-values of 1,999 splits each.

  def test_jsd_test_matches_scipy(self):
    rng = np.random.default_rng(6)
    for weights in ([0.25] * 4, [0.55, 0.15, 0.15, 0.15]):
      current, reference = rng.choice(4, 40, p=weights), rng.choice(4, 50)
      counts = [np.bincount(labels, minlength=4).astype(np.float32) for labels in (current, reference)]
      jsd, p = drift_statistics.jsd_permutation_test(tf.constant(counts[0]), tf.constant(counts[1]),
                                                      tf.constant([3, 4]), 1999)
      histogram = lambda labels: np.bincount(labels, minlength=4) / len(labels)
      statistic = lambda a, b: float(drift_statistics.jensen_shannon(tf.constant(histogram(a), tf.float32),
                                                                     tf.constant(histogram(b), tf.float32)))
      expected = stats.permutation_test((current, reference), statistic, n_resamples=1999, alternative='greater',
                                        vectorized=False, random_state=0)
      self.assertAllClose(jsd, expected.statistic, rtol=1e-5)
      self.assertLess(abs(float(p) - expected.pvalue), 0.03)

  def test_randomized_p_value_is_uniform_with_ties(self):
    # The observed statistic tied with all 9 permuted ones: p = U, uniform on (0, 1).
    values = [float(drift_statistics.permutation_p_value(tf.constant(1.0), tf.ones([9]), tf.constant([i, 0])))
              for i in range(400)]
    self.assertGreater(stats.kstest(values, 'uniform').pvalue, 0.01)
    # No ties: the observed statistic above all B permuted ones gives U / (B + 1).
    self.assertLess(float(drift_statistics.permutation_p_value(tf.constant(5.0), tf.zeros([99]),
                                                               tf.constant([0, 1]))), 0.01 + 1e-6)


def _numpy_mmd(x: np.ndarray, y: np.ndarray, gamma_k: float) -> float:
  """The V-statistic MMD^2 of Eq. 1 in numpy."""
  kernel = lambda a, b: np.exp(-gamma_k * ((a[:, None] - b[None]) ** 2).sum(-1))
  return kernel(x, x).mean() + kernel(y, y).mean() - 2 * kernel(x, y).mean()


if __name__ == '__main__':
  tf.test.main()
