"""FedRep's client round (Collins et al., 2021, Algorithm 1) against a plain TensorFlow loop written from it: the
client's own head trained alone, then the representation alone with that head, the new head stored."""

import collections

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from algorithms.core import client_state
from algorithms.methods import fedrep
from models import representation
from utils import execution_context

_NETWORK = representation.mlp_representation(input_dim=3, num_classes=3, units=4)
_LEARNING_RATE = 0.3


def _model():
  return representation.tower_head_model(_NETWORK)


def _reference_round(start: list, own_head, batches, head_epochs: int) -> list:
  """The trained trainable tensors: `head_epochs` passes of SGD on the head, then one on the tower."""
  model = _model()
  head_mask = representation.personalized_mask(model, 0)
  heads = iter(own_head or [])
  model.set_weights([next(heads) if is_head and own_head else value for value, is_head in zip(start, head_mask)])

  def sgd_pass(trained):
    variables = [v for v, t in zip(model.trainable_variables, head_mask) if t == trained]
    for x, y in batches:
      with tf.GradientTape() as tape:
        logits = model(x)['logits'][:, 0, :]
        loss = tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(y, logits, from_logits=True))
      for variable, gradient in zip(variables, tape.gradient(loss, variables)):
        variable.assign_sub(_LEARNING_RATE * gradient)

  for _ in range(head_epochs):
    sgd_pass(trained=True)
  sgd_pass(trained=False)
  return [v.numpy() for v in model.trainable_variables]


class FedRepTest(tf.test.TestCase):

  def test_client_round_matches_a_plain_tensorflow_loop(self):
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(10, 3)).astype(np.float32), rng.integers(0, 3, 10).astype(np.int32)
    batches = [(x[i:i + 4], y[i:i + 4]) for i in range(0, 10, 4)]
    dataset = tf.data.Dataset.from_tensor_slices(
        (collections.OrderedDict(x=x, y=y), np.zeros(10, np.int32))).batch(4)
    model = _model()
    head_mask = representation.personalized_mask(model, 0)
    start = [rng.normal(size=v.shape).astype(np.float32) for v in model.trainable_variables]
    own_head = [rng.normal(size=v.shape).astype(np.float32)
                for v, is_head in zip(model.trainable_variables, head_mask) if is_head]
    initial = fedrep.initial_client_state([h.shape for h in own_head])
    config = fedrep.Config(head_epochs=3)
    client_work = fedrep.build_client_work(_model, head_mask, lambda batch: batch, dataset.element_spec,
                                           _LEARNING_RATE, config, initial)
    weights = tff.learning.models.ModelWeights(trainable=start, non_trainable=[])
    # A client at its first round starts from the broadcast head; one with a stored head from its own.
    for stored in (None, own_head):
      state = dict(initial, **({} if stored is None else {
          fedrep.INITIALIZED: np.float32(1.0), **{fedrep.head_key(i): h for i, h in enumerate(stored)}}))
      element = client_state.element(state, 0)
      data = collections.OrderedDict(dataset=dataset, client_state=tf.data.Dataset.from_tensors(element))
      output = client_work.next(client_work.initialize(), [weights], [data])
      trained = _reference_round(start, stored, batches, config.head_epochs)
      result = output.result[0]
      self.assertAllClose(result.update, [s - t for s, t in zip(start, trained)], atol=1e-5)
      self.assertEqual(float(result.update_weight), 10.0)  # The representation pass's examples.
      states = output.measurements['client_states']
      self.assertAllEqual(states[fedrep.INITIALIZED], [1.0])
      new_heads = [t for t, is_head in zip(trained, head_mask) if is_head]
      for index, head in enumerate(new_heads):
        self.assertAllClose(states[fedrep.head_key(index)][0], head, atol=1e-5)
      # The tower moved, and so did the head: both are in the update.
      for update, is_head in zip(result.update, head_mask):
        self.assertGreater(np.abs(update).max(), 0.0, 'head' if is_head else 'tower')

  def test_bad_epochs_are_one_line(self):
    with self.assertRaisesRegex(ValueError, r'^--fedrep_head_epochs must be >= 1; got 0\.$'):
      fedrep.Config(head_epochs=0).validate()


if __name__ == '__main__':
  execution_context.install()
  tf.test.main()
