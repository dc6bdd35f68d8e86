"""Tests the shared pieces of `algorithms.core.learning_process`."""

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from algorithms.core import learning_process
from utils import execution_context


def _model():
  return tf.keras.Sequential([tf.keras.layers.Dense(3, input_shape=(2,), bias_initializer='ones'),
                              tf.keras.layers.Dense(1, kernel_initializer='ones')])


class ClientModelTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    execution_context.install()

  def test_model_variables_start_at_zeros_in_a_computation_and_others_keep_their_initializers(self):

    @tff.tensorflow.computation
    def initial_values():
      model = learning_process.client_model(_model)
      other = tf.Variable(tf.ones([2]))  # Created by the computation, not the model.
      return [variable.read_value() for variable in model.weights] + [other.read_value()]

    *weights, other = initial_values()
    self.assertLen(weights, 4)
    for value in weights:
      self.assertAllEqual(value, np.zeros_like(value))
    self.assertAllEqual(other, [1.0, 1.0])


class GlobalModelWeightsTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    execution_context.install()

  def test_reads_what_the_process_computation_returns_after_a_round(self):
    weights_type = learning_process.model_weights_type(_model)

    @tff.tensorflow.computation(weights_type, tff.SequenceType(np.float32))
    def client_update(weights, dataset):
      del dataset  # Every client moves every weight by one.
      update = [tf.ones_like(w) for w in weights.trainable]
      return tff.learning.templates.ClientResult(update, 1.0), {'clients': 1.0}

    process = learning_process.compose(
        _model, learning_process.stateless_client_work(client_update, lambda sums: sums), 0.1, 1e-3)
    state = process.set_model_weights(process.initialize(), learning_process.initial_weights(_model, seed=3))
    state = process.next(state, [[1.0], [2.0]]).state
    expected = process.get_model_weights(state)
    read = learning_process.global_model_weights(state)
    self.assertEqual(type(read), type(expected))
    self.assertAllClose(tf.nest.flatten(read), tf.nest.flatten(expected), rtol=0, atol=0)
    self.assertNotAllClose(tf.nest.flatten(read.trainable),
                           tf.nest.flatten(learning_process.initial_weights(_model, seed=3).trainable))


if __name__ == '__main__':
  tf.test.main()
