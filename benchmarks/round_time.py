"""Seconds per round of `vanilla` on the synthetic task against two references, in one run.

  (ours)  the suite's vanilla learning process (its client work composed with TFF's broadcast, mean and FedAdam);
  (a)     TFF's own `tff.learning.algorithms.build_weighted_fed_avg` on the same network (a Keras view whose output is
          the mean of the branches, through `tff.learning.models.from_keras_model`), same optimizers;
  (b)     a plain TensorFlow loop running the same client SGD steps on the same batches, with no federation: one
          `tf.function` step per batch over batches materialized in memory beforehand, then the mean update.

All three train on the same clients and batches: the round datasets are built before timing, so only training
is timed. Prints seconds per round and the ratios ours / (a) and ours / (b).

    bazel run //benchmarks:round_time -- --rounds=30
"""

import collections
import os

# Quiet TensorFlow C++ logs here and in TFF's worker process (set TF_CPP_MIN_LOG_LEVEL=0 to see them).
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

from absl import app
from absl import flags
import tensorflow as tf
import tensorflow_federated as tff

from algorithms.core import objectives
from algorithms.methods import vanilla
from benchmarks import timing
from models import multi_branch
from tasks import synthetic
from tasks import task as task_lib
from utils import execution_context

_ROUNDS = flags.DEFINE_integer('rounds', 30, 'Timed rounds (after the warm-up rounds).')
_CLIENTS_PER_ROUND = flags.DEFINE_integer('clients_per_round', 10, 'Clients per round.')
_CLIENT_LR, _SERVER_LR, _EPSILON = 0.05, 0.01, 1e-4


def _time_ours(task, model_fn, rounds):
  process = vanilla.build_process(model_fn, task.batch_fn, rounds[0][0].element_spec, _CLIENT_LR, _SERVER_LR,
                                  _EPSILON)
  state = [process.initialize()]

  def step(datasets):
    state[0] = process.next(state[0], datasets).state

  return timing.seconds_per_round(step, rounds)


def _averaged_keras_model(model_fn):
  model = model_fn()
  averaged = tf.keras.layers.Lambda(multi_branch.average_branch_logits)(model.outputs[1])
  return tf.keras.Model(model.inputs, averaged)


def _time_tff_fedavg(model_fn, rounds):
  as_xy = lambda raw, mode: collections.OrderedDict(x=raw['x'], y=raw['y'])
  xy_rounds = [[d.map(as_xy) for d in datasets] for datasets in rounds]
  input_spec = xy_rounds[0][0].element_spec

  def tff_model_fn():
    return tff.learning.models.from_keras_model(
        _averaged_keras_model(model_fn), input_spec=input_spec,
        loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=[tf.keras.metrics.SparseCategoricalAccuracy()])

  process = tff.learning.algorithms.build_weighted_fed_avg(
      tff_model_fn, client_optimizer_fn=tff.learning.optimizers.build_sgdm(_CLIENT_LR),
      server_optimizer_fn=tff.learning.optimizers.build_adam(_SERVER_LR, epsilon=_EPSILON))
  state = [process.initialize()]

  def step(datasets):
    state[0] = process.next(state[0], datasets).state

  return timing.seconds_per_round(step, xy_rounds)


def _time_plain_tf(task, model_fn, rounds):
  """Eager loop over pre-materialized batches; one `tf.function` SGD step per batch; mean of the deltas."""
  model = model_fn()
  variables = model.trainable_variables
  initial = [v.numpy() for v in variables]

  @tf.function
  def sgd_step(x, y):
    with tf.GradientTape() as tape:
      loss = objectives.averaged_branches(model(x, training=True), {'y': y}).loss
    for variable, gradient in zip(variables, tape.gradient(loss, variables)):
      variable.assign_sub(_CLIENT_LR * gradient)

  batch_rounds = [[[(b['x'], b['y']) for b in task_lib.model_batches(d, task.batch_fn)] for d in datasets]
                  for datasets in rounds]

  def step(clients):
    deltas = []
    for batches in clients:
      for variable, value in zip(variables, initial):
        variable.assign(value)
      for x, y in batches:
        sgd_step(x, y)
      deltas.append([value - variable for variable, value in zip(variables, initial)])
    return [tf.reduce_mean(layer, axis=0) for layer in zip(*deltas)]

  return timing.seconds_per_round(step, batch_rounds)


def main(argv):
  del argv  # Unused.
  execution_context.install()
  tf.get_logger().setLevel('ERROR')
  task = synthetic.create_task(seed=0)
  model_fn = lambda: task.model_fn(2)
  rounds = timing.round_datasets(task, _ROUNDS.value + timing.WARMUP_ROUNDS, _CLIENTS_PER_ROUND.value)
  ours = _time_ours(task, model_fn, rounds)
  tff_fedavg = _time_tff_fedavg(model_fn, rounds)
  plain = _time_plain_tf(task, model_fn, rounds)
  print(f'clients/round {_CLIENTS_PER_ROUND.value}, batch {timing.BATCH_SIZE}, {_ROUNDS.value} timed rounds')
  print(f'ours (vanilla):                     {ours:.4f} s/round')
  print(f'(a) tff build_weighted_fed_avg:     {tff_fedavg:.4f} s/round   ours / (a) = {ours / tff_fedavg:.2f}')
  print(f'(b) plain TF, same client steps:    {plain:.4f} s/round   ours / (b) = {ours / plain:.2f}')


if __name__ == '__main__':
  app.run(main)
