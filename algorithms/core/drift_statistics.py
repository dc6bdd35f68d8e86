"""Two-sample statistics that detect covariate and label shift between a party's windows (seed 003, ShiftEx).

Seed `003_09263288c1c036a1` (digest section 2.2), Algorithm 1: a party compares its current window with the previous
one by the MMD of their embeddings (covariate shift) and the JSD of their label histograms (label shift):

  Eq. 1   MMD^2(P, Q) = E_{x,x'~P} k(x, x') + E_{y,y'~Q} k(y, y') - 2 E_{x~P, y~Q} k(x, y),
          k(x, y) = exp(-gamma_k ||x - y||^2)
  JSD     JSD(P || Q) = 1/2 KL(P || M) + 1/2 KL(Q || M),  M = (P + Q) / 2   (natural log: [0, log 2])

The seed uses gamma both for the kernel and for the minimum cluster size; here the kernel's is `gamma_k`.

Choices (the seed states none of them):
- Samples are weighted: a weight vector w >= 0 per sample (0 for padding rows of a fixed-size buffer), normalized
  inside. `mmd_squared` estimates Eq. 1 by the V-statistic (`unbiased=False`: every pair, the diagonal included,
  which is >= 0) or the U-statistic (`unbiased=True`: pairs i != i' within each sample, unbiased for MMD^2 and
  negative around 0 when P = Q). The detector thresholds the same statistic it was calibrated on, so comparing
  MMD^2 rather than MMD only rescales delta_cov.
- `median_heuristic_gamma`: gamma_k = 1 / median of the pairwise squared distances, the usual choice when the
  kernel's bandwidth is not given.
- `null_threshold`: delta = the (1 - alpha) quantile of statistics computed with no shift (digest section 2.2,
  reconstructed: "p-value estimation from bootstrapped client feature representations assuming no shift").
- `split_weights`: a null sample's two halves: a random split of one window's examples in two.
"""

import tensorflow as tf


def rbf_kernel(a: tf.Tensor, b: tf.Tensor, gamma_k) -> tf.Tensor:
  """k(a_i, b_j) = exp(-gamma_k ||a_i - b_j||^2) (Eq. 1): a [n, D], b [m, D] -> [n, m]."""
  squared = (tf.reduce_sum(a * a, 1)[:, tf.newaxis] + tf.reduce_sum(b * b, 1)[tf.newaxis]
             - 2.0 * tf.matmul(a, b, transpose_b=True))
  return tf.exp(-tf.cast(gamma_k, a.dtype) * tf.maximum(squared, 0.0))


def _mean_kernel(kernel: tf.Tensor, u: tf.Tensor, v: tf.Tensor, exclude_diagonal: bool) -> tf.Tensor:
  """sum_ij u_i v_j K_ij / sum_ij u_i v_j, over i != j when `exclude_diagonal` (0 when no pair has weight)."""
  pair = u[:, tf.newaxis] * v[tf.newaxis]
  if exclude_diagonal:
    pair = tf.linalg.set_diag(pair, tf.zeros_like(u))
  return tf.math.divide_no_nan(tf.reduce_sum(pair * kernel), tf.reduce_sum(pair))


def mmd_squared(x: tf.Tensor, y: tf.Tensor, gamma_k, x_weights=None, y_weights=None,
                unbiased: bool = False) -> tf.Tensor:
  """MMD^2 of Eq. 1 between samples x [n, D] and y [m, D] with the RBF kernel, as a scalar.

  `x_weights` [n] / `y_weights` [m] (default: all 1) weigh the samples; zero weights drop padding rows. The
  V-statistic by default, the U-statistic with `unbiased`.
  """
  u = tf.ones(tf.shape(x)[:1], x.dtype) if x_weights is None else tf.cast(x_weights, x.dtype)
  v = tf.ones(tf.shape(y)[:1], y.dtype) if y_weights is None else tf.cast(y_weights, y.dtype)
  return (_mean_kernel(rbf_kernel(x, x, gamma_k), u, u, unbiased)
          + _mean_kernel(rbf_kernel(y, y, gamma_k), v, v, unbiased)
          - 2.0 * _mean_kernel(rbf_kernel(x, y, gamma_k), u, v, False))


def median_heuristic_gamma(x: tf.Tensor, weights=None) -> tf.Tensor:
  """gamma_k = 1 / median over pairs i < j of ||x_i - x_j||^2 (rows with weight 0 left out; 1 if no pair)."""
  w = tf.ones(tf.shape(x)[:1], tf.bool) if weights is None else tf.cast(weights, tf.float32) > 0
  squared = (tf.reduce_sum(x * x, 1)[:, tf.newaxis] + tf.reduce_sum(x * x, 1)[tf.newaxis]
             - 2.0 * tf.matmul(x, x, transpose_b=True))
  n = tf.shape(x)[0]
  upper = tf.range(n)[:, tf.newaxis] < tf.range(n)[tf.newaxis]
  pairs = tf.boolean_mask(tf.maximum(squared, 0.0), upper & w[:, tf.newaxis] & w[tf.newaxis])
  ordered = tf.sort(pairs)
  count = tf.size(ordered)
  median = tf.cond(count > 0, lambda: (ordered[(count - 1) // 2] + ordered[count // 2]) / 2.0,
                   lambda: tf.constant(1.0, x.dtype))
  return 1.0 / tf.maximum(median, 1e-12)


def label_histogram(labels: tf.Tensor, num_classes: int) -> tf.Tensor:
  """The normalized label histogram y_hat [num_classes] of integer labels [n] (digest section 2.1)."""
  counts = tf.math.bincount(tf.cast(labels, tf.int32), minlength=num_classes, maxlength=num_classes,
                            dtype=tf.float32)
  return tf.ensure_shape(tf.math.divide_no_nan(counts, tf.reduce_sum(counts)), [num_classes])


def jensen_shannon(p: tf.Tensor, q: tf.Tensor) -> tf.Tensor:
  """JSD(p || q) in nats of histograms [..., C] (each summing to 1): [...]."""
  m = (p + q) / 2.0

  def kl(a):
    return tf.reduce_sum(tf.where(a > 0, a * tf.math.log(tf.math.divide_no_nan(a, m)), 0.0), -1)

  return 0.5 * kl(p) + 0.5 * kl(q)


def split_weights(weights: tf.Tensor, seed: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
  """Two disjoint halves of the rows with weight > 0, at random (`seed`: int [2] of a stateless draw): the halves'
  weight vectors [n], each row's weight kept in one of them."""
  order = tf.argsort(tf.random.stateless_uniform(tf.shape(weights), seed))
  rank = tf.scatter_nd(order[:, tf.newaxis], tf.range(tf.size(weights)), tf.shape(weights))
  valid = tf.cast(weights, tf.float32) > 0
  # Rank among the valid rows: valid rows first in the random order.
  valid_rank = tf.gather(tf.cumsum(tf.cast(tf.gather(valid, order), tf.int32)) - 1, rank)
  first = valid & tf.equal(valid_rank % 2, 0)  # tf.equal: `==` on tensors is not elementwise in TFF's graphs.
  second = valid & tf.equal(valid_rank % 2, 1)
  weights = tf.cast(weights, tf.float32)
  return tf.where(first, weights, 0.0), tf.where(second, weights, 0.0)


def null_threshold(null_values: tf.Tensor, count: tf.Tensor, alpha: float) -> tf.Tensor:
  """delta = the (1 - alpha) quantile (the order statistic ceil((1 - alpha) n)) of the first `count` entries of
  `null_values` [B]; +inf when count is 0 (no detection before calibration)."""
  n = tf.minimum(tf.cast(count, tf.int32), tf.size(null_values))
  ordered = tf.sort(null_values[:n])
  index = tf.cast(tf.math.ceil((1.0 - alpha) * tf.cast(n, tf.float32)), tf.int32) - 1
  return tf.cond(n > 0, lambda: ordered[tf.clip_by_value(index, 0, n - 1)],
                 lambda: tf.constant(float('inf'), null_values.dtype))
