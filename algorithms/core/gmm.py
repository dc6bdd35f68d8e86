"""Diagonal Gaussian mixture in feature space: the clustering model of FedTEM (Section 3.1, Appendix A.1-A.2).

All quantities are computed in log space, so they stay finite for 128- to 670-dimensional features where the
densities themselves underflow. Shapes: features f [N, D]; means mu [K, D]; variances sigma^2 [K, D]; log mixture
weights log pi [K].

- `log_gaussians`:          log N(f | mu_k, sigma_k) for every sample and component, [N, K].
- `log_responsibilities`:   log gamma_k(x) = log P(z = k | x), [N, K]                               (Eq. 6)
- `log_client_mle`:         log pi*_ik = log( (1 / |D_i|) sum_x gamma_k(x) ), [K]                     (Eq. 5, Eq. 21)
- `log_client_posterior`:   log P(zeta_i = k | D_i) with IID samples, [K]                             (Eq. 22)
- `FeatureMoments`:         n_i, sum_x f and sum_x (f - mean_i)^2, from which the client's optimal mean and
                            variance are mean_i = sum f / n_i and sigma_i^2 = sum (f - mean_i)^2 / n_i   (Eq. 9, Eq. 24)
"""

import math
from typing import NamedTuple

import tensorflow as tf


def log_gaussians(features: tf.Tensor, means: tf.Tensor, variances: tf.Tensor) -> tf.Tensor:
  """log N(f_n | mu_k, diag(sigma_k^2)) as [N, K]."""
  features = tf.cast(features, tf.float32)[:, tf.newaxis, :]  # [N, 1, D]
  squared = tf.square(features - means[tf.newaxis]) / variances[tf.newaxis]  # [N, K, D]
  dimension = tf.cast(tf.shape(means)[-1], tf.float32)
  log_determinant = tf.reduce_sum(tf.math.log(variances), axis=-1)  # [K]
  return -0.5 * (tf.reduce_sum(squared, axis=-1) + log_determinant + dimension * math.log(2.0 * math.pi))


def log_responsibilities(log_densities: tf.Tensor, log_weights: tf.Tensor) -> tf.Tensor:
  """log gamma_k(x) = log pi_k + log N_k(x) - log sum_j pi_j N_j(x) (Eq. 6); [N, K] from [N, K] and [K]."""
  joint = log_densities + log_weights[tf.newaxis]
  return joint - tf.reduce_logsumexp(joint, axis=-1, keepdims=True)


def log_client_mle(log_gammas: tf.Tensor) -> tf.Tensor:
  """log pi*_k = logsumexp_x log gamma_k(x) - log |D| (Eq. 5); [K] from [N, K]."""
  count = tf.cast(tf.shape(log_gammas)[0], tf.float32)
  return tf.reduce_logsumexp(log_gammas, axis=0) - tf.math.log(count)


def log_client_posterior(log_densities: tf.Tensor, log_weights: tf.Tensor) -> tf.Tensor:
  """log P(zeta = k | D) = log pi_k + sum_x log N_k(x), normalized over k (Eq. 22); [K] from [N, K] and [K]."""
  joint = log_weights + tf.reduce_sum(log_densities, axis=0)
  return joint - tf.reduce_logsumexp(joint)


class FeatureMoments(NamedTuple):
  """Sufficient statistics of one client's features: count n, sum f [D], sum (f - mean)^2 [D]."""
  count: tf.Tensor
  feature_sum: tf.Tensor
  squared_deviation_sum: tf.Tensor


def feature_moments(features: tf.Tensor) -> FeatureMoments:
  """The statistics of Eq. 9 / Eq. 24 for features [N, D] (two-pass, numerically stable)."""
  features = tf.cast(features, tf.float32)
  count = tf.cast(tf.shape(features)[0], tf.float32)
  feature_sum = tf.reduce_sum(features, axis=0)
  mean = feature_sum / tf.maximum(count, 1.0)
  return FeatureMoments(count, feature_sum, tf.reduce_sum(tf.square(features - mean), axis=0))
