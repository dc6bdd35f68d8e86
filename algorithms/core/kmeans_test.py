"""Checks the server's k-means and Davies-Bouldin choice of k against scikit-learn."""

import numpy as np
from sklearn import cluster as sklearn_cluster
from sklearn import metrics
import tensorflow as tf

from algorithms.core import kmeans


def _blobs(rng, centers, per_blob, scale=0.3):
  points = np.concatenate([rng.normal(c, scale, size=(per_blob, len(c))) for c in centers])
  return points.astype(np.float32), np.repeat(np.arange(len(centers)), per_blob)


class DaviesBouldinTest(tf.test.TestCase):

  def test_matches_scikit_learn(self):
    rng = np.random.default_rng(0)
    for _ in range(10):
      points = rng.normal(size=(15, 3)).astype(np.float32)
      labels = rng.integers(0, 4, size=15)
      labels[:4] = np.arange(4)
      self.assertAllClose(kmeans.davies_bouldin(tf.constant(points), tf.constant(labels, tf.int32), 4),
                          metrics.davies_bouldin_score(points, labels), rtol=1e-4)

  def test_left_out_points_and_empty_clusters_are_ignored(self):
    rng = np.random.default_rng(1)
    points = rng.normal(size=(10, 2)).astype(np.float32)
    labels = np.array([0, 0, 2, 2, 2, 0, -1, 2, -1, 0])
    kept = labels >= 0
    self.assertAllClose(kmeans.davies_bouldin(tf.constant(points), tf.constant(labels, tf.int32), 4),
                        metrics.davies_bouldin_score(points[kept], labels[kept]), rtol=1e-4)


class ClusterTest(tf.test.TestCase):

  def test_lloyd_agrees_with_scikit_learn_on_separated_blobs(self):
    rng = np.random.default_rng(2)
    points, truth = _blobs(rng, [[0, 0], [4, 0], [0, 4]], 8)
    labels, _ = kmeans.lloyd(tf.constant(points), tf.ones([24], tf.bool), 3)
    reference = sklearn_cluster.KMeans(3, n_init=10, random_state=0).fit_predict(points)
    self.assertEqual(metrics.adjusted_rand_score(reference, labels.numpy()), 1.0)
    self.assertEqual(metrics.adjusted_rand_score(truth, labels.numpy()), 1.0)

  def test_davies_bouldin_picks_the_number_of_blobs(self):
    rng = np.random.default_rng(3)
    for count in (2, 3, 4):
      points, truth = _blobs(rng, rng.uniform(-8, 8, size=(count, 5)), 6)
      mask = np.ones(len(points), bool)
      padded = np.concatenate([points, np.full((5, 5), 1e3, np.float32)])  # Masked rows far away.
      result = kmeans.cluster(tf.constant(padded), tf.constant(np.concatenate([mask, np.zeros(5, bool)])), 6)
      self.assertEqual(int(result.num_clusters), count)
      self.assertEqual(metrics.adjusted_rand_score(truth, result.labels.numpy()[:len(points)]), 1.0)
      self.assertAllEqual(result.labels.numpy()[len(points):], [-1] * 5)

  def test_one_blob_stays_one_cluster_under_an_index_bound(self):
    rng = np.random.default_rng(4)
    for _ in range(5):
      points = rng.normal(size=(20, 4)).astype(np.float32)
      unbounded = kmeans.cluster(tf.constant(points), tf.ones([20], tf.bool), 4)
      bounded = kmeans.cluster(tf.constant(points), tf.ones([20], tf.bool), 4, max_index=1.0)
      self.assertGreaterEqual(int(unbounded.num_clusters), 2)
      self.assertEqual(int(bounded.num_clusters), 1)
      self.assertAllEqual(bounded.labels, np.zeros(20))
    points, truth = _blobs(rng, [[0, 0, 0, 0], [6, 0, 0, 0]], 10)
    bounded = kmeans.cluster(tf.constant(points), tf.ones([20], tf.bool), 4, max_index=1.0)
    self.assertEqual(metrics.adjusted_rand_score(truth, bounded.labels.numpy()), 1.0)

  def test_one_cluster_below_three_points(self):
    points = tf.constant([[0.0, 0.0], [5.0, 5.0], [9.0, 9.0]])
    result = kmeans.cluster(points, tf.constant([True, True, False]), 4)
    self.assertEqual(int(result.num_clusters), 1)
    self.assertAllEqual(result.labels, [0, 0, -1])
    self.assertAllClose(result.centroids[0], [2.5, 2.5])


if __name__ == '__main__':
  tf.test.main()
