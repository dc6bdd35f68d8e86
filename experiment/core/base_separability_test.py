"""Tests `experiment.core.base_separability` on features whose mixture structure is known: bases that are the dominant
split, bases that a larger split of every base hides, and domains that only clients' means show."""

import numpy as np
from scipy import stats
import tensorflow as tf

from experiment.core import base_separability


def _hidden_bases(rng, per_base=600):
  """Base b: z_1 = 3 b + N(0, 1) (the bases, 3 standard deviations apart); z_0 = +-10 + N(0, 1) in both bases (a
  split of every base 20 standard deviations wide, which the likelihood prefers)."""
  domains = np.repeat([0, 1], per_base)
  first = rng.choice([-10.0, 10.0], size=2 * per_base) + rng.normal(size=2 * per_base)
  second = 3.0 * domains + rng.normal(size=2 * per_base)
  return np.stack([first, second], axis=1), domains


class SeparabilityTest(tf.test.TestCase):

  def test_bases_that_are_the_dominant_split_are_found(self):
    rng = np.random.default_rng(0)
    domains = np.repeat([0, 1], 500)
    features = rng.normal(size=(1000, 4)) + 6.0 * domains[:, np.newaxis]
    result = base_separability.separability(features, domains, 2, starts=3)
    self.assertGreater(result.best_ari, 0.95)
    self.assertGreater(result.bases_ari, 0.95)
    self.assertAllClose(result.bases_log_likelihood, result.best_log_likelihood, atol=0.01)
    self.assertGreater(result.probe_accuracy, 0.99)

  def test_bases_hidden_by_a_wider_split_are_carried_but_not_found(self):
    features, domains = _hidden_bases(np.random.default_rng(1))
    result = base_separability.separability(features, domains, 2, starts=5)
    self.assertLess(abs(result.best_ari), 0.05)  # The maximum-likelihood GMM splits z_0.
    self.assertGreater(result.bases_ari, 0.6)  # Domains' own Gaussians: a 3-sigma split, ~93% of examples right.
    self.assertLess(result.bases_log_likelihood, result.best_log_likelihood - 1.0)
    self.assertGreater(result.probe_accuracy, 0.88)

  def test_the_bases_log_likelihood_is_their_diagonal_gaussians_mixture(self):
    features, domains = _hidden_bases(np.random.default_rng(2), per_base=50)
    features, domains = features[:70], domains[:70]  # Unequal shares: 50 and 20.
    expected = []
    for z in features:
      joint = [np.mean(domains == k) * np.prod(stats.norm.pdf(z, features[domains == k].mean(0),
                                                              features[domains == k].std(0)))
               for k in range(2)]
      expected.append(np.log(sum(joint)))
    result = base_separability.separability(features, domains, 2, starts=1)
    self.assertAllClose(result.bases_log_likelihood, np.mean(expected), rtol=1e-10)

  def test_client_means_find_domains_that_every_example_hides_behind_its_class(self):
    # Example: a class offset of +-8 (balanced within every client) on z_0 plus the domain's +-1 on z_1, noise 1:
    # k-means on examples splits the classes; a client's mean cancels the class and keeps the domain.
    rng = np.random.default_rng(3)
    clients, domains = [], []
    for client in range(40):
      domain = client % 2
      classes = rng.permutation(np.repeat([-8.0, 8.0], 10))
      z = np.stack([classes, np.full(20, 2.0 * domain - 1.0)], axis=1) + rng.normal(size=(20, 2))
      clients.append(np.split(z, 2))  # Two batches of 10.
      domains.append(domain)
    result = base_separability.separation_by_granularity(clients, domains, 2, seed=0)
    self.assertEqual({name: g.count for name, g in result.items()}, {'example': 800, 'batch': 80, 'client': 40})
    self.assertLess(abs(result['example'].kmeans_ari), 0.05)
    self.assertGreater(result['client'].kmeans_ari, 0.95)
    self.assertGreater(result['client'].kmeans_ari, result['batch'].kmeans_ari)
    self.assertBetween(result['example'].probe_accuracy, 0.75, 0.9)  # A 2-sigma split: about 84% right.
    self.assertGreater(result['client'].probe_accuracy, 0.95)


if __name__ == '__main__':
  tf.test.main()
