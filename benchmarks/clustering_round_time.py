"""FedTEM's and FedTKM's cost per round against Vanilla's, and against the bound set by their extra work.

For each of two workloads, the synthetic task and EMNIST-shaped data (random 28x28 images, 62 classes, clients of
100-200 examples, the paper's EMNIST CNN), on the same clients and batches:

  ratio  = (method s/round) / (Vanilla s/round), all as TFF learning processes;
  bound  = (one training epoch + the two inference passes) / (one training epoch), in plain TensorFlow: what both
           methods add on each client is one inference pass before and one after training (each over the whole
           client's data in one batch, as they run them).

    bazel run //benchmarks:clustering_round_time -- --rounds=20
"""

import os

# Quiet TensorFlow C++ logs here and in TFF's worker process (set TF_CPP_MIN_LOG_LEVEL=0 to see them).
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

from absl import app
from absl import flags
import tensorflow as tf

from algorithms.core import learning_process
from algorithms.core import objectives
from algorithms.methods import fedtem
from algorithms.methods import fedtkm
from algorithms.methods import vanilla
from benchmarks import timing
from models import multi_branch
from tasks import task as task_lib
from utils import execution_context

_ROUNDS = flags.DEFINE_integer('rounds', 20, 'Timed rounds (after 3 warm-up rounds).')
_CLIENTS_PER_ROUND = flags.DEFINE_integer('clients_per_round', 10, 'Clients per round.')
_CLIENT_LR, _SERVER_LR, _EPSILON = 0.05, 0.01, 1e-4
_SERVER_STEP = learning_process.ServerStep.named('adam', _SERVER_LR, _EPSILON)


def _process_seconds(process, model_fn, rounds):
  state = [process.set_model_weights(process.initialize(), learning_process.initial_weights(model_fn, 0))]

  def step(datasets):
    state[0] = process.next(state[0], datasets).state

  return timing.seconds_per_round(step, rounds)


def _plain_tf_bound(task, model_fn, rounds):
  """(train epoch + 2 inference passes) / (train epoch) on the same clients, eager TF with tf.function steps."""
  model = model_fn()
  variables = model.trainable_variables

  @tf.function(reduce_retracing=True)  # Client sizes vary: trace once for any batch size.
  def sgd_step(x, y):
    with tf.GradientTape() as tape:
      loss = objectives.averaged_branches(model(x, training=True), {'y': y}).loss
    for variable, gradient in zip(variables, tape.gradient(loss, variables)):
      variable.assign_sub(_CLIENT_LR * gradient)

  @tf.function(reduce_retracing=True)
  def features(x):
    return model(x, training=False)[multi_branch.FEATURES]

  clients = [[(b['x'], b['y']) for b in task_lib.model_batches(d, task.batch_fn)]
             for datasets in rounds for d in datasets]
  inference = [[tf.concat([x for x, _ in batches], 0)] for batches in clients]
  train = timing.seconds_per_round(lambda c: [sgd_step(x, y) for x, y in c], clients)
  infer = timing.seconds_per_round(lambda c: [features(x) for x in c], inference)
  return (train + 2 * infer) / train


def _measure(task, model_fn, rounds):
  """Vanilla's s/round, {method: s/round}, and the bound, on the same rounds of clients."""
  element_spec = rounds[0][0].element_spec
  args = (model_fn, task.batch_fn, element_spec, _CLIENT_LR, _SERVER_STEP)
  vanilla_seconds = _process_seconds(vanilla.build_process(*args), model_fn, rounds)
  method_seconds = {
      'fedtem': _process_seconds(fedtem.build_process(*args, 2, 2, fedtem.Config(period=32)), model_fn, rounds),
      'fedtkm': _process_seconds(fedtkm.build_process(*args, 2, 2, fedtkm.Config(period=32)), model_fn, rounds),
  }
  return vanilla_seconds, method_seconds, _plain_tf_bound(task, model_fn, rounds)


def main(argv):
  del argv  # Unused.
  execution_context.install()
  tf.get_logger().setLevel('ERROR')
  print(f'clients/round {_CLIENTS_PER_ROUND.value}, {_ROUNDS.value} timed rounds')
  for name in ('synthetic', 'emnist_shaped'):
    task, rounds = timing.periodic_workload(name, _ROUNDS.value + timing.WARMUP_ROUNDS, _CLIENTS_PER_ROUND.value)
    vanilla_seconds, method_seconds, bound = _measure(task, lambda task=task: task.model_fn(2), rounds)
    print(f'{name:14s} vanilla {vanilla_seconds:.3f} s/round  bound {bound:.2f}')
    for method, seconds in method_seconds.items():
      ratio = seconds / vanilla_seconds
      print(f'{"":14s} {method} {seconds:.3f} s/round  ratio {ratio:.2f}  ratio/bound {ratio / bound:.2f}')


if __name__ == '__main__':
  app.run(main)
