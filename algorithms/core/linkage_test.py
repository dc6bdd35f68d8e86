"""Checks complete-linkage agglomeration against scipy's hierarchy (linkage + fcluster)."""

import numpy as np
from scipy.cluster import hierarchy
from scipy.spatial import distance as scipy_distance
import tensorflow as tf

from algorithms.core import linkage


def _same_partition(labels_a, labels_b) -> bool:
  """True when the two labelings group the points identically (names aside)."""
  pairs_a = np.equal.outer(labels_a, labels_a)
  pairs_b = np.equal.outer(labels_b, labels_b)
  return bool(np.all(pairs_a == pairs_b))


class CompleteLinkageTest(tf.test.TestCase):

  def _distances(self, rng, n):
    points = rng.normal(size=(n, 3))
    return scipy_distance.squareform(scipy_distance.pdist(points)).astype(np.float32)

  def test_threshold_cut_matches_scipy(self):
    rng = np.random.default_rng(0)
    for trial in range(20):
      n = int(rng.integers(2, 9))
      distance = self._distances(rng, n)
      threshold = float(np.quantile(distance[np.triu_indices(n, 1)], rng.uniform(0.1, 0.9)))
      expected = hierarchy.fcluster(hierarchy.linkage(scipy_distance.squareform(distance, checks=False), 'complete'),
                                    t=threshold, criterion='distance')
      labels = linkage.complete_linkage(tf.constant(distance), tf.ones([n], tf.bool), max_distance=threshold)
      self.assertTrue(_same_partition(labels.numpy(), expected), msg=f'trial {trial}')

  def test_group_count_cut_matches_scipy(self):
    rng = np.random.default_rng(1)
    for groups in (1, 2, 3):
      distance = self._distances(rng, 7)
      expected = hierarchy.fcluster(hierarchy.linkage(scipy_distance.squareform(distance, checks=False), 'complete'),
                                    t=groups, criterion='maxclust')
      labels = linkage.complete_linkage(tf.constant(distance), tf.ones([7], tf.bool), min_groups=groups)
      self.assertTrue(_same_partition(labels.numpy(), expected))
      self.assertLen(set(labels.numpy()), groups)

  def test_non_members_are_left_out_and_groups_are_named_by_their_lowest_member(self):
    rng = np.random.default_rng(2)
    distance = self._distances(rng, 6)
    members = np.array([True, False, True, True, False, True])
    labels = linkage.complete_linkage(tf.constant(distance), tf.constant(members), min_groups=2).numpy()
    self.assertAllEqual(labels[~members], [-1, -1])
    kept = np.flatnonzero(members)
    expected = hierarchy.fcluster(hierarchy.linkage(scipy_distance.squareform(distance[np.ix_(kept, kept)],
                                                                              checks=False), 'complete'),
                                  t=2, criterion='maxclust')
    self.assertTrue(_same_partition(labels[kept], expected))
    for group in set(labels[kept]):
      self.assertEqual(group, kept[labels[kept] == group].min())

  def test_nothing_merges_below_the_closest_pair(self):
    distance = np.array([[0, 2, 3], [2, 0, 4], [3, 4, 0]], np.float32)
    labels = linkage.complete_linkage(tf.constant(distance), tf.ones([3], tf.bool), max_distance=1.5)
    self.assertAllEqual(labels, [0, 1, 2])
    labels = linkage.complete_linkage(tf.constant(distance), tf.ones([3], tf.bool), max_distance=3.5)
    self.assertAllEqual(labels, [0, 0, 2])  # {0, 1} at 2; then {0, 1} to 2 is max(3, 4) = 4 > 3.5.


if __name__ == '__main__':
  tf.test.main()
