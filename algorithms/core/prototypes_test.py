"""FedEvolve's and FedEvp's prototypes and prototypical loss (Tan et al., "Federated Learning Under Evolving
Distribution Shifts", 2024, Eq. 4-7 as reconstructed in `algorithms.core.prototypes`) against numpy references."""

import numpy as np
import tensorflow as tf

from algorithms.core import prototypes

NUM_STAGES, NUM_CLASSES, DIM = 4, 3, 5


def _reference_nll(support, queries, labels, stages, distance, stage_reduction='sum'):
  """Eq. 5 [R] summed over m, by loops: each query of stage m >= 1 against class means of stage m - 1 (support
  embeddings), softmax over the classes present there; a query of a class absent there is not scored."""
  total, loss_sum, correct, scored, stages_scored = 0.0, 0.0, 0, 0, 0
  for m in range(1, NUM_STAGES):
    present = [y for y in range(NUM_CLASSES) if np.any((stages == m - 1) & (labels == y))]
    centers = {y: support[(stages == m - 1) & (labels == y)].mean(axis=0) for y in present}
    stage_nll = []
    for i in np.flatnonzero((stages == m) & np.isin(labels, present)):
      d = np.array([np.linalg.norm(queries[i] - centers[y]) for y in present])
      d = d ** 2 if distance == 'squared' else d
      log_p = -d - np.log(np.sum(np.exp(-d)))
      stage_nll.append(-log_p[present.index(labels[i])])
      correct += present[int(np.argmin(d))] == labels[i]
    if stage_nll:
      total += np.mean(stage_nll)
      stages_scored += 1
      loss_sum += np.sum(stage_nll)
      scored += len(stage_nll)
  if stage_reduction == 'mean':
    total /= stages_scored
  return total, loss_sum, correct, scored


def _batch(seed, size=40):
  rng = np.random.default_rng(seed)
  stages = rng.integers(0, NUM_STAGES, size)
  labels = rng.integers(0, NUM_CLASSES, size)
  labels[(stages == 1) & (labels == 2)] = 0  # Class 2 absent from stage 1: stage-2 queries of class 2 unscored.
  return (rng.normal(size=(size, DIM)).astype(np.float32), rng.normal(size=(size, DIM)).astype(np.float32),
          labels.astype(np.int32), stages.astype(np.int32))


def _nll(support, queries, labels, stages, distance, stage_reduction='sum'):
  means, counts = prototypes.stage_class_means(support, labels, stages, NUM_STAGES, NUM_CLASSES)
  return prototypes.prototype_nll(queries, labels, stages, means, counts > 0, distance, stage_reduction)


class PrototypesTest(tf.test.TestCase):

  def test_prototype_nll_matches_the_reference(self):
    for seed in range(3):
      for distance, reduction in zip(prototypes.DISTANCES, prototypes.STAGE_REDUCTIONS):
        support, queries, labels, stages = _batch(seed)
        result = _nll(support, queries, labels, stages, distance, reduction)
        loss, loss_sum, correct, scored = _reference_nll(support, queries, labels, stages, distance, reduction)
        self.assertAllClose(result.loss, loss, rtol=1e-5)
        self.assertAllClose(result.loss_sum, loss_sum, rtol=1e-5)
        self.assertEqual(int(result.num_correct), correct)
        self.assertEqual(int(result.num_examples), scored)
        self.assertLess(scored, int(np.sum(stages >= 1)))  # Some queries had no prototype of their class.

  def test_gradient_reaches_the_support_embeddings_through_the_prototypes(self):
    support, queries, labels, stages = _batch(7)
    variable = tf.Variable(support)
    with tf.GradientTape() as tape:
      loss = _nll(variable, queries, labels, stages, 'euclidean').loss
    gradient = tape.gradient(loss, variable).numpy()
    step = 1e-3
    for i, j in [(int(np.flatnonzero(stages == 0)[0]), 1), (int(np.flatnonzero(stages == 2)[0]), 3)]:
      plus, minus = support.astype(np.float64), support.astype(np.float64)
      plus[i, j] += step
      minus[i, j] -= step
      numeric = (_reference_nll(plus, queries, labels, stages, 'euclidean')[0]
                 - _reference_nll(minus, queries, labels, stages, 'euclidean')[0]) / (2 * step)
      self.assertAllClose(gradient[i, j], numeric, atol=1e-3)
      self.assertNotEqual(gradient[i, j], 0.0)
    last_stage = np.flatnonzero(stages == NUM_STAGES - 1)  # Never a prototype of a scored stage: no gradient.
    self.assertAllEqual(gradient[last_stage], np.zeros_like(gradient[last_stage]))

  def test_evolving_prototypes_follow_eq_6(self):
    rng = np.random.default_rng(3)
    means = rng.normal(size=(NUM_STAGES, NUM_CLASSES, DIM)).astype(np.float32)
    counts = np.ones((NUM_STAGES, NUM_CLASSES), np.float32)
    counts[1, 2] = 0  # Class 2 absent from stage 1.
    c, has = prototypes.evolving_prototypes(means, counts, 'running_mean')
    expected = np.zeros((NUM_CLASSES, DIM))
    for m in range(NUM_STAGES):  # Eq. 6 with 1/m weights, from c^0 = 0, over the stages where the class is present.
      for y in range(NUM_CLASSES):
        seen = sum(counts[:m + 1, y] > 0)
        if counts[m, y] > 0:
          expected[y] = (seen - 1) / seen * expected[y] + means[m, y] / seen
      self.assertAllClose(c[m], expected, atol=1e-6)
    self.assertTrue(np.all(has))
    self.assertAllClose(c[1, :2], (means[0, :2] + means[1, :2]) / 2, atol=1e-6)
    self.assertAllClose(c[1, 2], means[0, 2], atol=1e-6)

    ema, _ = prototypes.evolving_prototypes(means, counts, 'moving_average', momentum=0.3)
    expected = np.zeros((NUM_CLASSES, DIM))
    for m in range(NUM_STAGES):
      expected = np.where(counts[m][:, None] > 0, 0.7 * expected + 0.3 * means[m], expected)
      self.assertAllClose(ema[m], expected, atol=1e-6)

    literal, _ = prototypes.evolving_prototypes(means, np.ones_like(counts), 'running_mean',
                                                include_first_stage=False)
    self.assertAllClose(literal[0], np.zeros((NUM_CLASSES, DIM)))
    self.assertAllClose(literal[2], (means[1] + means[2]) / 3, atol=1e-6)

  def test_nearest_prototype_per_client(self):
    centers = np.array([[[0.0, 0.0], [4.0, 0.0]], [[4.0, 0.0], [0.0, 0.0]]], np.float32)  # Client 1 swaps classes.
    queries = np.array([[0.5, 0.0], [0.5, 0.0], [3.0, 1.0]], np.float32)
    result = prototypes.nearest_prototype_result(queries, np.array([0, 1, 0]), centers, np.ones((2, 2), bool),
                                                 'euclidean', clients=np.array([0, 1, 1]))
    self.assertEqual(int(result.num_correct), 3)
    pooled = prototypes.nearest_prototype_result(queries, np.array([0, 0, 1]), centers[0], np.array([True, False]),
                                                 'squared')
    self.assertEqual(int(pooled.num_correct), 2)  # Class 1 has no prototype: never predicted.


if __name__ == '__main__':
  tf.test.main()
