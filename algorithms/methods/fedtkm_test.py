"""Tests FedTKM's pieces against numpy: Eq. 11 distances and cluster rules, Eq. 12 centers, Eq. 13 and Eq. 27."""

import numpy as np
import tensorflow as tf

from algorithms.methods import fedtkm


def _numpy_distances(features, centers, scales):
  """alpha_k ||f - c_k|| by loops (the summand of Eq. 11)."""
  return np.array([[scales[k] * np.sqrt(np.sum((f - centers[k])**2)) for k in range(len(centers))]
                   for f in features])


class FedTkmTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    rng = np.random.default_rng(0)
    self.features = rng.normal(size=(13, 5)).astype(np.float32)
    self.centers = rng.normal(size=(3, 5)).astype(np.float32)
    self.scales = np.array([1.0, 1.7, 0.6], np.float32)

  def test_scaled_distances_are_eq_11_summands(self):
    self.assertAllClose(fedtkm.scaled_distances(self.features, self.centers, self.scales),
                        _numpy_distances(self.features, self.centers, self.scales), atol=1e-5)

  def test_client_cluster_rules(self):
    distances = _numpy_distances(self.features, self.centers, self.scales)
    self.assertEqual(fedtkm.client_cluster(distances, 'mean_distance'), np.argmin(distances.mean(0)))  # Eq. 11
    votes = np.bincount(distances.argmin(1), minlength=3)
    self.assertEqual(fedtkm.client_cluster(distances, 'majority_vote'), np.argmax(votes))
    # A case where the two rules disagree: most examples are slightly nearer to 0, one is far from 0.
    distances = np.array([[1.0, 1.1], [1.0, 1.1], [9.0, 1.0]], np.float32)
    self.assertEqual(fedtkm.client_cluster(distances, 'mean_distance'), 1)
    self.assertEqual(fedtkm.client_cluster(distances, 'majority_vote'), 0)

  def test_centers_are_eq_12_and_an_empty_cluster_keeps_its_center(self):
    rng = np.random.default_rng(1)
    sizes = np.array([5.0, 9.0, 3.0, 7.0])
    means = rng.normal(size=(4, 5))
    clusters = np.array([0, 2, 0, 2])  # Cluster 1 gets no client.
    r = np.eye(3)[clusters]
    sums = np.einsum('ik,i,id->kd', r, sizes, means).astype(np.float32)
    counts = (r * sizes[:, None]).sum(0).astype(np.float32)
    old_mass = np.array([4.0, 2.0, 30.0], np.float32)
    result, mass = fedtkm.updated_centers(self.centers, old_mass, sums, counts, center_decay=0.0)
    decayed, decayed_mass = fedtkm.updated_centers(self.centers, old_mass, sums, counts, center_decay=0.5)
    for k, members in ((0, [0, 2]), (2, [1, 3])):
      total = sizes[members].sum()
      expected = np.sum([sizes[i] * means[i] for i in members], 0) / total
      self.assertAllClose(result[k], expected, atol=1e-5)  # Eq. 12
      # Online k-means: weights b A_k for the old center and M_k for the estimate.
      self.assertAllClose(decayed[k], (0.5 * old_mass[k] * self.centers[k] + total * expected)
                          / (0.5 * old_mass[k] + total), atol=1e-5)
    self.assertAllClose(mass, counts)
    self.assertAllClose(decayed_mass, 0.5 * old_mass + counts)
    self.assertAllClose(result[1], self.centers[1])
    self.assertAllClose(decayed[1], self.centers[1])

  def test_step_size_is_eq_27(self):
    for prior in (0.0, 0.2, 0.5, 0.9, 1.0):
      self.assertAllClose(fedtkm.step_size(tf.constant(prior), 0.3, 'prior_weighted'), 2 * abs(0.5 - prior) * 0.3)
      self.assertAllClose(fedtkm.step_size(tf.constant(prior), 0.3, 'constant'), 0.3)

  def test_scale_update_is_eq_13_and_moves_toward_the_prior(self):
    scales = np.array([1.0, 1.5], np.float32)
    prior, eta = 0.7, 0.4
    for q_bar in (0.2, 0.7, 0.95):
      updated = fedtkm.updated_scales(scales, tf.constant(prior), tf.constant(q_bar), tf.constant(eta)).numpy()
      self.assertAllClose(updated, [1.0, 1.5 * np.exp(eta * (prior - q_bar))])
    leaky = fedtkm.updated_scales(scales, tf.constant(prior), tf.constant(0.2), tf.constant(eta), leak=0.25).numpy()
    self.assertAllClose(leaky, [1.0, np.exp(0.75 * np.log(1.5) + eta * (prior - 0.2))])
    # Too few clients in cluster 1: alpha_2 grows, so distances to c_2 grow and cluster 1 gains clients.
    grown = fedtkm.updated_scales(scales, tf.constant(0.8), tf.constant(0.3), tf.constant(eta)).numpy()
    self.assertGreater(grown[1], 1.5)
    shrunk = fedtkm.updated_scales(scales, tf.constant(0.2), tf.constant(0.6), tf.constant(eta)).numpy()
    self.assertLess(shrunk[1], 1.5)
    # From alpha = 1, an example equidistant from both centers goes to cluster 1 after an increase, to 2 after a
    # decrease.
    grown = fedtkm.updated_scales(np.ones(2, np.float32), tf.constant(0.8), tf.constant(0.3), tf.constant(eta))
    shrunk = fedtkm.updated_scales(np.ones(2, np.float32), tf.constant(0.2), tf.constant(0.6), tf.constant(eta))
    centers = np.array([[0.0, 0.0], [2.0, 0.0]], np.float32)
    example = np.array([[1.0, 0.5]], np.float32)
    self.assertEqual(fedtkm.client_cluster(fedtkm.scaled_distances(example, centers, grown), 'mean_distance'), 0)
    self.assertEqual(fedtkm.client_cluster(fedtkm.scaled_distances(example, centers, shrunk), 'mean_distance'), 1)

  def test_evaluation_routes_batches_and_samples(self):
    centers = np.array([[0.0, 0.0], [4.0, 0.0]], np.float32)
    features = np.array([[0.5, 0.0], [0.2, 0.0], [3.0, 0.0]], np.float32)
    logits = np.zeros((3, 2, 4), np.float32)
    logits[:, 0, 1] = 5.0  # Branch 1 predicts class 1, branch 2 class 3.
    logits[:, 1, 3] = 5.0
    batch = {'y': np.array([1, 1, 3]), 'mode': np.array([0, 0, 1])}
    outputs = {'features': features, 'logits': logits}
    clustering = lambda scales: {'centers': centers, 'scales': np.array(scales, np.float32)}
    per_batch = fedtkm.evaluation_objective(2, 2, 'batch', 'learned')(outputs, batch, clustering([1.0, 1.0]))
    self.assertEqual(per_batch.num_correct, 2)  # Mean distances 1.6 vs 2.8: all three go to branch 1.
    self.assertAllEqual(per_batch.routing, [[2, 0], [1, 0]])
    per_sample = fedtkm.evaluation_objective(2, 2, 'sample', 'learned')(outputs, batch, clustering([1.0, 1.0]))
    self.assertEqual(per_sample.num_correct, 3)
    self.assertAllEqual(per_sample.routing, [[2, 0], [0, 1]])
    # A large alpha_2 sends everything to branch 1 unless the evaluation ignores the scales.
    self.assertEqual(fedtkm.evaluation_objective(2, 2, 'sample', 'learned')(outputs, batch, clustering([1.0, 10.0]))
                     .num_correct, 2)
    self.assertEqual(fedtkm.evaluation_objective(2, 2, 'sample', 'none')(outputs, batch, clustering([1.0, 10.0]))
                     .num_correct, 3)
    # Swapped branches (prior_anchored): cluster 1 scores with branch 2, and the routing counts stay clusters.
    swapped = dict(clustering([1.0, 1.0]), branches=np.array([1, 0], np.int32))
    per_sample = fedtkm.evaluation_objective(2, 2, 'sample', 'learned')(outputs, batch, swapped)
    self.assertEqual(per_sample.num_correct, 0)
    self.assertAllEqual(per_sample.routing, [[2, 0], [0, 1]])

  def test_prior_anchored_swap_relabels_the_clusters_and_keeps_every_partition_and_branch(self):
    clustering = fedtkm.initial_clustering(2, 5, seed=1, anchored=True)
    clustering.update(centers=self.centers[:2], scales=np.array([1.0, 1.7], np.float32),
                      mass=np.array([3.0, 5.0], np.float32), branches=np.array([1, 0], np.int32))
    # Period 4: (q~, q-bar) at rounds 5-8; e = sum (2 q~ - 1)(2 q-bar - 1), checked at round 8 only.
    history = [(1.0, 0.0), (0.5, 1.0), (0.0, 0.75), (0.5, 0.5)]  # e = -1 + 0 - 0.5 + 0 = -1.5.
    state, swaps = clustering, []
    for round_num, (prior, q_bar) in enumerate(history, start=5):
      state, swapped = fedtkm.oriented(state, tf.constant(round_num, tf.int64), 4, tf.constant(prior),
                                       tf.constant(q_bar))
      state = {key: value.numpy() for key, value in state.items()}
      swaps.append(bool(swapped))
    self.assertEqual(swaps, [False, False, False, True])
    self.assertAllClose(state['centers'], self.centers[1::-1])
    self.assertAllClose(state['scales'], [1.0, 1.0 / 1.7])
    self.assertAllClose(state['mass'], [5.0, 3.0])
    self.assertAllEqual(state['branches'], [0, 1])
    self.assertEqual(state['evidence'], 0.0)
    # The same partition with the labels exchanged, and every example (and client) keeps its branch.
    for rule in ('mean_distance', 'majority_vote'):
      for client in np.split(self.features[:12], 4):
        before = fedtkm.client_cluster(_numpy_distances(client, clustering['centers'], clustering['scales']), rule)
        after = fedtkm.client_cluster(_numpy_distances(client, state['centers'], state['scales']), rule)
        self.assertEqual(int(after), 1 - int(before))
        self.assertEqual(int(fedtkm.branch_of(state, after)), int(fedtkm.branch_of(clustering, before)))
    before = np.argmin(_numpy_distances(self.features, clustering['centers'], clustering['scales']), axis=1)
    after = np.argmin(_numpy_distances(self.features, state['centers'], state['scales']), axis=1)
    self.assertAllEqual(after, 1 - before)
    # Evidence of the prior's orientation (q-bar follows q~) swaps nothing, and resets at the period's end.
    for round_num, (prior, q_bar) in enumerate([(1.0, 1.0), (0.0, 0.5), (0.0, 0.0), (0.5, 0.0)], start=9):
      state, swapped = fedtkm.oriented(state, tf.constant(round_num, tf.int64), 4, tf.constant(prior),
                                       tf.constant(q_bar))
      self.assertFalse(bool(swapped))
    self.assertAllEqual(state['branches'], [0, 1])
    self.assertEqual(float(state['evidence']), 0.0)

  def test_config_validation(self):
    with self.assertRaisesRegex(ValueError, 'needs a temporal prior'):
      fedtkm.Config(prior='none', orientation='prior_anchored').validate()
    with self.assertRaisesRegex(ValueError, 'orientation'):
      fedtkm.Config(orientation='day_first').validate()
    with self.assertRaisesRegex(ValueError, 'prior none'):
      fedtkm.Config(prior='linear', num_branches=3).validate()
    fedtkm.Config(prior='none', num_branches=3).validate()
    with self.assertRaisesRegex(ValueError, 'client_rule'):
      fedtkm.Config(client_rule='vote').validate()
    with self.assertRaisesRegex(ValueError, 'eta_max'):
      fedtkm.Config(eta_max=-1.0).validate()


if __name__ == '__main__':
  tf.test.main()
