"""Checks pFedEM (Chen et al.) against numpy references written from Eq. 8-15, and its TFF round end to end."""

import collections

import numpy as np
from scipy import special
from scipy import stats
import tensorflow as tf
import tensorflow_federated as tff

from algorithms.core import aggregation_only
from algorithms.core import learning_process
from algorithms.core import per_tensor_mean
from algorithms.methods import pfedem
from models import multi_branch
from tasks import task as task_lib
from utils import execution_context

_SERVER_STEP = learning_process.ServerStep.named('adam', 0.1, 1e-3)


def _numpy_e_step(z, means, variances, weights):
  """Eq. 8 with scipy's Gaussian densities, normalized in log space."""
  log_joint = np.stack([np.log(weights[k]) + stats.multivariate_normal(means[k], np.diag(variances[k])).logpdf(z)
                        for k in range(len(weights))], axis=1)
  return log_joint - special.logsumexp(log_joint, axis=1, keepdims=True)


def _numpy_m_step(z, gammas):
  """Eq. 9-11."""
  mass = gammas.sum(0)
  means = gammas.T @ z / mass[:, None]
  variances = np.stack([(gammas[:, k:k + 1] * (z - means[k]) ** 2).sum(0) / mass[k] for k in range(len(mass))])
  return means, variances, mass / len(z)


class EquationsTest(tf.test.TestCase):

  def test_e_and_m_steps_match_numpy(self):
    rng = np.random.default_rng(0)
    for num_components in (2, 3):
      z = rng.normal(size=(40, 5)).astype(np.float32) + rng.integers(0, 2, size=(40, 1)) * 3.0
      mixture = {'means': rng.normal(size=(num_components, 5)).astype(np.float32),
                 'variances': rng.uniform(0.5, 2.0, size=(num_components, 5)).astype(np.float32),
                 'weights': rng.dirichlet(np.ones(num_components)).astype(np.float32)}
      log_gammas = pfedem.e_step(z, mixture, tf.math.log(mixture['weights']))
      expected = _numpy_e_step(z, mixture['means'], mixture['variances'], mixture['weights'])
      self.assertAllClose(log_gammas, expected, atol=1e-4)
      local = pfedem.m_step(z, log_gammas, variance_floor=1e-6)
      means, variances, weights = _numpy_m_step(z, np.exp(expected))
      self.assertAllClose(local['means'], means, atol=1e-4)
      self.assertAllClose(local['variances'], variances, atol=1e-4)
      self.assertAllClose(local['weights'], weights, atol=1e-5)
      partition, counts = pfedem.hard_partition(log_gammas)
      self.assertAllEqual(partition, expected.argmax(1))  # Alg. 1 line 10: argmax of the pre-M-step posterior.
      self.assertAllEqual(counts, np.bincount(expected.argmax(1), minlength=num_components))

  def test_server_aggregation_is_count_weighted(self):
    rng = np.random.default_rng(1)
    counts = np.array([[3, 0, 5], [1, 0, 2]], np.float32)  # Two clients, component 2 collapsed.
    means = rng.normal(size=(2, 3, 4)).astype(np.float32)
    variances = rng.uniform(0.5, 1.5, size=(2, 3, 4)).astype(np.float32)
    previous = pfedem.initial_mixture(3, 4, seed=0)
    keep = pfedem.aggregate_mixture(previous, counts.sum(0), (counts[..., None] * means).sum(0),
                                    (counts[..., None] * variances).sum(0), pfedem.Config(collapse_guard='keep'))
    for k in (0, 2):  # Eq. 12-13: sum_i n_ik mu_ik / sum_i n_ik.
      self.assertAllClose(keep['means'][k], (counts[:, k, None] * means[:, k]).sum(0) / counts[:, k].sum())
      self.assertAllClose(keep['variances'][k], (counts[:, k, None] * variances[:, k]).sum(0) / counts[:, k].sum())
    self.assertAllClose(keep['weights'], counts.sum(0) / counts.sum())  # Eq. 14.
    self.assertAllClose(keep['means'][1], previous['means'][1])  # Collapsed: kept, pi = 0.
    split = pfedem.aggregate_mixture(previous, counts.sum(0), (counts[..., None] * means).sum(0),
                                     (counts[..., None] * variances).sum(0), pfedem.Config(collapse_guard='split'))
    # Component 2 (index 2, 7 of 11 examples) lends half its weight and its variance to the collapsed one.
    self.assertAllClose(split['weights'], [4 / 11, 3.5 / 11, 3.5 / 11])
    self.assertAllClose(np.abs(split['means'][1] - split['means'][2]), np.sqrt(split['variances'][2]))
    self.assertAllClose(split['variances'][1], split['variances'][2])

  def test_gmm_step_pools_the_round_with_the_accumulated_gaussians(self):
    rng = np.random.default_rng(3)
    beta = 0.25
    previous = pfedem.initial_mixture(2, 3, seed=0)
    previous.update(means=rng.normal(size=(2, 3)).astype(np.float32), mass=np.array([40.0, 10.0], np.float32),
                    variances=rng.uniform(0.5, 1.5, size=(2, 3)).astype(np.float32))
    counts = np.array([12.0, 0.0], np.float32)  # Component 1 empty this round.
    round_means = rng.normal(size=(2, 3)).astype(np.float32)
    round_variances = rng.uniform(0.5, 1.5, size=(2, 3)).astype(np.float32)
    after = pfedem.aggregate_mixture(previous, counts, counts[:, None] * round_means,
                                     counts[:, None] * round_variances, pfedem.Config(gmm_step=beta))
    # Reference: raw moments of the pooled sample, the old one weighted (1 - beta) and the round's beta.
    old, new = (1 - beta) * previous['mass'][:, None], beta * counts[:, None]
    mass = old + new
    first = (old * previous['means'] + new * round_means) / mass
    second = (old * (previous['variances'] + previous['means']**2) + new * (round_variances + round_means**2)) / mass
    self.assertAllClose(after['mass'], mass[:, 0])
    self.assertAllClose(after['means'], first, atol=1e-5)
    self.assertAllClose(after['variances'], second - first**2, atol=1e-5)
    self.assertAllClose(after['means'][1], previous['means'][1])  # Empty: unchanged, mass decays.
    self.assertAllClose(after['weights'], [1.0, 0.0])  # Eq. 14 is the round's.
    literal = pfedem.aggregate_mixture(previous, counts, counts[:, None] * round_means,
                                       counts[:, None] * round_variances, pfedem.Config())
    # beta = 1: Eq. 12-13 exactly (float32 division of the sums, as the server does).
    self.assertAllEqual(literal['means'][0], (counts[:, None] * round_means)[0] / counts[0])
    self.assertAllEqual(literal['variances'][0], (counts[:, None] * round_variances)[0] / counts[0])

  def test_pi_pseudocount_is_a_dirichlet_prior_on_eq_14(self):
    counts = np.array([30.0, 0.0, 10.0], np.float32)  # Component 1 won no example this round.
    previous = pfedem.initial_mixture(3, 2, seed=0)
    statistics = (counts, np.ones((3, 2), np.float32), np.ones((3, 2), np.float32))
    for a in (0.0, 0.5, 2.0):
      weights = pfedem.aggregate_mixture(previous, *statistics, pfedem.Config(pi_pseudocount=a))['weights']
      # MAP estimate under Dirichlet(a + 1): (n_k + a) / (N + K a).
      self.assertAllClose(weights, (counts + a) / (counts.sum() + 3 * a), rtol=1e-6)
    self.assertAllEqual(pfedem.aggregate_mixture(previous, *statistics, pfedem.Config())['weights'],
                        counts / counts.sum())  # a = 0: Eq. 14 exactly; the empty component's pi is 0.

  def test_data_initialization_is_the_origin_one_in_the_features_mean_and_variance(self):
    rng = np.random.default_rng(5)
    clients = {f'c{i}': collections.OrderedDict(x=rng.normal(3.0, 2.0, size=(n, 3)).astype(np.float32),
                                                y=np.zeros(n, np.int32)) for i, n in enumerate((7, 11))}
    task = task_lib.Task(name='t', train_data=[tff.simulation.datasets.TestClientData(clients)],
                         client_sizes=[{'c0': 7, 'c1': 11}], test_data=[], test_sizes=[], batch_fn=lambda b: b,
                         model_fn=None, num_classes=1, mode_names=('a',))
    raw = pfedem.Features('raw', None, None)
    mean, variance = pfedem.feature_moments(task, raw, seed=0)
    x = np.concatenate([client['x'] for client in clients.values()]).astype(np.float64)
    self.assertAllClose(mean, x.mean(0), rtol=1e-6)
    self.assertAllClose(variance, x.var(0), rtol=1e-5)
    origin = pfedem.initial_mixture(2, 3, seed=8)
    data = pfedem.initial_mixture(2, 3, seed=8, center=mean, variance=variance)
    self.assertAllClose(data['means'], mean + np.sqrt(variance) * origin['means'], rtol=1e-6)
    self.assertAllClose(data['variances'], np.stack([variance, variance]), rtol=1e-6)
    self.assertAllEqual(origin['variances'], np.ones((2, 3)))
    self.assertAllEqual(data['weights'], origin['weights'])

  def test_prediction_is_the_pi_weighted_mixture_of_probabilities(self):
    rng = np.random.default_rng(2)
    logits = rng.normal(size=(6, 3, 4)).astype(np.float32)
    weights = np.array([0.2, 0.5, 0.3], np.float32)
    labels = rng.integers(0, 4, 6).astype(np.int32)
    result = pfedem.mixture_prediction({multi_branch.LOGITS: logits}, {'y': labels}, weights)
    probabilities = np.einsum('k,bkc->bc', weights, special.softmax(logits, axis=-1))  # Eq. 15.
    self.assertAllClose(result.loss_sum, -np.log(probabilities[np.arange(6), labels]).sum(), atol=1e-4)
    self.assertEqual(float(result.num_correct), float(np.sum(probabilities.argmax(1) == labels)))


def _network():
  extractor = tf.keras.Sequential([tf.keras.Input(shape=(3,)), tf.keras.layers.Dense(4, activation='tanh')])
  return multi_branch.build_multi_branch_model(extractor, 1, branch_units=3)


def _client(seed, shift, size):
  rng = np.random.default_rng(seed)
  x = (rng.normal(size=(size, 3)) + shift).astype(np.float32)
  raw = tf.data.Dataset.from_tensor_slices(collections.OrderedDict(x=x, y=rng.integers(0, 3, size).astype(np.int32)))
  return x, task_lib.preprocess_client(raw, 0, tff.simulation.baselines.ClientSpec(1, 4), shuffle_seed=(0, seed))


class ProcessTest(tf.test.TestCase):

  def _process(self, config, element_spec, client_learning_rate=0.0):
    model_fn = lambda: multi_branch.build_multi_network_model(_network, 2)
    features = lambda: pfedem.Features(config.features, None, None)
    client_work = pfedem.build_client_work(
        model_fn, features, lambda batch: batch, tff.learning.optimizers.build_sgdm(client_learning_rate),
        element_spec, 1, pfedem.initial_mixture(2, 3, seed=4), config)
    aggregator = per_tensor_mean.PerTensorWeightedMeanFactory() if config.model_weights == 'partition_size' else None
    return model_fn, learning_process.compose(model_fn, client_work, _SERVER_STEP, aggregator)

  def test_round_matches_numpy_and_only_sums_leave_clients(self):
    clients = [_client(seed, shift, size) for seed, shift, size in ((0, 2.0, 9), (1, -2.0, 6), (2, 2.0, 7))]
    config = pfedem.Config(features='raw')
    model_fn, process = self._process(config, clients[0][1].element_spec)
    state = process.set_model_weights(process.initialize(), learning_process.initial_weights(model_fn, 3))
    output = process.next(state, [d for _, d in clients])
    mixture = pfedem.initial_mixture(2, 3, seed=4)
    sums = {'n': np.zeros(2), 'mu': np.zeros((2, 3)), 'var': np.zeros((2, 3))}
    for x, _ in clients:  # Every client starts from the global GMM (Alg. 1 line 5).
      log_gammas = _numpy_e_step(x, mixture['means'], mixture['variances'], mixture['weights'])
      means, variances, _ = _numpy_m_step(x, np.exp(log_gammas))
      counts = np.bincount(log_gammas.argmax(1), minlength=2)
      sums['n'] += counts
      sums['mu'] += counts[:, None] * means
      sums['var'] += counts[:, None] * variances
    after = output.state.client_work
    present = sums['n'] > 0
    self.assertAllClose(after['means'][present], (sums['mu'] / np.maximum(sums['n'], 1)[:, None])[present],
                        atol=1e-4)
    self.assertAllClose(after['weights'], sums['n'] / sums['n'].sum())
    metrics = output.metrics['client_work']
    self.assertAllClose(metrics['learned_share_0'], sums['n'][0] / sums['n'].sum())
    self.assertEmpty(aggregation_only.per_client_leaks(process.next))

  def test_partition_size_weights_leave_an_unused_sub_model_unchanged(self):
    # One client, all examples far on one side: one partition gets everything, the other sub-model no update.
    clients = [_client(0, 5.0, 12)]
    config = pfedem.Config(features='raw', model_weights='partition_size')
    model_fn, process = self._process(config, clients[0][1].element_spec, client_learning_rate=0.5)
    initial = learning_process.initial_weights(model_fn, 3)
    state = process.set_model_weights(process.initialize(), initial)
    output = process.next(state, [clients[0][1]])
    counts = output.metrics['client_work']
    used = int(np.argmax([counts['learned_share_0'], counts['learned_share_1']]))
    after = process.get_model_weights(output.state).trainable
    model = model_fn()
    for variable, before, now in zip(tff.learning.models.ModelWeights.from_model(model).trainable,
                                     initial.trainable, after):
      moved = not np.allclose(before, now)
      in_used = variable.ref() in {v.ref() for v in model.get_layer(f'network_{used + 1}').trainable_variables}
      self.assertEqual(moved, in_used, variable.name)


class PerTensorMeanTest(tf.test.TestCase):

  def test_each_tensor_has_its_own_weights(self):
    value_type = tff.types.tensorflow_to_type([tf.TensorSpec([2], tf.float32), tf.TensorSpec([], tf.float32)])
    weight_type = tff.types.tensorflow_to_type([tf.TensorSpec([], tf.float32), tf.TensorSpec([], tf.float32)])
    process = per_tensor_mean.PerTensorWeightedMeanFactory().create(value_type, weight_type)
    values = [[np.array([1.0, 2.0], np.float32), np.float32(4.0)], [np.array([3.0, 6.0], np.float32), np.float32(8.0)]]
    weights = [[np.float32(1.0), np.float32(0.0)], [np.float32(3.0), np.float32(0.0)]]
    output = process.next(process.initialize(), values, weights)
    self.assertAllClose(output.result[0], [2.5, 5.0])  # (1 * [1, 2] + 3 * [3, 6]) / 4.
    self.assertAllClose(output.result[1], 0.0)  # No client weighs in.


if __name__ == '__main__':
  execution_context.install()
  tf.test.main()
