"""What each common corruption costs a FedAvg model trained on clean data: the drop at a windowed scenario's boundary,
per family and severity (CIFAR-10-C's families and ladders, Hendrycks and Dietterich, "Benchmarking Neural Network
Robustness to Common Corruptions and Perturbations", 2019; `periodic_shift.domains`).

A model is trained by TFF's FedAvg (`tff.learning.algorithms.build_weighted_fed_avg`: client SGD at the task's client
learning rate, one epoch, batches of the task's client_batch_size; server SGD at rate 1) for --rounds rounds of
--clients_per_round clients drawn from every base's clean clients, then tested on every base's test data, clean and
under each family at each severity 1-5 (one family at a time). Printed as two markdown tables: the clean accuracy and,
per family and severity, the accuracy it loses (clean - corrupted), mean +- standard error over --seeds models.

  bazel run //benchmarks:corruption_drop -- --task=digits
  bazel run //benchmarks:corruption_drop -- --task=emnist --real_digits   # real digits in EMNIST's layout
"""

import tempfile

from absl import app
from absl import flags
import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from benchmarks import task_files
from models import multi_branch
from periodic_shift import domains as domains_lib
from tasks import registry
from tasks import task as task_lib
from utils import execution_context

_TASK = flags.DEFINE_string('task', 'digits', 'An image task of the registry.')
_CACHE_DIR = flags.DEFINE_string('cache_dir', None, 'Where the task reads its files (tasks that read files).')
_REAL_DIGITS = flags.DEFINE_bool('real_digits', False, 'Write real digits in EMNIST\'s layout to a temporary '
                                 'directory and read them (--task=emnist; benchmarks.task_files).')
_ROUNDS = flags.DEFINE_integer('rounds', 100, 'FedAvg rounds on the clean clients.')
_CLIENTS = flags.DEFINE_integer('clients_per_round', 10, 'Clients a round.')
_SEEDS = flags.DEFINE_integer('seeds', 3, 'Models trained (seeds 0 .. N-1).')
_FAMILIES = flags.DEFINE_list('families', list(domains_lib.COMMON_CORRUPTIONS), 'Corruption families.')


def _client_datasets(task: task_lib.Task, batch_size: int) -> list[tf.data.Dataset]:
  """Every base's clients, each as batches of (x, y)."""
  return [task.train_data[base].create_tf_dataset_for_client(client_id).batch(batch_size).map(task.batch_fn).map(
      lambda batch: (batch['x'], batch['y']))
          for base, ids in enumerate(task.mode_client_ids()) for client_id in ids]


def _classifier(task: task_lib.Task) -> tf.keras.Model:
  """The task's network, its first branch's logits."""
  network = task.model_fn(1)
  inputs = tf.keras.Input(network.input_shape[1:])
  return tf.keras.Model(inputs, network(inputs)[multi_branch.LOGITS][:, 0])


def _train(task: task_lib.Task, seed: int) -> tf.keras.Model:
  defaults = registry.defaults(task.name)
  clients = _client_datasets(task, defaults['client_batch_size'])
  spec = clients[0].element_spec

  def model_fn():
    return tff.learning.models.from_keras_model(
        _classifier(task), input_spec=spec, loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))

  process = tff.learning.algorithms.build_weighted_fed_avg(
      model_fn, client_optimizer_fn=tff.learning.optimizers.build_sgdm(defaults['client_learning_rate']),
      server_optimizer_fn=tff.learning.optimizers.build_sgdm(1.0))
  state = process.initialize()
  rng = np.random.default_rng(seed)
  for _ in range(_ROUNDS.value):
    chosen = rng.choice(len(clients), min(_CLIENTS.value, len(clients)), replace=False)
    state = process.next(state, [clients[i].shuffle(1000, seed=int(rng.integers(2**31))) for i in chosen]).state
  model = _classifier(task)
  process.get_model_weights(state).assign_weights_to(model)
  return model


def _accuracy(model: tf.keras.Model, task: task_lib.Task, domain: domains_lib.Domain) -> float:
  """Accuracy on every base's test data under `domain`'s corruption."""
  transform = domains_lib.DomainTransform([domain], task.num_classes, task.input_range)
  correct = total = 0
  for test in task.test_data:
    for batch in test.batch(256).map(task.batch_fn):
      batch = transform(batch, tf.zeros_like(batch['y']))
      predicted = tf.argmax(model(batch['x'], training=False), -1, output_type=tf.int32)
      correct += int(tf.reduce_sum(tf.cast(tf.equal(predicted, tf.cast(batch['y'], tf.int32)), tf.int32)))
      total += int(tf.size(batch['y']))
  return correct / total


def _table(clean: np.ndarray, drops: dict) -> str:
  mean = lambda values: f'{np.mean(values):.3f} +- {np.std(values, ddof=1) / np.sqrt(len(values)) if len(values) > 1 else 0:.3f}'
  lines = ['| models | clean accuracy |', '|---|---|', f'| {len(clean)} | {mean(clean)} |', '',
           '| family | ' + ' | '.join(f'severity {s}' for s in range(1, 6)) + ' |', '|---' * 6 + '|']
  for family in _FAMILIES.value:
    lines.append(f'| {family} | ' + ' | '.join(mean(drops[family, s]) for s in range(1, 6)) + ' |')
  return '\n'.join(lines)


def main(argv):
  del argv  # Unused.
  execution_context.install()  # TFF's worker on loopback only, and ended with this process.
  cache_dir = _CACHE_DIR.value
  if _REAL_DIGITS.value:
    cache_dir = tempfile.mkdtemp()
    task_files.write('emnist_real_digits', cache_dir, np.random.default_rng(0))
  clean, drops = [], {(f, s): [] for f in _FAMILIES.value for s in range(1, 6)}
  for seed in range(_SEEDS.value):
    tf.keras.utils.set_random_seed(seed)
    task = registry.create(_TASK.value, files=task_lib.DataFiles(cache_dir=cache_dir), seed=seed)
    model = _train(task, seed)
    clean.append(_accuracy(model, task, domains_lib.Domain('clean', 0)))
    for family, severity in drops:
      corrupted = domains_lib.Domain(f'{family}{severity}', 0, corruption=family, severity=severity)
      drops[family, severity].append(clean[-1] - _accuracy(model, task, corrupted))
    print(f'seed {seed}: clean accuracy {clean[-1]:.3f}', flush=True)
  print(_table(np.array(clean), drops))


if __name__ == '__main__':
  app.run(main)
