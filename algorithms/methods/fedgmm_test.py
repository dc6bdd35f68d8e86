"""FedGMM against numpy/scipy written from its paper: log-densities, the E and M steps, and the server aggregation."""

import numpy as np
from scipy import stats
import tensorflow as tf

from algorithms.methods import fedgmm
from utils import execution_context


def _random_covariances(rng, num, dim):
  factors = rng.normal(size=(num, dim, dim))
  return np.einsum('mij,mkj->mik', factors, factors) / dim + 0.3 * np.eye(dim)


def _numpy_e_step(pi, z, means, covariances, log_likelihoods):
  """q_i(m1, m2) proportional to pi(m1, m2) N(z_i; mu_m1, Sigma_m1) P_m2(y_i | x_i), normalized over (m1, m2)."""
  densities = np.stack([stats.multivariate_normal(m, c).pdf(z) for m, c in zip(means, covariances)], axis=1)
  joint = pi[np.newaxis] * densities[:, :, np.newaxis] * np.exp(log_likelihoods)[:, np.newaxis, :]
  return joint / joint.sum(axis=(1, 2), keepdims=True)


def _numpy_client_m_step(z, q):
  """(gamma_c, mu_m1,c, Sigma_m1,c, R_c) of Eq. (M) for one client."""
  r = q.sum(axis=2)
  mass = r.sum(axis=0)
  means = (r.T @ z) / mass[:, np.newaxis]
  covariances = np.stack([(r[:, m, np.newaxis] * (z - means[m])).T @ (z - means[m]) / mass[m]
                          for m in range(len(mass))])
  return q.sum(axis=0), means, covariances, mass


class FedGmmTest(tf.test.TestCase):

  def test_log_gaussians_match_scipy(self):
    rng = np.random.default_rng(0)
    z, means = rng.normal(size=(50, 4)), rng.normal(size=(3, 4))
    covariances = _random_covariances(rng, 3, 4)
    expected = np.stack([stats.multivariate_normal(m, c).logpdf(z) for m, c in zip(means, covariances)], axis=1)
    self.assertAllClose(fedgmm.log_gaussians(z.astype(np.float32), means.astype(np.float32),
                                             covariances.astype(np.float32)), expected, rtol=1e-4, atol=1e-4)

  def test_log_gaussians_stay_finite_far_from_the_means(self):
    log_density = fedgmm.log_gaussians(np.full([1, 8], 1e3, np.float32), np.zeros([2, 8], np.float32),
                                       np.tile(0.1 * np.eye(8, dtype=np.float32), [2, 1, 1]))
    self.assertTrue(np.all(np.isfinite(log_density)))
    self.assertAllClose(log_density[0, 0], stats.multivariate_normal(np.zeros(8), 0.1 * np.eye(8)).logpdf(
        np.full(8, 1e3)), rtol=1e-5)

  def test_e_step_and_client_m_step_match_numpy(self):
    rng = np.random.default_rng(1)
    z, means = rng.normal(size=(40, 3)), rng.normal(size=(2, 3))
    covariances = _random_covariances(rng, 2, 3)
    pi = rng.dirichlet(np.ones(6)).reshape(2, 3)
    log_likelihoods = np.log(rng.uniform(0.05, 1.0, size=(40, 3)))
    joint = fedgmm.log_joint(np.log(pi).astype(np.float32),
                             fedgmm.log_gaussians(z.astype(np.float32), means.astype(np.float32),
                                                  covariances.astype(np.float32)),
                             log_likelihoods.astype(np.float32))
    q = fedgmm.e_step(joint)
    expected_q = _numpy_e_step(pi, z, means, covariances, log_likelihoods)
    self.assertAllClose(q, expected_q, atol=1e-5)
    gamma, client_means, client_covariances, mass = _numpy_client_m_step(z, expected_q)
    sums = fedgmm.m_step(z.astype(np.float32), np.asarray(q), 'literal')
    self.assertAllClose(sums['gamma'], gamma, atol=1e-5)
    self.assertAllClose(sums['gamma'] / 40, gamma / gamma.sum(), atol=1e-6)  # pi_c = gamma_c / N_c sums to 1.
    self.assertAllClose(sums['first'] / sums['mass'][:, None], client_means, atol=1e-4)
    self.assertAllClose(sums['second'] / sums['mass'][:, None, None], client_covariances, atol=1e-4)

  def test_one_learner_is_algorithm_2(self):
    # With M2 = 1 the learner's log-likelihood is the same for every Gaussian and cancels in (E): q is Algorithm
    # 2's q(m) proportional to pi_c(m) N(z; mu_m, Sigma_m), whatever the labels.
    rng = np.random.default_rng(4)
    z, means = rng.normal(size=(30, 2)), rng.normal(size=(3, 2))
    covariances = _random_covariances(rng, 3, 2)
    pi = rng.dirichlet(np.ones(3))
    densities = np.stack([stats.multivariate_normal(m, c).pdf(z) for m, c in zip(means, covariances)], axis=1)
    unsupervised = pi * densities / (pi * densities).sum(axis=1, keepdims=True)
    log_densities = fedgmm.log_gaussians(z.astype(np.float32), means.astype(np.float32),
                                         covariances.astype(np.float32))
    q = fedgmm.e_step(fedgmm.log_joint(np.log(pi)[:, None].astype(np.float32), log_densities,
                                       np.log(rng.uniform(0.01, 1.0, size=(30, 1))).astype(np.float32)))
    self.assertAllClose(q[:, :, 0], unsupervised, atol=1e-5)

  def test_federated_gmm_rounds_raise_the_likelihood_and_find_the_components(self):
    # Algorithm 2 with every client in every round and the exact aggregation is centralized EM of a GMM whose
    # weights are per client (Lemma 2): the total log-likelihood never decreases (Theorem 1) and three
    # well-separated Gaussians are recovered from four clients with different mixture weights.
    rng = np.random.default_rng(5)
    truth = np.array([[-4.0, 0.0], [4.0, 0.0], [0.0, 5.0]])
    clients = []
    for weights in rng.dirichlet(np.ones(3), size=4):
      components = rng.choice(3, size=150, p=weights)
      clients.append((truth[components] + rng.normal(size=(150, 2))).astype(np.float32))
    config = fedgmm.Config(gaussians=3, learners=1, covariance_eps=1e-6, covariance_aggregation='exact')
    mixture = fedgmm.initial_mixture(config, feature_dim=2, seed=0)
    mixture['means'] = np.concatenate(clients)[rng.choice(600, 3, replace=False)]  # Means at data points.
    client_pi = [np.full([3, 1], 1.0 / 3, np.float32) for _ in clients]
    likelihoods = []
    for _ in range(25):
      sums, total = None, 0.0
      for c, z in enumerate(clients):
        log_densities = fedgmm.log_gaussians(z, mixture['means'], mixture['covariances'])
        joint = fedgmm.log_joint(np.log(client_pi[c]), log_densities, np.zeros([len(z), 1], np.float32))
        total += float(tf.reduce_sum(tf.reduce_logsumexp(joint, axis=[1, 2])))
        statistics = fedgmm.m_step(z, fedgmm.e_step(joint), 'exact')
        client_pi[c] = statistics['gamma'] / len(z)
        sums = statistics if sums is None else {k: sums[k] + statistics[k] for k in sums}
      likelihoods.append(total)
      mixture = {k: np.asarray(v) for k, v in fedgmm.aggregate_mixture(mixture, sums, config, 600.0).items()}
    self.assertTrue(np.all(np.diff(likelihoods) > -1e-5 * np.abs(likelihoods[1:])), likelihoods)
    found = mixture['means'][np.argsort(mixture['means'][:, 0] + 10 * mixture['means'][:, 1])]
    self.assertAllClose(found, truth[[0, 1, 2]], atol=0.3)

  def _clients(self):
    rng = np.random.default_rng(2)
    clients = []
    for size, shift in ((30, -1.0), (45, 0.5), (25, 2.0)):  # Clients whose features differ: covariances do too.
      z = rng.normal(size=(size, 3)) + shift
      q = rng.dirichlet(np.ones(4), size=size).reshape(size, 2, 2)
      clients.append((z, q))
    return clients

  def _aggregate(self, clients, aggregation):
    config = fedgmm.Config(gaussians=2, learners=2, covariance_aggregation=aggregation, covariance_eps=0.1)
    sums = [fedgmm.m_step(z.astype(np.float32), q.astype(np.float32), aggregation) for z, q in clients]
    totals = tf.nest.map_structure(lambda *values: tf.add_n(values), *sums)
    mixture = fedgmm.initial_mixture(config, 3, seed=0)
    return fedgmm.aggregate_mixture(mixture, totals, config, tf.constant(100.0))

  def test_exact_aggregation_is_the_centralized_m_step(self):
    clients = self._clients()
    aggregated = self._aggregate(clients, 'exact')
    z = np.concatenate([z for z, _ in clients])
    q = np.concatenate([q for _, q in clients])
    gamma, means, covariances, _ = _numpy_client_m_step(z, q)  # All data at once: the centralized M step.
    self.assertAllClose(aggregated['means'], means, atol=1e-5)  # Lemma 2.
    self.assertAllClose(aggregated['covariances'], covariances + 0.1 * np.eye(3), atol=1e-4)
    self.assertAllClose(aggregated['weights'], gamma / 100.0, atol=1e-6)  # Footnote 3, corrected.

  def test_literal_aggregation_weighs_client_covariances_and_misses_the_spread(self):
    clients = self._clients()
    aggregated = self._aggregate(clients, 'literal')
    per_client = [_numpy_client_m_step(z, q) for z, q in clients]
    masses = np.stack([mass for _, _, _, mass in per_client])  # Gamma_c(m1) [C, M1].
    expected = np.einsum('cm,cmij->mij', masses, np.stack([c for _, _, c, _ in per_client])) / masses.sum(0)[:, None,
                                                                                                          None]
    self.assertAllClose(aggregated['covariances'], expected + 0.1 * np.eye(3), atol=1e-4)
    exact = self._aggregate(clients, 'exact')
    self.assertAllClose(aggregated['means'], exact['means'], atol=1e-5)
    # The clients' means differ, so the centralized covariance is larger by exactly their spread around the pooled
    # mean, sum_c R_c (mu_c - mu)(mu_c - mu)^T / sum_c R_c: positive semi-definite, of rank <= 2 for three clients
    # (an earlier check that every eigenvalue is > 0 passed only where float rounding left the third one positive).
    client_means = np.stack([means for _, means, _, _ in per_client])  # [C, M1, d]
    deviations = client_means - np.asarray(exact['means'])[np.newaxis]
    spread = np.einsum('cm,cmi,cmj->mij', masses, deviations, deviations) / masses.sum(0)[:, None, None]
    self.assertAllClose(exact['covariances'] - aggregated['covariances'], spread, atol=1e-4)
    self.assertGreater(np.linalg.eigvalsh(spread).max(), 1.0)

  def test_a_component_without_mass_keeps_its_parameters(self):
    config = fedgmm.Config(gaussians=2, learners=1)
    mixture = fedgmm.initial_mixture(config, 2, seed=3)
    q = np.zeros([5, 2, 1], np.float32)
    q[:, 0, 0] = 1.0
    sums = fedgmm.m_step(np.ones([5, 2], np.float32), q, 'literal')
    aggregated = fedgmm.aggregate_mixture(mixture, sums, config, tf.constant(5.0))
    self.assertAllClose(aggregated['means'][1], mixture['means'][1])
    self.assertAllClose(aggregated['covariances'][1], mixture['covariances'][1])
    self.assertAllClose(aggregated['means'][0], [1.0, 1.0])

  def test_prediction_mixes_learners_by_prior_and_density(self):
    # Eq. 3: P(y | x) = sum_{m1,m2} w(m1, m2 | x) softmax(theta_m2(x)), w proportional to pi N(z).
    rng = np.random.default_rng(4)
    pi = rng.dirichlet(np.ones(4)).reshape(2, 2).astype(np.float32)
    log_densities = rng.normal(size=(6, 2)).astype(np.float32)
    logits = rng.normal(size=(6, 2, 3)).astype(np.float32)
    log_w = fedgmm.prediction_log_weights(np.log(pi), log_densities)
    mixed = np.exp(fedgmm.mixture_logits(logits, tf.reduce_logsumexp(log_w, axis=1)))
    w = pi[None] * np.exp(log_densities)[:, :, None]
    w /= w.sum(axis=(1, 2), keepdims=True)
    softmax = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    self.assertAllClose(mixed, np.einsum('nab,nbc->nc', w, softmax), atol=1e-6)

  def test_random_projection_features(self):
    config = fedgmm.Config(features='random_projection', feature_dim=5)
    features = fedgmm.Features(config, input_dim=12, seed=0)
    x = np.random.default_rng(5).normal(size=(4, 3, 4)).astype(np.float32)
    self.assertEqual(features.dim, 5)
    z = features(x)
    self.assertAllClose(z, x.reshape(4, 12) @ features._projection)  # pylint: disable=protected-access
    self.assertAllClose(fedgmm.Features(fedgmm.Config(), input_dim=12, seed=0)(x), x.reshape(4, 12))

  def test_bad_settings_are_one_line(self):
    for field, value in (('features', 'pca'), ('covariance_aggregation', 'mean'), ('gaussians', 0),
                         ('covariance_eps', 0.0)):
      with self.assertRaisesRegex(ValueError, f'^--fedgmm_{field} must be'):
        fedgmm.Config(**{field: value}).validate()


if __name__ == '__main__':
  execution_context.install()
  tf.test.main()
