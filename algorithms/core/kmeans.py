"""k-means with k chosen by the Davies-Bouldin index, in TF for a server computation (ShiftEx's Algorithm 2 line 12).

ShiftEx (Bhope et al., "Shift Happens: Mixture of Experts based Continual Adaptation in Federated Learning", 2025)
clusters the profiles of the parties that shifted, "KMeans(C^shift, P_t^c(X))" with k picked by the Davies-Bouldin
index. The paper gives no initialization, iteration count or range of k.

Choices:
- Points are rows of a fixed-size buffer [m, D] with a mask [m] of the valid ones (the round's reports).
- Initialization: farthest-first traversal from the first valid point (the deterministic variant of k-means++; the
  server's choices stay a function of the reports, so a resumed run repeats them), then `iterations` Lloyd steps; a
  centroid left without members keeps its place.
- k: the k in [2, min(max_k, n - 1)] with the lowest Davies-Bouldin index, for n valid points (a choice: the paper
  names no range); k = 1 when n < 3, where the index is undefined, or when no k reaches an index below `max_index`: the
  index cannot say "one cluster", and a split of one blob scores about 1 or more (its halves' scatter is as large
  as the distance between their centroids), while separated groups score well below 1.
- Davies-Bouldin index (Davies and Bouldin, 1979; scikit-learn's `davies_bouldin_score`): with s_i the mean
  Euclidean distance of cluster i's points to its centroid and d_ij the distance between centroids,
  DB = mean_i max_{j != i} (s_i + s_j) / d_ij, where coinciding centroids (d_ij = 0) contribute 0.
"""

from typing import NamedTuple

import numpy as np
import tensorflow as tf


class Clustering(NamedTuple):
  """labels [m] int32 (-1 for masked points), centroids [max_k, D] (rows >= num_clusters unused),
  num_clusters int32 scalar."""
  labels: tf.Tensor
  centroids: tf.Tensor
  num_clusters: tf.Tensor


def _squared_distances(points: tf.Tensor, centroids: tf.Tensor) -> tf.Tensor:
  return tf.maximum(tf.reduce_sum(points * points, 1)[:, tf.newaxis] + tf.reduce_sum(centroids * centroids, 1)
                    - 2.0 * tf.matmul(points, centroids, transpose_b=True), 0.0)


def farthest_first(points: tf.Tensor, mask: tf.Tensor, k: int) -> tf.Tensor:
  """k initial centroids [k, D]: the first valid point, then repeatedly the valid point farthest from those chosen."""
  first = tf.argmax(tf.cast(mask, tf.int32), output_type=tf.int32)
  chosen = [points[first]]
  nearest = _squared_distances(points, points[first][tf.newaxis])[:, 0]
  for _ in range(k - 1):
    index = tf.argmax(tf.where(mask, nearest, -1.0), output_type=tf.int32)
    chosen.append(points[index])
    nearest = tf.minimum(nearest, _squared_distances(points, points[index][tf.newaxis])[:, 0])
  return tf.stack(chosen)


def lloyd(points: tf.Tensor, mask: tf.Tensor, k: int, iterations: int = 20) -> tuple[tf.Tensor, tf.Tensor]:
  """k-means of the valid `points` [m, D]: (labels [m] int32, -1 where masked; centroids [k, D])."""
  valid = tf.cast(mask, points.dtype)

  def step(centroids):  # One Lloyd step: assign, then move each centroid with members to its members' mean.
    one_hot = tf.one_hot(tf.argmin(_squared_distances(points, centroids), 1), k, dtype=points.dtype) * valid[:, None]
    counts = tf.reduce_sum(one_hot, 0)
    means = tf.math.divide_no_nan(tf.matmul(one_hot, points, transpose_a=True), counts[:, tf.newaxis])
    return (tf.where(counts[:, tf.newaxis] > 0, means, centroids),)

  # A graph loop, not a Python one: the server computation holds one step, not `iterations` copies of it.
  centroids = tf.while_loop(lambda _: True, step, (farthest_first(points, mask, k),),
                            maximum_iterations=iterations)[0]
  labels = tf.argmin(_squared_distances(points, centroids), 1, output_type=tf.int32)
  return tf.where(mask, labels, -1), centroids


def davies_bouldin(points: tf.Tensor, labels: tf.Tensor, k: int) -> tf.Tensor:
  """The Davies-Bouldin index of a labelling (labels [m] in [0, k) or -1 for left-out points), over the clusters
  that have members."""
  one_hot = tf.one_hot(labels, k, dtype=points.dtype)  # -1 -> all zeros.
  counts = tf.reduce_sum(one_hot, 0)
  present = counts > 0
  centroids = tf.math.divide_no_nan(tf.matmul(one_hot, points, transpose_a=True), counts[:, tf.newaxis])
  to_own = tf.sqrt(tf.reduce_sum(one_hot * _squared_distances(points, centroids), 1))
  scatter = tf.math.divide_no_nan(tf.reduce_sum(one_hot * to_own[:, tf.newaxis], 0), counts)
  separation = tf.sqrt(_squared_distances(centroids, centroids))
  ratio = tf.math.divide_no_nan(scatter[:, tf.newaxis] + scatter[tf.newaxis], separation)
  both = present[:, tf.newaxis] & present[tf.newaxis] & ~tf.eye(k, dtype=tf.bool)
  worst = tf.reduce_max(tf.where(both, ratio, 0.0), 1)
  return tf.math.divide_no_nan(tf.reduce_sum(tf.where(present, worst, 0.0)), tf.reduce_sum(tf.cast(present,
                                                                                                points.dtype)))


def cluster(points: tf.Tensor, mask: tf.Tensor, max_k: int, iterations: int = 20,
            max_index: float = np.inf) -> Clustering:
  """k-means of the valid `points` with k in [2, min(max_k, n - 1)] by the lowest Davies-Bouldin index (k = 1 when
  fewer than 3 points are valid or no k has an index below `max_index`)."""
  n = tf.reduce_sum(tf.cast(mask, tf.int32))
  labels, centroids = lloyd(points, mask, 1, iterations)
  best = (tf.constant(max_index, points.dtype), labels, tf.pad(centroids, [[0, max_k - 1], [0, 0]]), tf.constant(1))
  for k in range(2, max_k + 1):
    labels, centroids = lloyd(points, mask, k, iterations)
    index = davies_bouldin(points, labels, k)
    better = (k <= n - 1) & (index < best[0])
    candidate = (index, labels, tf.pad(centroids, [[0, max_k - k], [0, 0]]), tf.constant(k))
    best = tuple(tf.where(better, new, old) for new, old in zip(candidate, best))
  return Clustering(best[1], best[2], best[3])
