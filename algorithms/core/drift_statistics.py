"""Two-sample statistics that detect covariate and label shift between a party's windows, for ShiftEx (Bhope,
Jayaram, Venkateswaran and Venkatasubramanian, "Shift Happens: Mixture of Experts based Continual Adaptation in
Federated Learning", 2025).

Its Algorithm 1: a party compares its current window with the previous one by the MMD of their embeddings
(covariate shift) and the JSD of their label histograms (label shift):

  Eq. 1   MMD^2(P, Q) = E_{x,x'~P} k(x, x') + E_{y,y'~Q} k(y, y') - 2 E_{x~P, y~Q} k(x, y),
          k(x, y) = exp(-gamma_k ||x - y||^2)
  JSD     JSD(P || Q) = 1/2 KL(P || M) + 1/2 KL(Q || M),  M = (P + Q) / 2   (natural log: [0, log 2])

The paper uses gamma both for the kernel and for the minimum cluster size; here the kernel's is `gamma_k`.

Choices (the paper states none of them):
- Samples are weighted: a weight vector w >= 0 per sample (0 for padding rows of a fixed-size buffer), normalized
  inside. `mmd_squared` estimates Eq. 1 by the V-statistic (`unbiased=False`: every pair, the diagonal included,
  which is >= 0) or the U-statistic (`unbiased=True`: pairs i != i' within each sample, unbiased for MMD^2 and
  negative around 0 when P = Q). The detector thresholds the same statistic it was calibrated on, so comparing
  MMD^2 rather than MMD only rescales delta_cov.
- `median_heuristic_gamma`: gamma_k = 1 / median of the pairwise squared distances, the usual choice when the
  kernel's bandwidth is not given.
- Thresholds: "p-value estimation from bootstrapped client feature representations assuming no shift" (the
  paper's words) read as permutation tests (`mmd_permutation_test`, `jsd_permutation_test`): a party's two windows
  pooled and split at random, the observed statistic's randomized p-value among the splits'.
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


def label_counts(labels: tf.Tensor, num_classes: int) -> tf.Tensor:
  """The label counts [num_classes] of integer labels [n] (a window's histogram before normalizing)."""
  return tf.ensure_shape(tf.math.bincount(tf.cast(labels, tf.int32), minlength=num_classes, maxlength=num_classes,
                                          dtype=tf.float32), [num_classes])


def jensen_shannon(p: tf.Tensor, q: tf.Tensor) -> tf.Tensor:
  """JSD(p || q) in nats of histograms [..., C] (each summing to 1): [...]."""
  m = (p + q) / 2.0

  def kl(a):
    return tf.reduce_sum(tf.where(a > 0, a * tf.math.log(tf.math.divide_no_nan(a, m)), 0.0), -1)

  return 0.5 * kl(p) + 0.5 * kl(q)


def permutation_p_value(observed: tf.Tensor, permuted: tf.Tensor, seed: tf.Tensor) -> tf.Tensor:
  """The randomized permutation p-value of `observed` against `permuted` [B] (statistics of B random relabellings):
  p = (#{permuted > observed} + U (1 + #{permuted == observed})) / (B + 1), U ~ Uniform(0, 1) from `seed`. Under
  exchangeability (no shift) the observed statistic is one of B + 1 exchangeable values, so P(p <= alpha) = alpha
  exactly, ties included (Hemerik and Goeman, "Exact testing with random permutations", 2018)."""
  greater = tf.reduce_sum(tf.cast(permuted > observed, tf.float32))
  ties = tf.reduce_sum(tf.cast(tf.equal(permuted, observed), tf.float32))
  u = tf.random.stateless_uniform([], seed)
  return (greater + u * (1.0 + ties)) / (tf.cast(tf.size(permuted), tf.float32) + 1.0)


def _random_split(valid: tf.Tensor, first_size: tf.Tensor, permutations: int, seed: tf.Tensor) -> tf.Tensor:
  """Memberships [B, n] (1.0: the first group) of B random splits of the rows with `valid` [n] into a group of
  `first_size` and the rest (invalid rows in neither)."""
  keys = tf.where(valid[tf.newaxis], tf.random.stateless_uniform([permutations, tf.size(valid)], seed), 2.0)
  rank = tf.argsort(tf.argsort(keys, axis=1), axis=1)
  return tf.cast((rank < tf.cast(first_size, tf.int32)) & valid[tf.newaxis], tf.float32)


def mmd_permutation_test(x: tf.Tensor, x_weights: tf.Tensor, y: tf.Tensor, y_weights: tf.Tensor, seed: tf.Tensor,
                         permutations: int, unbiased: bool = False) -> tuple[tf.Tensor, tf.Tensor]:
  """(MMD^2 of x [n, D] and y [m, D], its permutation p-value): rows of weight 0 are padding, the others weigh 1;
  gamma_k by the median heuristic of the pooled rows, fixed across permutations (it does not depend on the split).
  Each of the B = `permutations` relabellings splits the pooled rows at random into groups of the two samples'
  sizes; MMD^2 of a split u, v (normalized memberships) is u'Ku + v'Kv - 2u'Kv (V-statistic) or with the diagonal
  left out of the first two (U-statistic), as `mmd_squared`."""
  z = tf.concat([x, y], 0)
  valid = tf.concat([x_weights, y_weights], 0) > 0
  kernel = rbf_kernel(z, z, median_heuristic_gamma(z, tf.cast(valid, tf.float32)))
  observed = tf.concat([tf.cast(x_weights > 0, tf.float32), tf.zeros(tf.shape(y_weights))], 0)
  memberships = tf.concat([observed[tf.newaxis], _random_split(
      valid, tf.reduce_sum(observed), permutations, seed)], 0)  # [B + 1, n + m], the observed split first.
  first = memberships
  second = tf.cast(valid, tf.float32)[tf.newaxis] - memberships

  def mean(u, v, exclude_diagonal):
    total = tf.einsum('bi,ij,bj->b', u, kernel, v)
    pairs = tf.reduce_sum(u, 1) * tf.reduce_sum(v, 1)
    if exclude_diagonal:  # Memberships are 0/1 and u = v: the diagonal is sum_i u_i K_ii = sum_i u_i.
      total, pairs = total - tf.reduce_sum(u, 1), pairs - tf.reduce_sum(u, 1)
    return tf.math.divide_no_nan(total, pairs)

  statistics = mean(first, first, unbiased) + mean(second, second, unbiased) - 2.0 * mean(first, second, False)
  return statistics[0], permutation_p_value(statistics[0], statistics[1:], seed + 1)


def jsd_permutation_test(counts: tf.Tensor, reference_counts: tf.Tensor, seed: tf.Tensor,
                         permutations: int) -> tuple[tf.Tensor, tf.Tensor]:
  """(JSD of the label histograms of counts [C] and reference_counts [C], its permutation p-value): each
  relabelling deals the pooled labels at random into groups of the two windows' sizes."""
  num_classes = tf.shape(counts)[-1]
  pooled = counts + reference_counts
  labels = tf.repeat(tf.range(num_classes), tf.cast(tf.round(pooled), tf.int32))  # [N] pooled labels.
  split = _random_split(tf.ones(tf.shape(labels), tf.bool), tf.reduce_sum(counts), permutations, seed)
  first = tf.matmul(split, tf.one_hot(labels, num_classes))  # [B, C] counts of the first group.
  normalized = lambda c: tf.math.divide_no_nan(c, tf.reduce_sum(c, -1, keepdims=True))
  observed = jensen_shannon(normalized(counts), normalized(reference_counts))
  permuted = jensen_shannon(normalized(first), normalized(pooled[tf.newaxis] - first))
  return observed, permutation_p_value(observed, permuted, seed + 1)
