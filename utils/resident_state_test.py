"""`ResidentRounds` equals TFF's own calls of `next`, keeps reading the state consistent and flags non-finite states.

The reference is the same computation called through TFF's context, which sends the state to the worker and back
every round; a toy round with a known closed form checks the values themselves.
"""

from unittest import mock

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from algorithms.core import learning_process
from algorithms.methods import vanilla
from models import multi_branch
from tasks import task as task_lib
from utils import execution_context
from utils import resident_state


def _divide_by_client_sum():
  """next(state, data): state / (sum of the clients' values), the clients' count as the metric."""
  data_type = tff.FederatedType(tff.SequenceType(np.float32), tff.CLIENTS)

  @tff.tensorflow.computation(tff.SequenceType(np.float32))
  def client_sum(dataset):
    return dataset.reduce(np.float32(0.0), lambda total, x: total + x)

  @tff.tensorflow.computation(np.float32, np.float32)
  def divide(state, total):
    return state / total

  @tff.federated_computation(tff.FederatedType(np.float32, tff.SERVER), data_type)
  def next_fn(state, client_data):
    total = tff.federated_sum(tff.federated_map(client_sum, client_data))
    clients = tff.federated_sum(tff.federated_value(1, tff.CLIENTS))
    return tff.learning.templates.LearningProcessOutput(tff.federated_map(divide, (state, total)), clients)

  return next_fn


def _datasets(*values):
  return [tf.data.Dataset.from_tensor_slices(np.array(v, np.float32)) for v in values]


class ResidentRoundsTest(tf.test.TestCase):

  def test_values_metrics_and_the_previous_state_across_client_counts(self):
    rounds = resident_state.ResidentRounds(_divide_by_client_sum(), np.float32(60.0))
    expected = 60.0
    # 2, 3, then 2 clients again: the state moves between the worker's executors for 2 and 3 clients.
    for values in ([[1.0], [2.0]], [[1.0, 1.0], [0.5], [0.5]], [[1.0], [4.0]]):
      previous, expected = expected, expected / sum(map(sum, values))
      self.assertEqual(rounds.next(_datasets(*values)), len(values))
      self.assertTrue(rounds.finite)
      self.assertAllClose(rounds.state(), expected)
      self.assertAllClose(rounds.previous_state(), previous)
      self.assertAllClose(rounds.state(), expected)  # Reading twice reads the same value.

  def test_a_state_that_is_not_finite_is_flagged(self):
    rounds = resident_state.ResidentRounds(_divide_by_client_sum(), np.float32(1.0))
    rounds.next(_datasets([1.0], [-1.0]))
    self.assertFalse(rounds.finite)
    self.assertEqual(rounds.state(), np.inf)
    self.assertEqual(rounds.previous_state(), 1.0)

  def test_rounds_of_one_computation_compile_once_and_keep_their_own_states(self):
    next_fn = _divide_by_client_sum()
    with mock.patch.object(execution_context, 'compile_for_simulation',
                           wraps=execution_context.compile_for_simulation) as compile_fn:
      first = resident_state.ResidentRounds(next_fn, np.float32(60.0))
      first.next(_datasets([1.0], [2.0]))
      second = resident_state.ResidentRounds(next_fn, np.float32(24.0))
      second.next(_datasets([1.0], [2.0]))
      first.next(_datasets([1.0], [4.0]))
    self.assertEqual(compile_fn.call_count, 1)
    self.assertAllClose(first.state(), 60.0 / 3 / 5)
    self.assertAllClose(second.state(), 24.0 / 3)

  def test_vanilla_with_fedadam_equals_the_contexts_calls_bit_for_bit(self):
    def model_fn():
      extractor = tf.keras.Sequential([tf.keras.Input(shape=(3,)), tf.keras.layers.Dense(8, activation='relu')])
      return multi_branch.build_multi_branch_model(extractor, 2, branch_units=4)

    rng = np.random.default_rng(0)

    def client(seed, size):
      raw = tf.data.Dataset.from_tensor_slices({'x': rng.normal(size=(size, 3)).astype(np.float32),
                                                'y': rng.integers(0, 4, size).astype(np.int32)})
      return task_lib.preprocess_client(raw, seed % 2, tff.simulation.baselines.ClientSpec(1, 4),
                                        shuffle_seed=(0, seed))

    data = [[client(10 * r + i, 5 + i) for i in range(3 + r % 2)] for r in range(4)]
    process = vanilla.build_process(model_fn, lambda batch: batch, data[0][0].element_spec, 0.1,
                                    learning_process.ServerStep.named('adam', 0.05, 1e-3))
    state = process.set_model_weights(process.initialize(), learning_process.initial_weights(model_fn, 0))
    rounds = resident_state.ResidentRounds(process.next, state, resend_every=2)  # Sent whole again in round 3.
    for datasets in data:
      output = process.next(state, datasets)
      state = output.state
      metrics = rounds.next(datasets)
      tf.nest.map_structure(np.testing.assert_array_equal, metrics, output.metrics)
      tf.nest.map_structure(np.testing.assert_array_equal, rounds.state(), state)
      self.assertTrue(rounds.finite)


if __name__ == '__main__':
  execution_context.install()
  tf.test.main()
