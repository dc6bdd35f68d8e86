"""A client whose training is not finite is left out of every aggregate of its round, for every kind of method.

The independent reference is the same round run without that client: model weights, server optimizer state and
the method's clustering state must come out the same, and `nonfinite_clients` must count it.
"""

import collections

from absl.testing import parameterized
import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from algorithms.core import learning_process
from algorithms.methods import fedtem
from algorithms.methods import fedtkm
from algorithms.methods import tshot_kmeans
from algorithms.methods import vanilla
from models import multi_branch
from tasks import task as task_lib
from utils import execution_context

_SERVER_STEP = learning_process.ServerStep.named('adam', 0.1, 1e-3)


def _model_fn():
  extractor = tf.keras.Sequential([tf.keras.Input(shape=(3,)), tf.keras.layers.Dense(4, activation='tanh')])
  return multi_branch.build_multi_branch_model(extractor, 2, branch_units=3)


def _client(seed, mode, size, poisoned=False):
  rng = np.random.default_rng(seed)
  x = (rng.normal(size=(size, 3)) + (2.0 if mode == 0 else -2.0)).astype(np.float32)
  if poisoned:
    x[2, 1] = np.inf  # One bad input makes the client's loss and update non-finite.
  raw = tf.data.Dataset.from_tensor_slices(collections.OrderedDict(x=x, y=rng.integers(0, 3, size).astype(np.int32)))
  return task_lib.preprocess_client(raw, mode, tff.simulation.baselines.ClientSpec(1, 4), shuffle_seed=(0, seed))


_GOOD = [(0, 0, 9), (1, 1, 6), (2, 0, 7), (3, 1, 11), (4, 0, 8)]


def _build(name, element_spec):
  args = (_model_fn, lambda batch: batch, element_spec, 0.1, _SERVER_STEP)
  if name == 'vanilla':
    return vanilla.build_process(*args)
  if name == 'fedtem':
    return fedtem.build_process(*args, num_branches=2, num_modes=2,
                                config=fedtem.Config(prior='linear', period=8, pi_momentum=0.5, seed=1))
  if name == 'fedtkm':
    return fedtkm.build_process(*args, num_branches=2, num_modes=2,
                                config=fedtkm.Config(prior='linear', period=8, eta_max=0.5, seed=1))
  return tshot_kmeans.build_process(*args, num_branches=2, num_modes=2, period=4, clients_per_round=6)


class NonFiniteClientsTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.parameters('vanilla', 'fedtem', 'fedtkm', 'tshot_kmeans')
  def test_round_with_a_diverging_client_equals_the_round_without_it(self, name):
    good = [_client(*spec) for spec in _GOOD]
    bad = _client(9, 1, 10, poisoned=True)
    process = _build(name, good[0].element_spec)
    state = process.set_model_weights(process.initialize(), learning_process.initial_weights(_model_fn, seed=3))
    with_bad = process.next(state, good[:2] + [bad] + good[2:])
    without = process.next(state, good)

    self.assertEqual(with_bad.metrics['client_work']['nonfinite_clients'], 1.0)
    self.assertEqual(without.metrics['client_work']['nonfinite_clients'], 0.0)
    self.assertAllClose(with_bad.metrics['client_work']['train_loss'], without.metrics['client_work']['train_loss'])
    self.assertAllClose(tf.nest.flatten(process.get_model_weights(with_bad.state)),
                        tf.nest.flatten(process.get_model_weights(without.state)), atol=1e-6)
    self.assertAllClose(tf.nest.flatten(with_bad.state.finalizer), tf.nest.flatten(without.state.finalizer),
                        atol=1e-6)
    self.assertAllClose(tf.nest.flatten(with_bad.state.client_work), tf.nest.flatten(without.state.client_work),
                        atol=1e-6)
    for value in tf.nest.flatten(with_bad.state.client_work):
      self.assertTrue(np.all(np.isfinite(value)))

  def test_fedtem_counts_only_finite_clients_in_eq_10(self):
    # Round 1, T = 8: q~ = 0.75. With 5 finite clients of 6, floor(0.75 * 5 + 1/2) = 4 join mode 1; counting the
    # left-out client would give floor(0.75 * 6 + 1/2) = 5.
    good = [_client(*spec) for spec in _GOOD]
    process = _build('fedtem', good[0].element_spec)
    state = process.set_model_weights(process.initialize(), learning_process.initial_weights(_model_fn, seed=3))
    output = process.next(state, good + [_client(9, 1, 10, poisoned=True)])
    sizes = np.array([size for _, _, size in _GOOD], np.float64)
    share = output.metrics['client_work']['assigned_mode_one_share']
    joined = [subset for subset in range(1 << 5) if bin(subset).count('1') == 4]
    shares = {sizes[[bool(s >> i & 1) for i in range(5)]].sum() / sizes.sum() for s in joined}
    self.assertTrue(any(np.isclose(share, value, atol=1e-6) for value in shares), share)


if __name__ == '__main__':
  execution_context.install()
  tf.test.main()
