"""Checks seed 003's shift statistics against numpy references written from Eq. 1, scipy's Jensen-Shannon distance
and the detection rule's false-positive rate on windows without a shift."""

import numpy as np
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

  def test_label_histogram(self):
    self.assertAllClose(drift_statistics.label_histogram(tf.constant([0, 2, 2, 3]), 5), [0.25, 0, 0.5, 0.25, 0])


class DetectionRuleTest(tf.test.TestCase):
  """Calibrate delta on split halves of shift-free windows, then test fresh windows with and without a shift."""

  def _window(self, rng, shift):
    return tf.constant(rng.normal(shift, 1.0, size=(40, 4)), tf.float32)

  def test_false_positive_rate_near_alpha_and_shift_detected(self):
    rng = np.random.default_rng(5)
    alpha, gamma_k = 0.1, 0.25
    null = []
    for trial in range(300):
      first, second = drift_statistics.split_weights(tf.ones([80]), tf.constant([trial, 0]))
      window = tf.constant(rng.normal(size=(80, 4)), tf.float32)
      null.append(drift_statistics.mmd_squared(window, window, gamma_k, first, second).numpy())
    delta = drift_statistics.null_threshold(tf.constant(null), tf.constant(len(null)), alpha).numpy()
    stable = [drift_statistics.mmd_squared(self._window(rng, 0.0), self._window(rng, 0.0), gamma_k).numpy()
              for _ in range(300)]
    shifted = [drift_statistics.mmd_squared(self._window(rng, 0.0), self._window(rng, 1.0), gamma_k).numpy()
               for _ in range(100)]
    false_positives = np.mean(np.array(stable) > delta)
    # Binomial(300, 0.1): standard deviation 0.017.
    self.assertBetween(false_positives, alpha - 0.06, alpha + 0.06)
    self.assertGreater(np.mean(np.array(shifted) > delta), 0.95)

  def test_split_weights_halves_valid_rows(self):
    weights = tf.constant([1, 1, 0, 1, 1, 1, 0, 1], tf.float32)
    first, second = drift_statistics.split_weights(weights, tf.constant([3, 4]))
    self.assertAllEqual(first + second, weights)
    self.assertEqual(float(tf.reduce_sum(first)), 3.0)
    self.assertAllEqual(first * second, tf.zeros([8]))

  def test_null_threshold_quantile(self):
    values = tf.constant([5.0, 1.0, 4.0, 2.0, 3.0, 99.0])
    self.assertEqual(float(drift_statistics.null_threshold(values, tf.constant(5), 0.2)), 4.0)
    self.assertEqual(float(drift_statistics.null_threshold(values, tf.constant(0), 0.2)), np.inf)


if __name__ == '__main__':
  tf.test.main()
