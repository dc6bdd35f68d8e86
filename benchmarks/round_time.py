"""Seconds per round of `vanilla` against three references on every task shape, in one run.

  (ours)  the suite's vanilla learning process (its client work composed with TFF's broadcast, mean and FedAdam),
          run as the training loop runs it, with its state kept on TFF's worker (`utils.resident_state`); also
          with the whole state going to the worker and back every round (`--state_on_worker=false`), and the MiB
          each way per round of both (`timing.WorkerTraffic`);
  (a)     TFF's own `tff.learning.algorithms.build_weighted_fed_avg` on the same network (a Keras view whose output is
          the mean of the branches, through `tff.learning.models.from_keras_model`), same optimizers, Keras's loss
          (on Stack Overflow without the suite's mask of padding tokens: the same compute, another loss value);
  (b)     a plain TensorFlow loop running the same client steps on the same batches, with no federation: one
          `tf.function` step per batch (the suite's objective) over batches materialized in memory beforehand,
          then the mean update;
  (c)     (b) reading the clients' input pipelines (files, parsing, shuffling, the task's batch function) inside the
          timed round, as the suite's worker does, instead of batches materialized beforehand.

Task shapes: `synthetic` (its 7.5k-parameter MLP), and the paper's tasks at Table 2 settings on files of the real
layouts and client sizes (`benchmarks.task_files`; the real files cannot be downloaded here): `emnist` (LeNet,
1.2M parameters, 10 clients, batch 20), `cifar` (ResNet-18 GN, 11.3M, 10 clients, batch 20), `stackoverflow`
(LSTM, 4.1M, 50 clients of at most 512 sentences, batch 16). All implementations train on the same clients and
batches: the round datasets are built before timing. All use both cores (TF's default thread pools, in this process
for (b) and (c) and in TFF's worker for (ours) and (a)).

    bazel run //benchmarks:round_time -- --rounds=10 --tasks=synthetic,emnist
    bazel run //benchmarks:round_time -- --rounds=3 --tasks=cifar,stackoverflow
"""

import collections
import os
import tempfile

# Quiet TensorFlow C++ logs here and in TFF's worker process (set TF_CPP_MIN_LOG_LEVEL=0 to see them).
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

from absl import app
from absl import flags
import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from algorithms.core import learning_process
from algorithms.methods import vanilla
from benchmarks import task_files
from benchmarks import timing
from models import multi_branch
from tasks import registry
from utils import execution_context

_ROUNDS = flags.DEFINE_integer('rounds', 10, 'Timed rounds per implementation (after the warm-up rounds).')
_TASKS = flags.DEFINE_list('tasks', ['synthetic', 'emnist', 'cifar', 'stackoverflow'], 'Task shapes to time.')


def _time_ours(task, model_fn, rounds, defaults) -> dict:
  """Seconds per round and MiB to and from the worker in a round, with the state on the worker (`resident`) and
  going there and back (`round_trip`)."""
  process = vanilla.build_process(model_fn, task.batch_fn, rounds[0][0].element_spec,
                                  defaults['client_learning_rate'],
                                  learning_process.ServerStep.named('adam', defaults['server_learning_rate'],
                                                                    defaults['server_adam_epsilon']))
  result = {}
  for name, on_worker in (('resident', True), ('round_trip', False)):
    step = timing.process_step(model_fn, process, on_worker)
    result[name] = (timing.seconds_per_round(step, rounds), *timing.mebibytes_per_round(step, rounds[-1]))
  return result


def _averaged_keras_model(model_fn):
  model = model_fn()
  averaged = tf.keras.layers.Lambda(multi_branch.average_branch_logits)(model.outputs[1])
  return tf.keras.Model(model.inputs, averaged)


def _time_tff_fedavg(task, model_fn, rounds, defaults):
  as_xy = lambda raw, mode: collections.OrderedDict((key, task.batch_fn(raw)[key]) for key in ('x', 'y'))
  xy_rounds = [[d.map(as_xy) for d in datasets] for datasets in rounds]
  input_spec = xy_rounds[0][0].element_spec

  def tff_model_fn():
    return tff.learning.models.from_keras_model(
        _averaged_keras_model(model_fn), input_spec=input_spec,
        loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=[tf.keras.metrics.SparseCategoricalAccuracy()])

  process = tff.learning.algorithms.build_weighted_fed_avg(
      tff_model_fn, client_optimizer_fn=tff.learning.optimizers.build_sgdm(defaults['client_learning_rate']),
      server_optimizer_fn=tff.learning.optimizers.build_adam(defaults['server_learning_rate'],
                                                            epsilon=defaults['server_adam_epsilon']))
  state = [process.initialize()]

  def step(datasets):
    state[0] = process.next(state[0], datasets).state

  return timing.seconds_per_round(step, xy_rounds)


def main(argv):
  del argv  # Unused.
  execution_context.install()
  tf.get_logger().setLevel('ERROR')
  print(f'{_ROUNDS.value} timed rounds per cell; seconds per round and ours / reference', flush=True)
  with tempfile.TemporaryDirectory() as cache_dir:
    for name in _TASKS.value:
      if name != 'synthetic':
        task_files.write(name, cache_dir, np.random.default_rng(0))
      defaults = registry.defaults(name)
      task, rounds = timing.run_data(name, 'periodic', None, _ROUNDS.value + timing.WARMUP_ROUNDS,
                                     defaults['clients_per_round'], defaults['client_batch_size'], cache_dir)
      model_fn = lambda task=task: task.model_fn(2)
      ours = _time_ours(task, model_fn, rounds, defaults)
      tff_fedavg = _time_tff_fedavg(task, model_fn, rounds, defaults)
      learning_rate = defaults['client_learning_rate']
      plain = timing.seconds_per_round(*timing.plain_tf_step(model_fn, task.batch_fn, rounds, learning_rate))
      reading = timing.seconds_per_round(*timing.plain_tf_step(model_fn, task.batch_fn, rounds, learning_rate,
                                                               read_in_round=True))
      (resident, resident_out, resident_in), (trip, trip_out, trip_in) = ours['resident'], ours['round_trip']
      print(f'{name:14s} ours {resident:.4f} s | (a) tff fedavg {tff_fedavg:.4f} s, '
            f'ours/(a) {resident / tff_fedavg:.2f} | (b) plain TF {plain:.4f} s, ours/(b) {resident / plain:.2f} '
            f'| (c) plain TF reading the clients\' data '
            f'{reading:.4f} s, ours/(c) {resident / reading:.2f}  ({defaults["clients_per_round"]} clients, batch '
            f'{defaults["client_batch_size"]})\n{"":14s} state on the worker: {resident_out:.1f} MiB out, '
            f'{resident_in:.1f} MiB back per round | state there and back: {trip:.4f} s, ours/(b) {trip / plain:.2f}, '
            f'{trip_out:.1f} MiB out, {trip_in:.1f} MiB back', flush=True)


if __name__ == '__main__':
  app.run(main)
