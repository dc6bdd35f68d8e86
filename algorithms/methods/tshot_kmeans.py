"""T-shot k-means: an enhanced one-shot k-means (Dennis et al., 2021) on raw inputs (Section 4 "Baselines").

Collection (rounds 1..T, one period): every participating client runs k-means with K centers on its own raw
inputs and reports the K centers with their sizes; the server keeps all reported centers and clusters them into K
global centers by size-weighted k-means. Routing (every round after T, and at test time): each example goes to the
branch of its nearest global center, in training (cross-entropy on that branch) and in evaluation.

Choices where the paper is silent:
- During the T collection rounds the network trains as Vanilla does (mean of the branches), so the T rounds are not
  lost for training; they count in `--total_rounds`.
- Raw representation: the flattened model input after the task's preprocessing (synthetic: the input vector;
  EMNIST: the 784 pixels; CIFAR: the 24x24x3 standardized crop). Stack Overflow has no meaningful raw vector space
  for k-means (the paper did not run T-shot k-means there either); the method refuses that task.
- Client k-means: farthest-point initialization from the client's first example, then `LLOYD_ITERATIONS` Lloyd
  steps; a center with no example reports size 0. Server k-means: the same on the reported centers weighted by
  their sizes, recomputed each collection round (so the clustering of all centers collected so far is in the state).
- Per-client centers reach the server (`federated_aggregate` with a concatenating accumulator into a buffer of
  T * m * K centers, m = clients per round): like the one-shot method it adapts, this is not aggregation-only.
- Branch k is global center k; the labels are arbitrary, so routing accuracy uses the best matching.
"""

import collections

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from algorithms.core import client_training
from algorithms.core import evaluation
from algorithms.core import learning_process
from algorithms.core import method
from algorithms.core import objectives
from algorithms.core import routing
from models import multi_branch
from tasks import task as task_lib
from utils import settings as settings_lib

NAME = 'tshot_kmeans'
SEEDED_BUILD = False
SENDS = method.Sends(
    method_sums=('centers', 'sizes', 'included'),
    per_client=('centers', 'sizes', 'included'),
    simulation_only=('routing',))
DEFAULTS = method.Defaults(
    {'server_optimizer': 'adam', 'client_epochs': 1},
    source=('Zhu et al., "Diurnal or Nocturnal? Federated Learning of Multi-branch Networks from Periodically '
            'Shifting Distributions", 2022, Table 2 (server optimizer Adam, one local epoch; its rate and epsilon '
            'per dataset are the tasks\' defaults)'))
Config = settings_lib.NoSettings

LLOYD_ITERATIONS = 10
SERVER_LLOYD_ITERATIONS = 30


def raw_inputs(x: tf.Tensor) -> tf.Tensor:
  """The raw representation [N, D]: the flattened model input."""
  return tf.reshape(tf.cast(x, tf.float32), [tf.shape(x)[0], -1])


def weighted_kmeans(points: tf.Tensor, weights: tf.Tensor, num_clusters: int,
                    iterations: int) -> tuple[tf.Tensor, tf.Tensor]:
  """(centers [K, D], sizes [K]) of size-weighted k-means of points [N, D] (N >= 1), weights [N] >= 0.

  Farthest-point initialization from the heaviest point, then Lloyd steps; an empty cluster keeps its center.
  """
  first = points[tf.argmax(weights)]
  centers = [first]
  nearest = tf.reduce_sum(tf.square(points - first), axis=1)
  for _ in range(num_clusters - 1):
    far = points[tf.argmax(tf.where(weights > 0, nearest, -1.0))]
    centers.append(far)
    nearest = tf.minimum(nearest, tf.reduce_sum(tf.square(points - far), axis=1))
  centers = tf.stack(centers)

  def lloyd(centers):
    assignment = tf.one_hot(nearest_center(points, centers), num_clusters) * weights[:, tf.newaxis]  # [N, K]
    sizes = tf.reduce_sum(assignment, axis=0)
    sums = tf.matmul(assignment, points, transpose_a=True)
    return tf.where((sizes > 0)[:, tf.newaxis], sums / tf.maximum(sizes, 1e-12)[:, tf.newaxis], centers), sizes

  for _ in range(iterations):
    centers, _ = lloyd(centers)
  _, sizes = lloyd(centers)
  return centers, sizes


def nearest_center(points: tf.Tensor, centers: tf.Tensor) -> tf.Tensor:
  """argmin_k ||x - c_k|| for points [N, D], centers [K, D]: [N] int32."""
  distances = (tf.reduce_sum(tf.square(points), 1, keepdims=True) - 2.0 * tf.matmul(points, centers, transpose_b=True)
               + tf.reduce_sum(tf.square(centers), 1)[tf.newaxis])
  return tf.argmin(distances, axis=1, output_type=tf.int32)


def routed_objective(centers: tf.Tensor, collecting: tf.Tensor):
  """The training objective: Vanilla's while `collecting`, else cross-entropy of each example's nearest-center
  branch."""

  def objective(outputs, batch):
    averaged = objectives.averaged_branches(outputs, batch)
    branches = nearest_center(raw_inputs(batch['x']), centers)
    logits = tf.gather(outputs[multi_branch.LOGITS], branches, axis=1, batch_dims=1)
    routed = objectives.classification_result(logits, batch)
    return objectives.BatchResult(*[tf.where(collecting, a, b) for a, b in zip(averaged[:-1], routed[:-1])])

  return objective


def build_client_work(model_fn: learning_process.ModelFn, batch_fn: task_lib.BatchFn,
                      client_optimizer: tff.learning.optimizers.Optimizer, element_spec, num_branches: int,
                      num_modes: int, period: int, clients_per_round: int) -> tff.learning.templates.ClientWorkProcess:
  weights_type = learning_process.model_weights_type(model_fn)
  data_type = learning_process.client_data_type(element_spec)
  with tf.Graph().as_default():
    raw_dim = int(np.prod(model_fn().input_shape[1:]))
  capacity = period * clients_per_round * num_branches

  @tff.tensorflow.computation(weights_type, np.float32, tff.TensorType(np.float32, [num_branches, raw_dim]),
                              data_type)
  def client_update(weights, collecting, centers, dataset):
    model = learning_process.client_model(model_fn)

    @tf.function(autograph=False)
    def run(weights, collecting, centers, dataset):
      examples, batches, _ = routing.client_examples(task_lib.model_batches(dataset, batch_fn))
      points = raw_inputs(examples['x'])
      local_centers, local_sizes = weighted_kmeans(points, tf.ones(tf.shape(points)[:1]), num_branches,
                                                   LLOYD_ITERATIONS)
      is_collecting = collecting > 0.0
      training = client_training.local_training(model, client_optimizer, weights, batches,
                                                routed_objective(centers, is_collecting))
      branches = nearest_center(points, centers)
      confusion = tf.matmul(tf.one_hot(examples['mode'], num_modes), tf.one_hot(branches, num_branches),
                            transpose_a=True) * (1.0 - collecting)
      report = collections.OrderedDict(centers=local_centers * collecting, sizes=local_sizes * collecting)
      training = client_training.excluded_unless(training, client_training.all_finite(report))
      report = client_training.exclude_unless(training.finite, report)
      report['included'] = training.finite
      sums = collections.OrderedDict(training.metrics,
                                     routing=client_training.exclude_unless(training.finite, confusion))
      return tff.learning.templates.ClientResult(training.update, training.num_examples), report, sums

    return run(weights, collecting, centers, dataset)

  _, report_type, sums_type = client_update.type_signature.result
  buffer_value = collections.OrderedDict(points=np.zeros([capacity, raw_dim], np.float32),
                                         weights=np.zeros([capacity], np.float32), count=np.int32(0))

  @tff.tensorflow.computation
  def zero():
    return collections.OrderedDict(centers=tf.zeros([0, raw_dim]), sizes=tf.zeros([0]))

  collected_type = tff.StructWithPythonType([('centers', tff.TensorType(np.float32, [None, raw_dim])),
                                              ('sizes', tff.TensorType(np.float32, [None]))], collections.OrderedDict)

  @tff.tensorflow.computation(collected_type, report_type)
  def accumulate(collected, report):
    """Appends the client's K centers, unless the client was left out of the round."""
    included = tf.fill([num_branches], report['included'])
    return collections.OrderedDict(
        centers=tf.concat([collected['centers'], tf.boolean_mask(report['centers'], included)], 0),
        sizes=tf.concat([collected['sizes'], tf.boolean_mask(report['sizes'], included)], 0))

  @tff.tensorflow.computation(collected_type, collected_type)
  def merge(a, b):
    return collections.OrderedDict(centers=tf.concat([a['centers'], b['centers']], 0),
                                   sizes=tf.concat([a['sizes'], b['sizes']], 0))

  @tff.tensorflow.computation(collected_type)
  def report(collected):
    return collected

  state_value = collections.OrderedDict(round_num=np.int64(0), centers=np.zeros([num_branches, raw_dim], np.float32),
                                        buffer=buffer_value)

  @tff.federated_computation
  def initialize():
    return tff.federated_value(state_value, tff.SERVER)

  state_type = initialize.type_signature.result.member

  @tff.tensorflow.computation(np.int64)
  def collecting_in(round_num):
    return tf.cast(round_num + 1 <= period, tf.float32)

  @tff.tensorflow.computation(state_type, collected_type, sums_type)
  def server_update(state, collected, sums):
    buffer = state['buffer']
    new = tf.shape(collected['sizes'])[0]
    indices = tf.minimum(buffer['count'] + tf.range(new), capacity - 1)[:, tf.newaxis]
    points = tf.tensor_scatter_nd_update(buffer['points'], indices, collected['centers'])
    weights = tf.tensor_scatter_nd_update(buffer['weights'], indices, collected['sizes'])
    count = tf.minimum(buffer['count'] + new, capacity)
    collecting = state['round_num'] + 1 <= period
    centers = tf.cond(collecting & (count > 0),
                      lambda: weighted_kmeans(points, weights, num_branches, SERVER_LLOYD_ITERATIONS)[0],
                      lambda: state['centers'])
    metrics = collections.OrderedDict(
        client_training.finalize_train_metrics(sums),
        **routing.train_routing_metrics(sums['routing'], best_matching=True),
        collected_centers=tf.cast(count, tf.float32))
    new_state = collections.OrderedDict(round_num=state['round_num'] + 1, centers=centers,
                                        buffer=collections.OrderedDict(points=points, weights=weights, count=count))
    return new_state, metrics

  @tff.federated_computation(initialize.type_signature.result, tff.FederatedType(weights_type, tff.CLIENTS),
                             tff.FederatedType(data_type, tff.CLIENTS))
  def next_fn(state, weights, client_data):
    collecting = tff.federated_map(collecting_in, state.round_num)
    result, reports, sums = tff.federated_map(client_update, (
        weights, tff.federated_broadcast(collecting), tff.federated_broadcast(state.centers), client_data))
    collected = tff.federated_aggregate(reports, zero(), accumulate, merge, report)
    new_state, measurements = tff.federated_map(server_update, (state, collected, tff.federated_sum(sums)))
    return tff.templates.MeasuredProcessOutput(new_state, result, measurements)

  return tff.learning.templates.ClientWorkProcess(initialize, next_fn)


def build_process(model_fn, batch_fn, element_spec, client_learning_rate, server_step,
                  num_branches, num_modes, period, clients_per_round) -> tff.learning.templates.LearningProcess:
  client_work = build_client_work(model_fn, batch_fn, tff.learning.optimizers.build_sgdm(client_learning_rate),
                                  element_spec, num_branches, num_modes, period, clients_per_round)
  return learning_process.compose(model_fn, client_work, server_step)


def evaluation_objective(num_modes: int, num_branches: int):
  """objective(outputs, batch, centers): every test example to its nearest center's branch."""

  def objective(outputs, batch, centers):
    branches = nearest_center(raw_inputs(batch['x']), centers)
    return routing.routed_result(outputs, batch, branches, num_modes, num_branches)

  return objective


def build_algorithm(task: task_lib.Task, element_spec, hparams: method.Hyperparameters,
                    evaluator: evaluation.Evaluator, config: Config) -> method.Algorithm:
  """T-shot k-means' process; test examples routed by their nearest global center (best matching of branches)."""
  config.validate()
  process = build_process(*method.process_args(task, element_spec, hparams), hparams.num_branches, task.num_modes,
                          hparams.period, hparams.clients_per_round)
  evaluate = evaluation.routed_evaluation(evaluator, evaluation_objective(task.num_modes, hparams.num_branches),
                                          lambda state: (state['centers'],), [task.num_modes, hparams.num_branches],
                                          best_matching=True)
  return method.Algorithm(process, evaluate)
