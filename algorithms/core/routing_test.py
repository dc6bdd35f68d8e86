"""Tests the pieces the clustering methods share: reading a client once, routing counts, accuracy and
adjusted Rand index."""

import numpy as np
from scipy import optimize
from sklearn import metrics
import tensorflow as tf

from algorithms.core import routing


class RoutingTest(tf.test.TestCase):

  def test_client_examples_reads_all_examples_and_the_same_batches(self):
    x = np.arange(23 * 2, dtype=np.float32).reshape(23, 2)
    batches = tf.data.Dataset.from_tensor_slices({'x': x, 'mode': np.full(23, 1, np.int32)}).batch(5)
    examples, rebatched, batch_size = routing.client_examples(batches)
    self.assertEqual(batch_size, 5)
    self.assertAllEqual(examples['x'], x)  # All 23 examples of the 5 batches, in order.
    self.assertAllEqual(examples['mode'], np.ones(23))
    self.assertEqual([len(b['x']) for b in rebatched], [5, 5, 5, 5, 3])
    for original, copy in zip(batches, rebatched):
      self.assertAllEqual(original['x'], copy['x'])

  def test_client_confusion(self):
    self.assertAllEqual(routing.client_confusion(tf.constant(1), tf.constant(2), 2, 3), [[0, 0, 0], [0, 0, 1]])

  def test_routing_accuracy(self):
    confusion = np.array([[8.0, 2.0], [1.0, 9.0]], np.float32)
    self.assertAllClose(routing.routing_accuracy(confusion, best_matching=False), 17 / 20)
    swapped = confusion[:, ::-1]
    self.assertAllClose(routing.routing_accuracy(swapped, best_matching=False), 3 / 20)
    self.assertAllClose(routing.routing_accuracy(swapped, best_matching=True), 17 / 20)
    # Two modes, three branches: the best injective matching sends mode 0 to branch 2 and mode 1 to branch 0.
    three = np.array([[1.0, 2.0, 7.0], [6.0, 3.0, 1.0]], np.float32)
    self.assertAllClose(routing.routing_accuracy(three, best_matching=True), 13 / 20)
    self.assertAllClose(routing.routing_accuracy(three, best_matching=False), 4 / 20)

  def test_best_matching_matches_the_assignment_problem(self):
    rng = np.random.default_rng(7)
    for modes, branches in ((2, 2), (3, 5), (5, 3), (8, 5), (40, 4)):
      confusion = rng.integers(0, 20, size=(modes, branches)).astype(np.float32)
      rows, columns = optimize.linear_sum_assignment(confusion, maximize=True)
      self.assertAllClose(routing.routing_accuracy(tf.constant(confusion), best_matching=True),
                          confusion[rows, columns].sum() / confusion.sum())

  def test_adjusted_rand_index_matches_scikit_learn(self):
    rng = np.random.default_rng(0)
    for shape in ((2, 2), (2, 3), (3, 2), (4, 4)):
      for _ in range(5):
        confusion = rng.integers(0, 12, size=shape)
        modes = np.repeat(np.repeat(np.arange(shape[0]), shape[1]), confusion.ravel())
        branches = np.repeat(np.tile(np.arange(shape[1]), shape[0]), confusion.ravel())
        self.assertAllClose(routing.adjusted_rand_index(confusion.astype(np.float32)),
                            metrics.adjusted_rand_score(modes, branches), atol=1e-6)

  def test_adjusted_rand_index_does_not_flatter(self):
    # Everything on one branch: the best-matching accuracy is 0.5, the agreement is none.
    one_branch = np.array([[10.0, 0.0], [10.0, 0.0]], np.float32)
    self.assertAllClose(routing.routing_accuracy(one_branch, best_matching=True), 0.5)
    self.assertAllClose(routing.adjusted_rand_index(one_branch), 0.0)
    self.assertAllClose(routing.adjusted_rand_index(np.array([[0.0, 7.0], [5.0, 0.0]], np.float32)), 1.0)



if __name__ == '__main__':
  tf.test.main()
