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


if __name__ == '__main__':
  tf.test.main()
