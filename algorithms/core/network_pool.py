"""Server edits of a pool of networks between rounds: copies and weighted averages of whole networks.

A method whose networks form a pool that the server reshapes (ShiftEx's experts, Bhope et al., 2025, Algorithm 2: a new
expert is `Clone(theta_0)`, line 22, and two similar experts become their weighted average, line 38) needs to set a
network's weights at the server. Under the suite's composition only the finalizer moves the weights, and FedAdam
moves a network whose aggregated update is zero as long as its moments are not (the momentum of earlier rounds), so
neither a copy nor an average can be made through client updates. `with_server_step` appends one typed server step
to a composed learning process:

  next'(state, data) = step(process.next(state, data).state), with the step's metrics added to the client work's.

The edit itself is a mixing matrix A [K, K] over the K networks of a `models.multi_branch.build_multi_network_model`
(`mixed_state`): network k's tensors become sum_s A[k, s] (network s's), and the FedAdam moments of every network
whose row of A is not the identity's are reset to zero, so a copied or merged network starts its optimizer afresh
and a network with zero moments and zero updates stays exactly where it is (a frozen copy).
"""

import collections
from typing import Callable

import tensorflow as tf
import tensorflow_federated as tff

from algorithms.core import client_training
from algorithms.core import objectives
from models import multi_branch

MOMENTS = ('accumulator', 'preconditioner')  # FedAdam's moments (`tff.learning.optimizers.build_adam`).


def network_index(model: tf.keras.Model, num_networks: int) -> tuple[list[list[int]], list[list[int]]]:
  """(trainable, non_trainable): index[k][j], the position in `ModelWeights.trainable` / `.non_trainable` of
  network k's j-th tensor (layers `network_1` ... `network_K`)."""
  weights = tff.learning.models.ModelWeights.from_model(model)
  indices = []
  for part, attribute in ((weights.trainable, 'trainable_variables'),
                          (weights.non_trainable, 'non_trainable_variables')):
    position = {variable.ref(): i for i, variable in enumerate(part)}
    indices.append([[position[v.ref()] for v in getattr(model.get_layer(f'network_{k + 1}'), attribute)]
                    for k in range(num_networks)])
  return indices[0], indices[1]


def mix(values: list, index: list[list[int]], mixing: tf.Tensor) -> list:
  """`values` (tensors in ModelWeights order) with network k's tensors replaced by sum_s mixing[k, s] values_s."""
  values = list(values)
  for j in range(len(index[0]) if index else 0):
    stacked = tf.stack([values[index[s][j]] for s in range(len(index))])  # [K, ...]
    mixed = tf.tensordot(tf.cast(mixing, stacked.dtype), stacked, axes=1)
    for k in range(len(index)):
      values[index[k][j]] = mixed[k]
  return values


def changed_rows(mixing: tf.Tensor) -> tf.Tensor:
  """bool [K]: the networks an edit changes (their row of A differs from the identity's)."""
  return tf.reduce_any(tf.not_equal(mixing, tf.eye(tf.shape(mixing)[0], dtype=mixing.dtype)), axis=1)


def mixed_state(state: tff.learning.templates.LearningAlgorithmState, trainable_index, non_trainable_index,
                mixing: tf.Tensor) -> tff.learning.templates.LearningAlgorithmState:
  """The learning-process state with its networks mixed by A and the changed networks' FedAdam moments (if the
  server step keeps any) zeroed."""
  weights = state.global_model_weights
  new_weights = tff.learning.models.ModelWeights(
      trainable=mix(weights.trainable, trainable_index, mixing),
      non_trainable=mix(weights.non_trainable, non_trainable_index, mixing))
  changed = changed_rows(mixing)
  finalizer = collections.OrderedDict(state.finalizer)
  for name in (name for name in MOMENTS if name in finalizer):  # A plain SGD server step keeps no moments.
    moments = list(finalizer[name])
    for k, positions in enumerate(trainable_index):
      for i in positions:
        moments[i] = tf.where(changed[k], tf.zeros_like(moments[i]), moments[i])
    finalizer[name] = moments
  return state._replace(global_model_weights=new_weights, finalizer=finalizer)


def train_network(model: tf.keras.Model, optimizer, weights: tff.learning.models.ModelWeights, batches,
                  slot: tf.Tensor, trainable_index, non_trainable_index,
                  num_trained: int) -> client_training.TrainingOutput:
  """Local training of network `slot` (< num_trained) of the pool alone on `batches`, inside the client's
  `tf.function`: the output's update holds that network's trainable tensors only."""

  def train(k):
    def run():
      initial = tff.learning.models.ModelWeights(
          trainable=[weights.trainable[i] for i in trainable_index[k]],
          non_trainable=[weights.non_trainable[i] for i in non_trainable_index[k]])
      output = client_training.local_training(
          model.get_layer(f'network_{k + 1}'), optimizer, initial, batches,
          lambda outputs, batch: objectives.classification_result(outputs[multi_branch.LOGITS][:, 0], batch))
      return tuple(output)
    return run

  return client_training.TrainingOutput(*tf.switch_case(slot, [train(k) for k in range(num_trained)]))


def pool_result(update: list, slot: tf.Tensor, weight: tf.Tensor, trainable_index,
                num_tensors: int) -> tff.learning.templates.ClientResult:
  """A client's result for the whole pool from the update of network `slot` (`train_network`): that network's
  tensors carry the update with aggregation weight `weight` (per tensor, `algorithms.core.per_tensor_mean`), every
  other network's carry zeros with weight 0."""
  full_update, full_weight = [None] * num_tensors, [None] * num_tensors
  for k, positions in enumerate(trainable_index):
    mine = tf.equal(slot, k)
    for j, i in enumerate(positions):
      full_update[i] = tf.where(mine, update[j], tf.zeros_like(update[j]))
      full_weight[i] = weight * tf.cast(mine, tf.float32)
  return tff.learning.templates.ClientResult(full_update, full_weight)


def with_server_step(process: tff.learning.templates.LearningProcess,
                     step: Callable) -> tff.learning.templates.LearningProcess:
  """`process` followed by `step` at the server after every round.

  `step` is a TF function (LearningAlgorithmState) -> (LearningAlgorithmState, metrics dict); its metrics join the
  client work's measurements.
  """
  state_type = process.next.type_signature.result.state.member
  metrics_type = process.next.type_signature.result.metrics.member
  step_computation = tff.tensorflow.computation(step, state_type)

  @tff.tensorflow.computation(metrics_type, step_computation.type_signature.result[1])
  def merge_metrics(metrics, step_metrics):
    return collections.OrderedDict(
        metrics, client_work=collections.OrderedDict(metrics['client_work'], **step_metrics))

  @tff.federated_computation(process.next.type_signature.parameter)
  def next_fn(state, client_data):
    output = process.next(state, client_data)
    new_state, step_metrics = tff.federated_map(step_computation, output.state)
    return tff.learning.templates.LearningProcessOutput(
        new_state, tff.federated_map(merge_metrics, (output.metrics, step_metrics)))

  return tff.learning.templates.LearningProcess(process.initialize, next_fn, process.get_model_weights,
                                                process.set_model_weights)
