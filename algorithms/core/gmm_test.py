"""Tests the GMM quantities of FedTEM against independent numpy/scipy computations (Eq. 5, 6, 9, 22)."""

import numpy as np
from scipy import special
from scipy import stats
import tensorflow as tf

from algorithms.core import gmm


def _problem(seed=0, n=50, k=2, d=8):
  rng = np.random.default_rng(seed)
  features = rng.normal(size=(n, d)).astype(np.float32)
  means = rng.normal(size=(k, d)).astype(np.float32)
  variances = rng.uniform(0.5, 2.0, size=(k, d)).astype(np.float32)
  weights = rng.dirichlet(np.ones(k)).astype(np.float32)
  return features, means, variances, weights


def _densities(features, means, variances):
  """N(f | mu_k, diag sigma_k^2) with scipy, [N, K]."""
  return np.stack([stats.multivariate_normal(m, np.diag(v)).pdf(features) for m, v in zip(means, variances)],
                  axis=1)


class GmmTest(tf.test.TestCase):

  def test_log_gaussians(self):
    features, means, variances, _ = _problem()
    self.assertAllClose(gmm.log_gaussians(features, means, variances),
                        np.log(_densities(features, means, variances)), rtol=1e-4, atol=1e-4)

  def test_responsibilities_and_client_mle(self):
    features, means, variances, weights = _problem(k=3)
    joint = weights * _densities(features, means, variances)
    gammas = joint / joint.sum(axis=1, keepdims=True)  # Eq. 6.
    log_gammas = gmm.log_responsibilities(gmm.log_gaussians(features, means, variances), np.log(weights))
    self.assertAllClose(np.exp(log_gammas), gammas, atol=1e-5)
    self.assertAllClose(np.exp(gmm.log_client_mle(log_gammas)), gammas.mean(axis=0), atol=1e-5)  # Eq. 5.

  def test_client_posterior(self):
    features, means, variances, weights = _problem(n=5)
    # Eq. 22 by the product of densities (small N keeps it representable).
    joint = weights * np.prod(_densities(features, means, variances), axis=0)
    posterior = gmm.log_client_posterior(gmm.log_gaussians(features, means, variances), np.log(weights))
    self.assertAllClose(np.exp(posterior), joint / joint.sum(), atol=1e-5)

  def test_stays_finite_in_high_dimension(self):
    # 670-d features far from the means: densities underflow in float64, log-space values must not.
    features, means, variances, weights = _problem(n=20, d=670)
    log_gammas = gmm.log_responsibilities(gmm.log_gaussians(features * 30, means, variances), np.log(weights))
    log_mle = gmm.log_client_mle(log_gammas)
    self.assertTrue(np.all(np.isfinite(log_gammas)))
    self.assertAllClose(special.logsumexp(log_mle), 0.0, atol=1e-4)

  def test_feature_moments(self):
    features = np.random.default_rng(1).normal(3.0, 2.0, size=(40, 5)).astype(np.float32)
    moments = gmm.feature_moments(features)
    self.assertEqual(moments.count, 40)
    self.assertAllClose(moments.feature_sum / 40, features.mean(axis=0), atol=1e-5)  # Eq. 9 mean.
    self.assertAllClose(moments.squared_deviation_sum / 40, features.var(axis=0), atol=1e-4)  # Eq. 9 variance.


if __name__ == '__main__':
  tf.test.main()
