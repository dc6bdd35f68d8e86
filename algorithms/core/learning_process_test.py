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
        _model, learning_process.stateless_client_work(client_update, lambda sums: sums),
        learning_process.ServerStep.named('adam', 0.1, 1e-3))
    state = process.set_model_weights(process.initialize(), learning_process.initial_weights(_model, seed=3))
    state = process.next(state, [[1.0], [2.0]]).state
    expected = process.get_model_weights(state)
    read = learning_process.global_model_weights(state)
    self.assertEqual(type(read), type(expected))
    self.assertAllClose(tf.nest.flatten(read), tf.nest.flatten(expected), rtol=0, atol=0)
    self.assertNotAllClose(tf.nest.flatten(read.trainable),
                           tf.nest.flatten(learning_process.initial_weights(_model, seed=3).trainable))



class ServerStepTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    execution_context.install()

  def _round(self, server_step: learning_process.ServerStep):
    return self._rounds(server_step, 1)

  def _rounds(self, server_step: learning_process.ServerStep, rounds: int):
    """(initial, after `rounds` rounds) trainable weights; client i of data [d_i] sends the update d_i * 1 with
    weight d_i, so the example-weighted mean update is (1 * 1 + 3 * 3) / 4 = 2.5 in every entry."""
    weights_type = learning_process.model_weights_type(_model)

    @tff.tensorflow.computation(weights_type, tff.SequenceType(np.float32))
    def client_update(weights, dataset):
      value = dataset.reduce(0.0, lambda total, x: total + x)
      update = [value * tf.ones_like(w) for w in weights.trainable]
      return tff.learning.templates.ClientResult(update, value), {'clients': 1.0}

    process = learning_process.compose(
        _model, learning_process.stateless_client_work(client_update, lambda sums: sums), server_step)
    initial = learning_process.initial_weights(_model, seed=3)
    state = process.set_model_weights(process.initialize(), initial)
    for _ in range(rounds):
      state = process.next(state, [[1.0], [3.0]]).state
    return initial.trainable, learning_process.global_model_weights(state).trainable

  def test_sgd_with_rate_one_applies_the_mean_update_as_it_is(self):
    initial, after = self._round(learning_process.ServerStep.named('sgd', 1.0, 1e-3))
    for before, now in zip(initial, after):
      self.assertAllClose(now, before - 2.5, atol=1e-6)

  def test_adam_first_step_is_the_bias_corrected_step(self):
    # m = 0.1 g, v = 0.001 g^2 after one step; Adam moves by lr sqrt(1 - 0.999) / (1 - 0.9) m / (sqrt(v) + eps).
    initial, after = self._round(learning_process.ServerStep.named('adam', 0.1, 1e-3))
    step = 0.1 * np.sqrt(1 - 0.999) / (1 - 0.9) * (0.1 * 2.5) / (np.sqrt(0.001 * 2.5**2) + 1e-3)
    for before, now in zip(initial, after):
      self.assertAllClose(now, before - step, atol=1e-5)

  def test_each_rate_gets_its_own_finalizer(self):
    # Finalizers are built once per optimizer and weights type in a process (learning_process._optimizer_finalizer):
    # a second rate, after the first was built, must move by its own step.
    for rate in (1.0, 0.5):
      initial, after = self._round(learning_process.ServerStep.named('sgd', rate, 1e-3))
      for before, now in zip(initial, after):
        self.assertAllClose(now, before - rate * 2.5, atol=1e-6)

  def test_momentum_carries_the_first_step_into_the_second(self):
    # v1 = g, v2 = m v1 + g: the second round moves by lr (1 + m) g (TFF's sgdm, FedAvgM's server step).
    step = learning_process.ServerStep.named('sgdm', 0.5, momentum=0.9)
    initial, after = self._rounds(step, 2)
    for before, now in zip(initial, after):
      self.assertAllClose(now, before - 0.5 * 2.5 - 0.5 * (1 + 0.9) * 2.5, atol=1e-5)

  def test_adagrad_and_yogi_first_steps(self):
    # Adagrad: s = 0.1 + g^2, w -= lr g / sqrt(s + eps). Yogi: acc = 0.1 g, s = 1e-6 + 0.001 g^2 (sign(g^2 - s) = 1),
    # w -= lr sqrt(1 - 0.999) / (1 - 0.9) acc / (sqrt(s) + eps). Independent of TFF's code: its documented rules.
    g, lr, eps = 2.5, 0.1, 1e-3
    expected = {'adagrad': lr * g / np.sqrt(0.1 + g**2 + eps),
                'yogi': lr * np.sqrt(1 - 0.999) / (1 - 0.9) * (0.1 * g) / (np.sqrt(1e-6 + 0.001 * g**2) + eps)}
    for name, move in expected.items():
      with self.subTest(name):
        initial, after = self._round(learning_process.ServerStep.named(name, lr, eps))
        for before, now in zip(initial, after):
          self.assertAllClose(now, before - move, atol=1e-5)

  def test_an_unknown_optimizer_or_aggregator_is_one_line(self):
    with self.assertRaisesRegex(ValueError, r'^--server_optimizer must be one of adam, sgd, sgdm, adagrad, yogi'):
      learning_process.build_server_optimizer('rmsprop', 1.0)
    with self.assertRaisesRegex(ValueError, r'^--aggregator must be one of mean, dp, secure'):
      learning_process.build_model_aggregator('median')

  def test_a_method_with_its_own_aggregation_refuses_another_model_aggregator(self):
    weights_type = learning_process.model_weights_type(_model)

    @tff.tensorflow.computation(weights_type, tff.SequenceType(np.float32))
    def client_update(weights, dataset):
      del dataset  # Unused.
      return tff.learning.templates.ClientResult([tf.zeros_like(w) for w in weights.trainable], 1.0), {'n': 1.0}

    work = learning_process.stateless_client_work(client_update, lambda sums: sums)
    own = tff.aggregators.MeanFactory()
    learning_process.compose(_model, work, learning_process.ServerStep.named('sgd', 1.0), own)
    with self.assertRaisesRegex(ValueError, r'^--aggregator replaces the mean of one model update'):
      learning_process.compose(_model, work, learning_process.ServerStep.named('sgd', 1.0, aggregator='secure'), own)


if __name__ == '__main__':
  tf.test.main()
