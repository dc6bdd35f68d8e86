"""Local training on one client: the loop every method's client work runs.

`local_training(model, optimizer, initial_weights, dataset, objective)` assigns the broadcast weights to the
client's Keras model, runs one optimizer step per batch on `objective(model_outputs, batch).loss` with a TFF optimizer
(`tff.learning.optimizers`), and returns the model update in TFF's convention, update = initial - trained (the
finalizer treats the aggregated update as a gradient), with the number of examples trained on and the metric sums.
A client whose update is not finite sends zeros with weight 0, as TFF's own client work does.
"""

import collections
from typing import Callable, NamedTuple

import tensorflow as tf
import tensorflow_federated as tff

from algorithms import objectives

Objective = Callable[[dict, dict], objectives.BatchResult]


class TrainingOutput(NamedTuple):
  """update: ModelWeights.trainable structure; num_examples: float32; metrics: OrderedDict of float32 sums."""
  update: object
  num_examples: tf.Tensor
  metrics: dict


def metric_sums(result: objectives.BatchResult) -> dict:
  """The summable metrics of a batch; routing counts only when the objective reports them."""
  sums = dict(loss_sum=result.loss_sum, num_correct=result.num_correct, num_examples=result.num_examples,
              num_predictions=result.num_predictions)
  if result.routing is not None:
    sums['routing'] = result.routing
  return sums


def finalize_train_metrics(sums) -> collections.OrderedDict:
  """train_loss, train_accuracy and train_examples from summed metrics (`metric_sums`)."""
  return collections.OrderedDict(
      train_loss=sums['loss_sum'] / tf.maximum(sums['num_examples'], 1.0),
      train_accuracy=sums['num_correct'] / tf.maximum(sums['num_predictions'], 1.0),
      train_examples=sums['num_examples'])


def zero_metric_sums(routing_shape=None) -> dict:
  sums = dict(loss_sum=tf.constant(0.0), num_correct=tf.constant(0.0), num_examples=tf.constant(0.0),
              num_predictions=tf.constant(0.0))
  if routing_shape is not None:
    sums['routing'] = tf.zeros(routing_shape)
  return sums


def assign_weights(model: tf.keras.Model, weights: tff.learning.models.ModelWeights) -> None:
  """Sets `model`'s variables to `weights` (inside the caller's `tf.function`)."""
  variables = tff.learning.models.ModelWeights.from_model(model)
  tf.nest.map_structure(lambda variable, value: variable.assign(value), variables, weights)


def local_training(model: tf.keras.Model, optimizer: tff.learning.optimizers.Optimizer,
                   initial_weights: tff.learning.models.ModelWeights, dataset: tf.data.Dataset,
                   objective: Objective) -> TrainingOutput:
  """Assigns `initial_weights` to `model`, trains on `dataset`, returns the update; runs inside a `tf.function`.

  The caller's `tf.function` must close over `model` (passing a Keras model as a `tf.function` argument makes the
  function see copies of its variables); its automatic control dependencies order the variable reads after
  training.
  """
  weights = tff.learning.models.ModelWeights.from_model(model)
  trainable = tuple(weights.trainable)
  specs = tuple(tf.TensorSpec(v.shape, v.dtype) for v in trainable)

  def step(state, batch):
    optimizer_state, sums = state
    with tf.GradientTape() as tape:
      result = objective(model(batch['x'], training=True), batch)
    gradients = tape.gradient(result.loss, trainable)
    optimizer_state, updated = optimizer.next(optimizer_state, trainable, gradients)
    for variable, value in zip(trainable, updated):
      variable.assign(value)
    sums = tf.nest.map_structure(tf.add, sums, metric_sums(result))
    return optimizer_state, sums

  assign_weights(model, initial_weights)
  _, sums = dataset.reduce((optimizer.initialize(specs), zero_metric_sums()), step)
  update = tf.nest.map_structure(tf.subtract, tuple(initial_weights.trainable), trainable)
  finite = tf.reduce_all([tf.reduce_all(tf.math.is_finite(u)) for u in update])
  update = tf.nest.map_structure(lambda u: tf.where(finite, u, tf.zeros_like(u)), update)
  num_examples = tf.where(finite, sums['num_examples'], 0.0)
  return TrainingOutput(update=list(update), num_examples=num_examples, metrics=sums)


def build_train_fn(model: tf.keras.Model, optimizer: tff.learning.optimizers.Optimizer,
                   objective: Objective) -> Callable[[tff.learning.models.ModelWeights, tf.data.Dataset],
                                                     TrainingOutput]:
  """`local_training` as a `tf.function` (initial_weights, dataset) -> TrainingOutput; build it in a computation."""
  return tf.function(lambda initial_weights, dataset: local_training(model, optimizer, initial_weights, dataset,
                                                                    objective))
