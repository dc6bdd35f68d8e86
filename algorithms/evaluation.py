"""Centralized test evaluation of a multi-branch model, per mode and over all modes.

Test data is centralized (as in the paper), so evaluation runs in plain TensorFlow outside TFF. A method supplies
the per-batch `objective` that turns model outputs into predictions (Vanilla: the mean of the branches; clustering
methods: the branch their clustering model selects). Accuracy over all modes pools the per-mode sums, so it is
the accuracy on the union test set.

Scenarios with per-client held-out data (`periodic_shift.scenario.Scenario.evaluation_plans`, e.g. seed 004's
test split of every client) add datasets whose batches each hold one client's examples; their metrics
(`<name>_accuracy`, `<name>_loss`, e.g. `personalized_accuracy`) are example-weighted over all clients and are
not pooled into the union test set.
"""

from typing import Callable, Optional

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from algorithms import client_training
from algorithms import objectives
from algorithms import routing

Objective = Callable[[dict, dict], objectives.BatchResult]


class Evaluator:
  """Evaluates model weights on a task's per-mode test sets."""

  def __init__(self, model: tf.keras.Model, test_datasets: dict[str, tf.data.Dataset],
               held_out_datasets: Optional[dict[str, tf.data.Dataset]] = None):
    """`test_datasets`: mode name -> batched test dataset (`tasks.task.Task.test_dataset`); `held_out_datasets`:
    name -> batches of clients' own held-out data (`tasks.task.Task.held_out_dataset`)."""
    self._model = model
    self._weights = tff.learning.models.ModelWeights.from_model(model)
    self._test_datasets = test_datasets
    self._held_out_datasets = held_out_datasets or {}
    self._evaluate_sums = tf.function(self._sums)

  def with_model(self, model: tf.keras.Model) -> 'Evaluator':
    """An evaluator of the same test data for another network (a method whose model is not the task's)."""
    return Evaluator(model, self._test_datasets, self._held_out_datasets)

  def _sums(self, dataset: tf.data.Dataset, objective: Objective, routing_shape, objective_args) -> dict:

    def step(sums, batch):
      result = objective(self._model(batch['x'], training=False), batch, *objective_args)
      return tf.nest.map_structure(tf.add, sums, client_training.metric_sums(result))

    return dataset.reduce(client_training.zero_metric_sums(routing_shape), step)

  def evaluate(self, weights: tff.learning.models.ModelWeights, objective: Objective, routing_shape=None,
               objective_args=()) -> dict:
    """Returns test_loss, test_accuracy and test_<mode>_{loss,accuracy} for every mode.

    `objective(outputs, batch, *objective_args)` gives each batch's metrics; passing state such as a clustering
    model as `objective_args` (tensors) rather than in a closure lets the traced evaluation be reused. With
    `routing_shape` ([modes, branches]) the objective reports routing counts, returned summed over all test data
    as `test_routing` (numpy).
    """
    tf.nest.map_structure(lambda variable, value: variable.assign(value), self._weights, weights)
    metrics, total = {}, None
    for name, dataset in self._test_datasets.items():
      sums = self._evaluate_sums(dataset, objective, routing_shape, tuple(objective_args))
      sums = {key: np.asarray(value) for key, value in sums.items()}
      metrics.update(_finalize(sums, prefix=f'test_{name}_'))
      total = sums if total is None else {key: total[key] + sums[key] for key in sums}
    metrics.update(_finalize(total, prefix='test_'))
    for name, dataset in self._held_out_datasets.items():
      sums = self._evaluate_sums(dataset, objective, routing_shape, tuple(objective_args))
      metrics.update(_finalize({key: np.asarray(value) for key, value in sums.items()}, prefix=f'{name}_'))
    if routing_shape is not None:
      metrics['test_routing'] = total['routing']
    return metrics


def _finalize(sums: dict, prefix: str) -> dict[str, float]:
  return {f'{prefix}loss': float(sums['loss_sum']) / max(float(sums['num_examples']), 1.0),
          f'{prefix}accuracy': float(sums['num_correct']) / max(float(sums['num_predictions']), 1.0)}


def routed_evaluation(process: tff.learning.templates.LearningProcess, evaluator: Evaluator, objective: Objective,
                      objective_args_fn: Callable[[object], tuple], routing_shape, best_matching: bool):
  """evaluate(state) for a method that routes test examples to branches: the evaluator's metrics plus
  `routing_accuracy` (under the best matching of domains to branches when `best_matching`) and `routing_ari`.
  `objective_args_fn(client work state)` gives the objective's extra arguments (its clustering model)."""

  def evaluate(state):
    metrics = evaluator.evaluate(process.get_model_weights(state), objective, routing_shape=routing_shape,
                                 objective_args=objective_args_fn(state.client_work))
    confusion = metrics.pop('test_routing').astype(np.float32)
    metrics['routing_accuracy'] = float(routing.routing_accuracy(confusion, best_matching=best_matching))
    metrics['routing_ari'] = float(routing.adjusted_rand_index(confusion))
    return metrics

  return evaluate
