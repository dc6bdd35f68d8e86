"""Tests the baselines' pieces against numpy and constructed cases: the certainty criterion, SCSGD's schedule,
IFCA's branch choice, FedEM's E and M steps, and T-shot k-means routing."""


import numpy as np
from scipy import special
import tensorflow as tf

from algorithms.core import certainty
from algorithms.methods import fedem
from algorithms.methods import min_loss
from algorithms.methods import scsgd
from algorithms.methods import tshot_kmeans


class CertaintyTest(tf.test.TestCase):

  def test_kl_to_uniform_matches_numpy(self):
    logits = np.random.default_rng(0).normal(size=(5, 7)).astype(np.float32) * 3
    p = special.softmax(logits, axis=1)
    expected = np.sum(p * np.log(p * 7), axis=1)  # KL(p || u) with u = 1/7.
    self.assertAllClose(certainty.kl_to_uniform(logits, np.ones(5, np.float32)), expected, atol=1e-5)
    # Sequences: the masked mean over positions.
    sequence = np.random.default_rng(1).normal(size=(2, 3, 4)).astype(np.float32)
    mask = np.array([[1, 1, 0], [1, 0, 0]], np.float32)
    q = special.softmax(sequence, axis=-1)
    per_position = np.sum(q * np.log(q * 4), axis=-1)
    self.assertAllClose(certainty.kl_to_uniform(sequence, mask),
                        [per_position[0, :2].mean(), per_position[1, 0]], atol=1e-5)

  def test_most_certain_branch_per_batch_and_per_sample(self):
    logits = np.zeros((3, 2, 4), np.float32)
    logits[0, 0, 1] = 9.0  # Example 0: branch 1 confident (class 1).
    logits[1, 0, 2] = 9.0  # Example 1: branch 1 confident (class 2).
    logits[2, 1, 3] = 2.0  # Example 2: branch 2 mildly confident (class 3).
    batch = {'y': np.array([1, 2, 3]), 'mode': np.array([0, 0, 1])}
    outputs = {'logits': logits}
    per_batch = certainty.evaluation_objective(2, 2, 'batch')(outputs, batch)
    self.assertAllEqual(per_batch.routing, [[2, 0], [1, 0]])
    self.assertEqual(per_batch.num_correct, 2)
    per_sample = certainty.evaluation_objective(2, 2, 'sample')(outputs, batch)
    self.assertAllEqual(per_sample.routing, [[2, 0], [0, 1]])
    self.assertEqual(per_sample.num_correct, 3)


class ScsgdTest(tf.test.TestCase):

  def test_branch_schedule(self):
    rounds = np.arange(1, 33)
    period = [int(scsgd.branch_of_round(t, 16, 2, 'period')) for t in rounds]
    self.assertEqual(period[:16], [0] * 7 + [1] * 8 + [0])  # t mod 16 in [0, 8) -> branch 1.
    centered = [int(scsgd.branch_of_round(t, 16, 2, 'mode_centered')) for t in rounds[:16]]
    self.assertEqual(centered, [0] * 3 + [1] * 8 + [0] * 5)  # Branch 1 for t mod 16 in [12, 16) and [0, 4).
    three = [int(scsgd.branch_of_round(t, 12, 3, 'period')) for t in range(12)]
    self.assertEqual(three, [0] * 4 + [1] * 4 + [2] * 4)


class MinLossTest(tf.test.TestCase):

  def test_chooses_the_branch_that_fits_the_labels(self):
    # Branch 2 predicts the label (x is one-hot of the label), branch 1 predicts the next class.
    inputs = tf.keras.Input((3,))
    identity = inputs * 5.0
    shifted = tf.roll(inputs, shift=1, axis=1) * 5.0
    model = tf.keras.Model(inputs, {'features': inputs, 'logits': tf.stack([shifted, identity], axis=1)})
    labels = np.array([0, 1, 2, 2, 1])
    batches = tf.data.Dataset.from_tensor_slices({'x': np.eye(3, dtype=np.float32)[labels], 'y': labels}).batch(2)
    losses = min_loss.branch_losses(model, batches, 2).numpy()
    expected = [np.mean(-np.log(special.softmax(5.0 * np.roll(np.eye(3)[labels], 1, axis=1), axis=1)
                                [np.arange(5), labels])),
                np.mean(-np.log(special.softmax(5.0 * np.eye(3)[labels], axis=1)[np.arange(5), labels]))]
    self.assertAllClose(losses, expected, atol=1e-5)
    self.assertEqual(np.argmin(losses), 1)


class FedEmTest(tf.test.TestCase):

  def test_em_matches_numpy(self):
    losses = np.random.default_rng(2).uniform(0.1, 3.0, size=(9, 3)).astype(np.float32)
    pi = np.full(3, 1 / 3)
    for _ in range(4):
      q = pi * np.exp(-losses)
      q /= q.sum(1, keepdims=True)  # E step.
      pi = q.mean(0)  # M step.
    got_pi, got_q = fedem.expectation_maximization(losses, iterations=4)
    self.assertAllClose(got_pi, pi, atol=1e-5)
    self.assertAllClose(got_q, q, atol=1e-5)

  def test_unlabeled_em_matches_numpy_and_finds_the_component_that_knows_the_batch(self):
    rng = np.random.default_rng(4)
    logits = rng.normal(size=(6, 3, 5)).astype(np.float32)
    p = special.softmax(logits, axis=-1)  # [B, K, C]
    pi = np.full(3, 1 / 3)
    for _ in range(3):
      predicted = np.einsum('k,bkc->bc', pi, p).argmax(1)  # The mixture's label.
      losses = -np.log(p[np.arange(6), :, predicted])
      q = pi * np.exp(-losses)
      q /= q.sum(1, keepdims=True)
      pi = q.mean(0)
    got_pi, got_q = fedem.unlabeled_expectation_maximization(logits, iterations=3)
    self.assertAllClose(got_pi, pi, atol=1e-5)
    self.assertAllClose(got_q, q, atol=1e-5)
    # Component 1 is confident on every example, the others near uniform: the batch's pi goes to component 1.
    peaked = rng.normal(scale=0.1, size=(8, 3, 5)).astype(np.float32)
    peaked[np.arange(8), 1, rng.integers(0, 5, 8)] += 6.0
    got_pi, _ = fedem.unlabeled_expectation_maximization(peaked, iterations=5)
    self.assertGreater(got_pi[1], 0.9)

  def test_mixture_prediction_and_training_loss(self):
    rng = np.random.default_rng(3)
    logits = rng.normal(size=(4, 2, 5)).astype(np.float32)
    weights = np.array([0.3, 0.7], np.float32)
    mixture = np.log(np.einsum('k,bkc->bc', weights, special.softmax(logits, axis=-1)))
    self.assertAllClose(fedem.mixture_log_probs(logits, np.tile(weights, (4, 1))), mixture, atol=1e-5)
    labels = rng.integers(0, 5, 4)
    q = special.softmax(rng.normal(size=(4, 2)), axis=1).astype(np.float32)
    batch = {'y': labels, fedem.RESPONSIBILITY: q}
    result = fedem.training_objective(tf.constant(weights))({'logits': logits}, batch)
    ce = -np.log(special.softmax(logits, axis=-1)[np.arange(4)[:, None], np.arange(2)[None], labels[:, None]])
    self.assertAllClose(result.loss, np.mean(np.sum(q * ce, axis=1)), atol=1e-5)
    self.assertEqual(result.num_correct, np.sum(mixture.argmax(1) == labels))


class TshotKmeansTest(tf.test.TestCase):

  def test_routes_separable_raw_data_by_blob(self):
    rng = np.random.default_rng(4)
    blobs = [rng.normal(size=(40, 6)) + 6.0, rng.normal(size=(30, 6)) - 6.0]
    # Each "client" reports local centers; the server clusters the reported centers.
    reported, sizes = [], []
    for i in range(6):
      blob = blobs[i % 2][(i // 2) * 10:(i // 2) * 10 + 10].astype(np.float32)
      centers, counts = tshot_kmeans.weighted_kmeans(blob, tf.ones([len(blob)]), 2, iterations=10)
      reported.append(centers.numpy())
      sizes.append(counts.numpy())
    self.assertAllClose(np.concatenate(sizes).reshape(6, 2).sum(1), [10] * 6)
    centers, _ = tshot_kmeans.weighted_kmeans(np.concatenate(reported), np.concatenate(sizes), 2, iterations=30)
    routed = [tshot_kmeans.nearest_center(blob.astype(np.float32), centers).numpy() for blob in blobs]
    self.assertLen(np.unique(routed[0]), 1)
    self.assertLen(np.unique(routed[1]), 1)
    self.assertNotEqual(routed[0][0], routed[1][0])

  def test_nearest_center_matches_numpy(self):
    rng = np.random.default_rng(5)
    points, centers = rng.normal(size=(20, 4)).astype(np.float32), rng.normal(size=(3, 4)).astype(np.float32)
    expected = np.argmin(np.linalg.norm(points[:, None] - centers[None], axis=-1), axis=1)
    self.assertAllEqual(tshot_kmeans.nearest_center(points, centers), expected)

  def test_zero_weight_points_do_not_move_centers(self):
    points = np.array([[0.0, 0.0], [1.0, 0.0], [10.0, 0.0], [11.0, 0.0], [100.0, 100.0]], np.float32)
    centers, sizes = tshot_kmeans.weighted_kmeans(points, np.array([1, 1, 2, 2, 0], np.float32), 2, iterations=5)
    self.assertAllClose(sorted(centers.numpy()[:, 0]), [0.5, 10.5])
    self.assertAllClose(sorted(sizes.numpy()), [2.0, 4.0])


if __name__ == '__main__':
  tf.test.main()
