"""FedEvp's Algorithm 2 written out eagerly, line by line, beside the suite's learning process: whether a training
curve of `--algorithm=fedevp` is Algorithm 2's own or the suite's (Tan et al., "Federated Learning Under Evolving
Distribution Shifts", 2024).

The suite's FedEvp (`algorithms.methods.fedevp`, `batching` stage_sweep) builds each step's prototypes inside the
graph from a support of every earlier domain, with the step's parameters. This script shares none of that code: the
same run's clients and data (`run_experiment.py`'s flags after this script's own), initial weights from the run's
process (FedEvp's build is not seeded, so each invocation draws its own), and per client Algorithm 2 as printed: for
each local iteration, domains m = 1..M in order; at domain m the features of its examples B^m, the cross-entropy of
Eq. 8, for m >= 2 the alignment of Eq. 7 to the prototypes c^{m-1} (fixed, no gradient), one SGD step on their sum,
then c^m = ((m - 1) / m) c^{m-1} + (1 / m) (B^m's class means) with the features of that step (Eq. 6; a class absent
from B^m keeps its prototype). The server averages by examples. `--prototypes=current` builds c^{m-1} instead before
each step from every earlier domain's examples with the step's parameters (the suite's reading, with a support of all
earlier examples), the one change between the two.

Every `--every` rounds it prints the global model's training accuracy over the round's clients, the mean
cross-entropy and alignment of the round's local steps, and the share of live ReLU units (nonzero on at least one
example) of the features f(x) and of the classifier's hidden layer.

    bazel run //benchmarks:fedevp_reference_sweep -- --every=4 [--prototypes=current] --task=circle ...
"""

import os
import sys

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

from absl import flags
import numpy as np
import tensorflow as tf

from algorithms.core import learning_process
from experiment.core import assembly
from models import multi_branch
from tasks import task as task_lib
import run_experiment


def _client_arrays(dataset, batch_fn) -> dict:
  """A client's whole stream as numpy arrays x, y, stage (in the stream's order)."""
  batches = list(task_lib.model_batches(dataset, batch_fn))
  return {key: np.concatenate([batch[key].numpy() for batch in batches]) for key in ('x', 'y', 'stage')}


def _alignment(features, labels, prototypes, present, euclidean: bool):
  """Eq. 7: the mean negative log-probability of each example's class under softmax(-d(f(x), c_y')) over the classes
  with a prototype."""
  squared = tf.reduce_sum(tf.square(features[:, tf.newaxis] - prototypes[tf.newaxis]), axis=-1)
  distance = tf.sqrt(tf.maximum(squared, 1e-12)) if euclidean else squared
  logits = tf.where(present[tf.newaxis], -distance, -np.inf)
  keep = tf.gather(present, labels)
  nll = tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)
  return tf.reduce_sum(tf.where(keep, nll, 0.0)) / tf.maximum(tf.reduce_sum(tf.cast(keep, tf.float32)), 1.0)


def _step_fn(model, rate: float, weight: float, euclidean: bool):
  """One SGD step on CE + weight * alignment (no alignment while no class has a prototype); returns the step's
  features, cross-entropy and alignment."""

  @tf.function(reduce_retracing=True)
  def step(x, y, prototypes, present):
    with tf.GradientTape() as tape:
      outputs = model(x, training=True)
      logits = tf.reshape(outputs[multi_branch.LOGITS], [tf.shape(y)[0], -1])
      ce = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(y, logits))
      alignment = tf.cond(tf.reduce_any(present),
                          lambda: _alignment(outputs[multi_branch.FEATURES], y, prototypes, present, euclidean),
                          lambda: tf.constant(0.0))
      loss = ce + weight * alignment
    gradients = tape.gradient(loss, model.trainable_variables)
    for variable, gradient in zip(model.trainable_variables, gradients):
      variable.assign_sub(rate * gradient)
    return outputs[multi_branch.FEATURES], ce, alignment

  return step


def _add_domain(prototypes, seen, features, labels) -> None:
  """Eq. 6 in place: each present class's prototype moves to the running mean over the domains where it is present."""
  for label in np.unique(labels):
    seen[label] += 1
    prototypes[label] += (features[labels == label].mean(axis=0) - prototypes[label]) / seen[label]


def _current_prototypes(model, client, stage, num_classes):
  """c^{stage-1} from every earlier domain's examples through the model as it is now."""
  prototypes = np.zeros((num_classes, model.output[multi_branch.FEATURES].shape[-1]), np.float32)
  seen = np.zeros(num_classes, np.int64)
  earlier = client['stage'] < stage
  if earlier.any():
    features = model(client['x'][earlier], training=False)[multi_branch.FEATURES].numpy()
    for domain in np.unique(client['stage'][earlier]):
      rows = client['stage'][earlier] == domain
      _add_domain(prototypes, seen, features[rows], client['y'][earlier][rows])
  return prototypes, seen


def _local_training(model, step, weights, client, num_classes, epochs, current: bool):
  """Algorithm 2's client: returns the trained weights and the mean cross-entropy and alignment of its steps."""
  model.set_weights(weights)
  ce_terms, alignment_terms = [], []
  for _ in range(epochs):
    prototypes = np.zeros((num_classes, model.output[multi_branch.FEATURES].shape[-1]), np.float32)
    seen = np.zeros(num_classes, np.int64)  # Domains so far in which each class was present.
    for stage in np.unique(client['stage']):
      own = client['stage'] == stage
      x, y = client['x'][own], client['y'][own].astype(np.int32)
      if current:
        prototypes, seen = _current_prototypes(model, client, stage, num_classes)
      features, ce, alignment = step(x, y, prototypes, seen > 0)
      if not current:
        _add_domain(prototypes, seen, features.numpy(), y)
      ce_terms.append(float(ce))
      alignment_terms.append(float(alignment))
  return model.get_weights(), np.mean(ce_terms), np.mean(alignment_terms)


def _global_view(model, clients) -> tuple[float, float, float]:
  """Training accuracy over the clients' examples, and the live shares of f(x)'s and the classifier's hidden units."""
  head = [layer for layer in model.layers if isinstance(layer, tf.keras.Model)][-1]
  x = np.concatenate([client['x'] for client in clients])
  y = np.concatenate([client['y'] for client in clients])
  outputs = model(x, training=False)
  predictions = np.argmax(tf.reshape(outputs[multi_branch.LOGITS], [len(y), -1]).numpy(), axis=1)
  hidden = head.layers[0](outputs[multi_branch.FEATURES]).numpy()
  live = lambda a: float(np.mean(a.max(axis=0) > 0))
  return float(np.mean(predictions == y)), live(outputs[multi_branch.FEATURES].numpy()), live(hidden)


def main() -> None:
  argv = sys.argv[1:]
  every, current = 4, False
  while argv and argv[0].split('=')[0] in ('--every', '--prototypes'):
    name, value = argv.pop(0).split('=')
    if name == '--every':
      every = int(value)
    elif value not in ('sweep', 'current'):
      raise ValueError(f'--prototypes must be sweep or current; got {value}.')
    else:
      current = value == 'current'
  flag_values = flags.FlagValues()
  run_experiment.define_flags(flag_values)
  flag_values([sys.argv[0], '--algorithm=fedevp', '--root_output_dir=/tmp/fedevp_reference_sweep'] + argv)
  resolved = assembly.resolve(run_experiment.experiment_config(flag_values))
  experiment = assembly.build(resolved)
  task, config, training = experiment.task, resolved.method_config, resolved.training
  model = experiment.model_fn()
  learning_process.global_model_weights(experiment.algorithm.process.initialize()).assign_weights_to(model)
  weights = model.get_weights()
  step = _step_fn(model, resolved.hparams.client_learning_rate, config.alignment_weight, config.distance == 'euclidean')
  print(f'prototypes {"current" if current else "sweep"}, client rate {resolved.hparams.client_learning_rate:g}, '
        f'distance {config.distance}, alignment weight {config.alignment_weight:g}, {training.client_epochs} local '
        'iteration(s)')
  print('round  train_acc     ce  alignment  live features/hidden')
  for round_num in range(1, training.total_rounds + 1):
    clients = [_client_arrays(dataset, task.batch_fn) for dataset in experiment.round_datasets(round_num)]
    results = [_local_training(model, step, weights, client, task.num_classes, training.client_epochs, current)
               for client in clients]
    sizes = np.array([len(client['y']) for client in clients], np.float64)
    weights = [np.tensordot(sizes / sizes.sum(), np.stack(tensors), axes=1).astype(np.float32)
               for tensors in zip(*(result[0] for result in results))]
    if round_num % every and round_num != 1:
      continue
    model.set_weights(weights)
    accuracy, live_features, live_hidden = _global_view(model, clients)
    print(f'{round_num:5d}  {accuracy:9.3f}  {np.mean([r[1] for r in results]):5.3f}  '
          f'{np.mean([r[2] for r in results]):9.3f}  {live_features:.2f}/{live_hidden:.2f}', flush=True)


if __name__ == '__main__':
  main()
