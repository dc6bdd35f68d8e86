"""Checks one round of the Vanilla learning process against plain-TF client SGD and a numpy FedAdam step."""

import collections

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from algorithms.core import learning_process
from algorithms.methods import vanilla
from models import multi_branch
from tasks import task as task_lib
from utils import execution_context

_CLIENT_LR, _SERVER_LR, _EPSILON = 0.1, 0.05, 1e-3
_SERVER_STEP = learning_process.ServerStep.named('adam', _SERVER_LR, _EPSILON)


def _model_fn():
  extractor = tf.keras.Sequential([tf.keras.Input(shape=(3,)), tf.keras.layers.Dense(4, activation='tanh')])
  return multi_branch.build_multi_branch_model(extractor, 2, branch_units=3)


def _client_data(seed, size):
  rng = np.random.default_rng(seed)
  raw = tf.data.Dataset.from_tensor_slices(collections.OrderedDict(
      x=rng.normal(size=(size, 3)).astype(np.float32), y=rng.integers(0, 3, size).astype(np.int32)))
  return task_lib.preprocess_client(raw, mode=seed % 2, client_spec=tff.simulation.baselines.ClientSpec(1, 4),
                                    shuffle_seed=(0, seed))


def _reference_client_update(initial, dataset):
  """Plain SGD on the cross-entropy of the branch-averaged logits; returns (initial - trained, n)."""
  model = _model_fn()
  model.set_weights(initial)
  n = 0
  for raw, _ in dataset:
    with tf.GradientTape() as tape:
      logits = tf.reduce_mean(model(raw['x'])['logits'], axis=1)
      loss = tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(raw['y'], logits, from_logits=True))
    for variable, gradient in zip(model.trainable_variables, tape.gradient(loss, model.trainable_variables)):
      variable.assign_sub(_CLIENT_LR * gradient)
    n += len(raw['y'])
  return [w0 - w for w0, w in zip(initial, model.get_weights())], n


class VanillaProcessTest(tf.test.TestCase):

  def test_one_round_matches_reference(self):
    datasets = [_client_data(seed, size) for seed, size in ((0, 7), (1, 12), (2, 5))]
    process = vanilla.build_process(_model_fn, lambda batch: batch, datasets[0].element_spec, _CLIENT_LR,
                                    _SERVER_STEP)
    initial = learning_process.initial_weights(_model_fn, seed=1)
    state = process.set_model_weights(process.initialize(), initial)
    output = process.next(state, datasets)

    updates, sizes = zip(*(_reference_client_update(list(initial.trainable), d) for d in datasets))
    mean_update = [sum(n * u[i] for u, n in zip(updates, sizes)) / sum(sizes) for i in range(len(updates[0]))]
    # First Adam step (beta_1 = 0.9, beta_2 = 0.999): m = 0.1 g, v = 0.001 g^2, bias-corrected step size.
    expected = [w - _SERVER_LR * np.sqrt(1 - 0.999) / (1 - 0.9) * (0.1 * g) / (np.sqrt(0.001 * g**2) + _EPSILON)
                for w, g in zip(initial.trainable, mean_update)]
    self.assertAllClose(process.get_model_weights(output.state).trainable, expected, atol=1e-5)
    self.assertEqual(output.metrics['client_work']['train_examples'], 24.0)

  def test_train_metrics_are_example_weighted(self):
    datasets = [_client_data(seed, size) for seed, size in ((3, 4), (4, 8))]
    process = vanilla.build_process(_model_fn, lambda batch: batch, datasets[0].element_spec, 0.0, _SERVER_STEP)
    initial = learning_process.initial_weights(_model_fn, seed=2)
    output = process.next(process.set_model_weights(process.initialize(), initial), datasets)
    # With a zero client learning rate the train metrics are those of the initial model on all 12 examples.
    model = _model_fn()
    model.set_weights(list(initial.trainable))
    batches = [raw for d in datasets for raw, _ in d]  # One pass: each pass of a client dataset reshuffles it.
    xs, ys = (np.concatenate([raw[key] for raw in batches]) for key in ('x', 'y'))
    logits = model(xs)['logits'].numpy().mean(axis=1)
    loss = tf.keras.losses.sparse_categorical_crossentropy(ys, logits, from_logits=True).numpy().mean()
    metrics = output.metrics['client_work']
    self.assertAllClose(metrics['train_loss'], loss, atol=1e-5)
    self.assertAllClose(metrics['train_accuracy'], np.mean(logits.argmax(-1) == ys))


if __name__ == '__main__':
  execution_context.install()
  tf.test.main()
