"""FedEvp's step per domain against Algorithm 2 written out eagerly (Tan et al., "Federated Learning Under Evolving
Distribution Shifts", 2024): the same client's two local iterations, step by step, with the prototypes in numpy;
and on a task without time stages, where there is nothing to sweep, plain SGD on the cross-entropy."""

import collections

from absl.testing import absltest
from absl.testing import parameterized
import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from algorithms.core import client_training
from algorithms.core import learning_process
from algorithms.core import method
from algorithms.core import stage_batches
from algorithms.methods import fedevp
from models import multi_branch
from models import representation
from tasks import task as task_lib

_STAGES, _PER_STAGE, _CLASSES, _RATE = 4, 6, 3, 0.2


def _client_stream(rng: np.random.Generator) -> dict:
  """One pass of a client's examples in stream order: 6 of each stage, class 2 absent from stage 1."""
  stage = np.repeat(np.arange(_STAGES), _PER_STAGE)
  labels = rng.integers(0, _CLASSES, size=stage.size)
  labels[stage == 1] = rng.integers(0, 2, size=_PER_STAGE)
  labels[:3] = [0, 1, 2]  # Every class in stage 0.
  order = rng.permutation(stage.size)
  return {'x': rng.normal(size=(stage.size, 2)).astype(np.float32), 'y': labels[order].astype(np.int32),
          'stage': stage[order].astype(np.int32)}


def _reference(model: tf.keras.Model, stream: dict, config: fedevp.Config, passes: int) -> list:
  """Algorithm 2 for one client: per local iteration, domains in order; at domain m one SGD step on CE^m + A^m
  against the prototypes accumulated over the earlier domains, then domain m's class means enter them."""
  for _ in range(passes):
    prototypes = np.zeros((_CLASSES, model.output[multi_branch.FEATURES].shape[-1]), np.float32)
    domains = np.zeros(_CLASSES)
    for m in range(_STAGES):
      x, y = stream['x'][stream['stage'] == m], stream['y'][stream['stage'] == m]
      with tf.GradientTape() as tape:
        outputs = model(x, training=True)
        features = outputs[multi_branch.FEATURES]
        ce = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(y, outputs[multi_branch.LOGITS][:, 0]))
        difference = features[:, tf.newaxis] - prototypes[tf.newaxis]
        squared = tf.reduce_sum(difference * difference, axis=-1)
        distance = tf.sqrt(squared) if config.distance == 'euclidean' else squared
        logits = tf.where(domains[tf.newaxis] > 0, -distance, -np.inf)
        scored = domains[y] > 0
        alignment = (tf.reduce_mean(tf.boolean_mask(tf.nn.sparse_softmax_cross_entropy_with_logits(y, logits),
                                                    scored)) if scored.any() else 0.0)
        loss = ce + config.alignment_weight * alignment
      for variable, gradient in zip(model.trainable_variables, tape.gradient(loss, model.trainable_variables)):
        variable.assign_sub(_RATE * gradient)
      values = features.numpy()
      for label in range(_CLASSES):
        skipped_first = config.first_stage == 'skipped' and m == 0
        if not (skipped_first or (y == label).any()):
          continue
        mean = np.zeros(values.shape[1]) if skipped_first else values[y == label].mean(axis=0)
        domains[label] += 1
        weight = 1 / domains[label] if config.prototypes == 'running_mean' else config.momentum
        prototypes[label] += weight * (mean - prototypes[label])
  return [v.numpy() for v in model.trainable_variables]


class SweptStepTest(parameterized.TestCase):

  @parameterized.parameters(
      fedevp.Config(),
      fedevp.Config(distance='squared', prototypes='moving_average', momentum=0.3, first_stage='skipped',
                    alignment_weight=2.0))
  def test_each_step_aligns_to_the_prototypes_the_sweep_accumulated(self, config):
    stream = _client_stream(np.random.default_rng(0))
    network = representation.mlp_representation(2, _CLASSES, units=8)
    tf.keras.utils.set_random_seed(1)
    model, reference_model = representation.tower_head_model(network), representation.tower_head_model(network)
    reference_model.set_weights(model.get_weights())
    initial = tff.learning.models.ModelWeights.from_model(model)
    initial = tf.nest.map_structure(tf.identity, initial)
    passes = 2
    batches = tf.data.Dataset.from_tensor_slices(
        collections.OrderedDict((key, np.concatenate([value] * passes)) for key, value in stream.items())).batch(5)
    objective = fedevp.swept_objective(config, fedevp.SweptPrototypes(_CLASSES, 8))
    train = tf.function(lambda weights, data: client_training.local_training(
        model, tff.learning.optimizers.build_sgdm(_RATE), weights, data, objective, forward=fedevp.swept_forward),
                        autograph=False)
    output = train(initial, stage_batches.stage_sweep(batches, _STAGES, _PER_STAGE))
    trained = [w - u for w, u in zip(initial.trainable, output.update)]
    expected = _reference(reference_model, stream, config, passes)
    self.assertEqual(float(output.num_examples), passes * _STAGES * _PER_STAGE)
    for value, reference in zip(trained, expected):
      np.testing.assert_allclose(value, reference, atol=2e-5)
    moved = [np.abs(r - w.numpy()).max() for r, w in zip(expected, initial.trainable)]
    self.assertGreater(min(moved), 1e-3)  # Every tensor trained: the comparison is not of untouched weights.

  @parameterized.parameters(*fedevp.BATCHINGS)
  def test_without_time_stages_every_layout_trains_on_the_cross_entropy(self, batching):
    # A scenario without time stages (batches without `stage`): one round of one client under averaging at rate 1
    # moves the global model to the client's plain SGD on the cross-entropy, batch by batch.
    rng = np.random.default_rng(2)
    data = collections.OrderedDict(x=rng.normal(size=(12, 2)).astype(np.float32),
                                   y=rng.integers(0, _CLASSES, size=12).astype(np.int32))
    batches = tf.data.Dataset.from_tensor_slices(data).batch(5)
    stream = batches.map(lambda batch: (batch, tf.zeros_like(batch['y'])))  # A client's (raw batch, mode) stream.
    network = representation.mlp_representation(2, _CLASSES, units=8)
    task = task_lib.Task(name='t', train_data=[], client_sizes=[], test_data=[], test_sizes=[], batch_fn=lambda b: b,
                         model_fn=None, num_classes=_CLASSES, mode_names=('a',), representation=network)
    hparams = method.Hyperparameters(_RATE, learning_process.ServerStep.named('sgd', 1.0))
    model_fn, process = fedevp.build_process(task, stream.element_spec, hparams, fedevp.Config(batching=batching))
    tf.keras.utils.set_random_seed(3)
    reference = model_fn()
    state = process.set_model_weights(process.initialize(), tff.learning.models.ModelWeights.from_model(reference))
    trained = process.get_model_weights(process.next(state, [stream]).state).trainable
    for batch in batches:
      with tf.GradientTape() as tape:
        logits = reference(batch['x'], training=True)[multi_branch.LOGITS][:, 0]
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(batch['y'], logits))
      for variable, gradient in zip(reference.trainable_variables, tape.gradient(loss, reference.trainable_variables)):
        variable.assign_sub(_RATE * gradient)
    for value, expected in zip(trained, reference.trainable_variables):
      np.testing.assert_allclose(value, expected.numpy(), atol=2e-5)

  def test_gradients_through_swept_prototypes_are_refused(self):
    with self.assertRaisesRegex(ValueError, 'prototype_gradient=through needs'):
      fedevp.Config(prototype_gradient='through').validate()


if __name__ == '__main__':
  absltest.main()
