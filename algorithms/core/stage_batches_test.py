"""FedEvolve's and FedEvp's stage batches against a plain Python regrouping, and FedEvp's loss against a numpy
reference of Algorithm 2's per-domain objective (Tan et al., "Federated Learning Under Evolving Distribution
Shifts", 2024)."""

import collections

import numpy as np
import tensorflow as tf

from algorithms.core import stage_batches
from algorithms.core import client_training
from algorithms.methods import fedevolve
from algorithms.methods import fedevp
from models import multi_branch
from models import representation

STAGE_SIZES = (10, 25, 3, 13)  # Stage 2 has fewer than a batch of 4.
NUM_CLASSES, DIM = 3, 4


def _stream(seed=0, batch_size=7):
  """Model batches of a client: every example's id in x[:, 0], its stage in `stage`, stages shuffled together."""
  rng = np.random.default_rng(seed)
  stages = rng.permutation(np.repeat(np.arange(len(STAGE_SIZES)), STAGE_SIZES)).astype(np.int32)
  ids = np.arange(len(stages), dtype=np.float32)
  x = np.stack([ids, rng.normal(size=len(stages)).astype(np.float32)], axis=1)
  y = rng.integers(0, NUM_CLASSES, len(stages)).astype(np.int32)
  examples = collections.OrderedDict(x=x, y=y, mode=stages, stage=stages)
  return tf.data.Dataset.from_tensor_slices(examples).batch(batch_size), stages


def _batches(dataset):
  return [(batch['x'][:, 0].astype(int).tolist(), batch['stage'].tolist()) for batch in dataset.as_numpy_iterator()]


class StageBatchesTest(tf.test.TestCase):

  def test_pairs_are_algorithm_1s_support_and_query_batches(self):
    dataset, stages = _stream()
    order = [list(np.flatnonzero(stages == s)) for s in range(len(STAGE_SIZES))]  # Each stage in stream order.
    b = 4
    expected, step = [], [0] * len(STAGE_SIZES)  # step[m]: pair m's next batch index.
    chunks = lambda s: [order[s][i:i + b] for i in range(0, len(order[s]), b)]
    while any(step[m] < len(chunks(m + 1)) for m in range(len(STAGE_SIZES) - 1)):
      for m in range(len(STAGE_SIZES) - 1):
        if step[m] < len(chunks(m + 1)):
          full = [chunk for chunk in chunks(m) if len(chunk) == b] or chunks(m)[:1]
          support = full[step[m] % len(full)]
          query = chunks(m + 1)[step[m]]
          expected.append((support + query, [m] * len(support) + [m + 1] * len(query)))
          step[m] += 1
    self.assertEqual(_batches(stage_batches.stage_pairs(dataset, len(STAGE_SIZES), b)), expected)
    self.assertEqual(_batches(stage_batches.stage_pairs(dataset, len(STAGE_SIZES) + 1, b)), expected)
    queries = [i for ids, batch_stages in expected for i, s in zip(ids, batch_stages) if s == batch_stages[-1]]
    self.assertCountEqual(queries, [i for s in range(1, len(STAGE_SIZES)) for i in order[s]])  # Once each.
    for ids, batch_stages in expected:  # Full support: b examples of stage m, or all it has.
      m = batch_stages[0]
      self.assertEqual(batch_stages.count(m), min(b, STAGE_SIZES[m]))

  def test_sweep_is_algorithm_2s_step_per_domain_after_its_supports(self):
    dataset, stages = _stream(seed=2)
    order = [list(np.flatnonzero(stages == s)) for s in range(len(STAGE_SIZES))]
    b = 4
    chunks = lambda s: [order[s][i:i + b] for i in range(0, len(order[s]), b)]
    expected = []
    for k in range(max(len(chunks(m)) for m in range(len(STAGE_SIZES)))):  # Local iteration k: m = 0..S-1.
      for m in range(len(STAGE_SIZES)):
        if k < len(chunks(m)):
          ids = []
          share = -(-b // m) if m else b  # Each of the m supports: ceil(b / m) examples.
          for j in range(m):  # Stage j's full batches of that size in turn, or all of it when it has none.
            pieces = [order[j][i:i + share] for i in range(0, len(order[j]), share)]
            full = [piece for piece in pieces if len(piece) == share] or pieces[:1]
            ids += full[k % len(full)]
          ids += chunks(m)[k]
          expected.append((ids, [int(stages[i]) for i in ids]))
    self.assertEqual(_batches(stage_batches.stage_sweep(dataset, len(STAGE_SIZES), b)), expected)
    self.assertEqual(_batches(stage_batches.stage_sweep(dataset, len(STAGE_SIZES) + 1, b)), expected)
    own = [i for ids, batch_stages in expected for i, s in zip(ids, batch_stages) if s == max(batch_stages)]
    self.assertCountEqual(own, range(sum(STAGE_SIZES)))  # Every example is a step's own once a pass.

  def test_strata_hold_the_next_examples_of_every_stage_once(self):
    dataset, stages = _stream(seed=1)
    order = [list(np.flatnonzero(stages == s)) for s in range(len(STAGE_SIZES))]
    b = 6
    expected = []
    for k in range(-(-max(STAGE_SIZES) // b)):
      ids = [i for s in range(len(STAGE_SIZES)) for i in order[s][k * b:(k + 1) * b]]
      expected.append((ids, [int(stages[i]) for i in ids]))
    self.assertEqual(_batches(stage_batches.stage_strata(dataset, len(STAGE_SIZES), b)), expected)
    # A stage the client does not hold (the target's) adds nothing.
    self.assertEqual(_batches(stage_batches.stage_strata(dataset, len(STAGE_SIZES) + 1, b)), expected)

  def test_an_empty_stream_gives_no_batches(self):
    dataset, _ = _stream()
    empty = dataset.unbatch().take(0).batch(7)
    for layout in (stage_batches.stage_pairs, stage_batches.stage_sweep, stage_batches.stage_strata):
      self.assertEqual(_batches(layout(empty, len(STAGE_SIZES), 4)), [])

  def test_batches_without_stages_stay_as_they_are(self):
    dataset, _ = _stream()
    plain = dataset.map(lambda batch: {key: value for key, value in batch.items() if key != 'stage'})
    for layout in (stage_batches.stage_pairs, stage_batches.stage_sweep, stage_batches.stage_strata):
      self.assertIs(layout(plain, len(STAGE_SIZES), 4), plain)

  def test_packed_leaves_the_batches(self):
    self.assertIsNone(stage_batches.regrouped('packed', 4, 8))


def _algorithm_2_objective(features, logits, labels, stages):
  """Algorithm 2's per-domain objectives averaged over the M stages, by loops: domain m's CE^m (mean over its
  examples) + A^m (m >= 1: each example against the running mean c^{m-1} of the class means of stages 0..m-1,
  over the classes present there, Euclidean distance)."""
  num_stages = int(stages.max()) + 1
  total, sums, seen = 0.0, np.zeros([NUM_CLASSES, features.shape[1]]), np.zeros(NUM_CLASSES)
  for m in range(num_stages):
    members = stages == m
    log_p = logits[members] - np.log(np.sum(np.exp(logits[members]), axis=1, keepdims=True))
    total += -np.mean(log_p[np.arange(members.sum()), labels[members]])
    if m >= 1:
      present = np.flatnonzero(seen > 0)
      centers = sums[present] / seen[present, None]
      nll = []
      for i in np.flatnonzero(members & np.isin(labels, present)):
        d = np.linalg.norm(features[i] - centers, axis=1)
        nll.append(d[list(present).index(labels[i])] + np.log(np.sum(np.exp(-d))))
      total += np.mean(nll)
    for y in range(NUM_CLASSES):  # Eq. 6: fold domain m's class means into the running mean.
      if np.any(members & (labels == y)):
        sums[y] += features[members & (labels == y)].mean(axis=0)
        seen[y] += 1
  return total / num_stages


class FedEvpBalanceTest(tf.test.TestCase):

  def test_loss_is_algorithm_2s_per_domain_objective(self):
    rng = np.random.default_rng(3)
    num_stages, per_stage = 5, 12
    stages = np.repeat(np.arange(num_stages), per_stage).astype(np.int32)  # Every stage fills its share.
    labels = rng.integers(0, NUM_CLASSES, stages.size).astype(np.int32)
    features = rng.normal(size=(stages.size, DIM)).astype(np.float32)
    logits = rng.normal(size=(stages.size, NUM_CLASSES)).astype(np.float32)
    outputs = {multi_branch.FEATURES: features, multi_branch.LOGITS: logits[:, np.newaxis]}
    batch = collections.OrderedDict(x=features, y=labels, stage=stages)
    reference = _algorithm_2_objective(features, logits, labels, stages)
    mean = fedevp.training_objective(num_stages, NUM_CLASSES, fedevp.Config())(outputs, batch).loss
    self.assertAllClose(mean, reference, rtol=1e-5)
    summed = fedevp.training_objective(num_stages, NUM_CLASSES, fedevp.Config(stage_reduction='sum'))
    ce = np.mean(-np.log(np.exp(logits[np.arange(stages.size), labels]) / np.exp(logits).sum(axis=1)))
    self.assertAllClose(summed(outputs, batch).loss - ce, num_stages * (reference - ce), rtol=1e-5)


class FedEvolvePairForwardTest(tf.test.TestCase):

  def test_each_tower_on_its_rows_gives_the_full_forwards_loss_and_gradients(self):
    rng = np.random.default_rng(4)
    stages = np.array([2] * 9 + [3] * 7, np.int32)  # A pair batch: stage 2's support, stage 3's queries.
    labels = np.concatenate([np.arange(9) % NUM_CLASSES, rng.integers(0, NUM_CLASSES, 7)]).astype(np.int32)
    batch = dict(x=rng.normal(size=(16, 5)).astype(np.float32), y=labels, stage=stages)
    model = representation.two_tower_model(representation.mlp_representation(5, NUM_CLASSES, units=8))
    objective = fedevolve.training_objective(5, NUM_CLASSES, 'euclidean')
    results = []
    for forward in (client_training.model_outputs, fedevolve.pair_outputs):
      with tf.GradientTape() as tape:
        result = objective(forward(model, batch), batch)
      results.append((result, tape.gradient(result.loss, model.trainable_variables)))
    (full, full_gradients), (pairs, pair_gradients) = results
    self.assertEqual(float(pairs.num_examples), 7.0)  # Every query scored, no support.
    for field in ('loss', 'loss_sum', 'num_correct', 'num_examples'):
      self.assertAllClose(getattr(pairs, field), getattr(full, field), rtol=1e-5)
    self.assertAllClose(pair_gradients, full_gradients, rtol=1e-4, atol=1e-6)
    self.assertGreater(max(float(tf.reduce_max(tf.abs(g))) for g in pair_gradients), 0.0)


if __name__ == '__main__':
  tf.test.main()
