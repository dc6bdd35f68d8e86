"""Tests FedTEM's pieces against numpy references: whole-client statistics, Eq. 10 with priors, Eq. 4."""

import collections

import numpy as np
from scipy import special
import tensorflow as tf

from algorithms.core import gmm
from algorithms.core import objectives
from algorithms.core import routing
from algorithms.methods import fedtem


def _numpy_m_step(weights, means, variances, assignments, counts, client_means, client_variances, beta, floor):
  """Eq. 10 and Appendix A.4 written out per mode."""
  new_means, new_variances = means.copy(), variances.copy()
  mode_totals = np.array([counts[assignments == k].sum() for k in range(len(weights))], np.float64)
  for k in range(len(weights)):
    chosen = assignments == k
    if mode_totals[k] > 0:
      share = counts[chosen][:, None] / mode_totals[k]
      new_means[k] = (share * client_means[chosen]).sum(0)
      new_variances[k] = np.maximum((share * client_variances[chosen]).sum(0), floor)
  new_weights = beta * weights + (1 - beta) * mode_totals / mode_totals.sum()
  return new_weights, new_means, new_variances


class FedTemTest(tf.test.TestCase):

  def _joining(self, keys, prior):
    threshold = fedtem.mode_one_threshold(keys, prior)
    return [bool(fedtem.at_or_above(key, threshold)) for key in keys]

  def test_threshold_takes_the_prior_share_of_top_clients(self):
    scores = np.array([0.3, -2.0, 5.0, 1.0, -0.5], np.float32)
    keys = np.stack([scores, np.linspace(0.1, 0.9, 5)], axis=1).astype(np.float32)
    for prior, joining in ((0.0, 0), (0.09, 0), (0.1, 1), (0.5, 3), (0.62, 3), (1.0, 5)):
      chosen = self._joining(keys, prior)
      self.assertEqual(sum(chosen), joining, f'prior {prior}')  # floor(q m + 1/2).
      self.assertAllEqual(np.sort(scores[chosen]), np.sort(scores)[::-1][:joining][::-1])  # The highest scores.

  def test_ties_never_change_the_number_joining_mode_one(self):
    # Every score +inf (a zero mixture weight) or equal: the tie-break decides, the count stays floor(q m + 1/2).
    rng = np.random.default_rng(7)
    for scores in (np.full(10, np.inf), np.full(10, 2.5), np.array([1.0, 1.0, 1.0, 0.0, 0.0, 3.0, 3.0, 1.0])):
      tie_breaks = rng.uniform(size=len(scores))
      keys = np.stack([scores, tie_breaks], axis=1).astype(np.float32)
      for prior in (0.0, 0.3, 0.5, 0.75, 1.0):
        chosen = self._joining(keys, prior)
        self.assertEqual(sum(chosen), int(np.floor(prior * len(scores) + 0.5)), f'{scores}, prior {prior}')
        lexicographic = sorted(range(len(scores)), key=lambda i: (scores[i], tie_breaks[i]), reverse=True)
        self.assertCountEqual(np.flatnonzero(chosen), lexicographic[:sum(chosen)])

  def test_no_client_gives_an_empty_mode_one(self):
    self.assertFalse(np.isfinite(fedtem.mode_one_threshold(np.zeros([0, 2], np.float32), 0.5)).any())

  def test_ranking_key_tie_break_is_uniform_and_keyed(self):
    draws = [float(fedtem.ranking_key(tf.constant(1.0), tf.constant(3, tf.int64), tf.constant(k, tf.int64))[1])
             for k in range(400)]
    self.assertBetween(np.mean(draws), 0.5 - 3 * 0.289 / 20, 0.5 + 3 * 0.289 / 20)  # 3 s.e. of U(0, 1) means.
    self.assertLen(set(draws), 400)
    self.assertEqual(draws[5], float(fedtem.ranking_key(tf.constant(9.0), tf.constant(3, tf.int64),
                                                        tf.constant(5, tf.int64))[1]))

  def test_m_step_matches_numpy(self):
    rng = np.random.default_rng(0)
    m, d = 6, 4
    counts = rng.integers(5, 50, size=m).astype(np.float32)
    client_means = rng.normal(size=(m, d)).astype(np.float32)
    client_variances = rng.uniform(0.1, 1.0, size=(m, d)).astype(np.float32)
    scores = rng.normal(size=m).astype(np.float32)
    mixture = fedtem.initial_mixture(2, d, seed=1)
    keys = np.stack([scores, np.zeros(m)], axis=1).astype(np.float32)
    threshold = fedtem.mode_one_threshold(keys, 0.5)
    totals = collections.defaultdict(float)
    for i in range(m):
      r = fedtem.assignment(keys[i], np.zeros(2, np.float32), threshold, use_prior=True).numpy()
      totals['count'] += r * counts[i]
      totals['feature_sum'] += r[:, None] * counts[i] * client_means[i]
      totals['squared_deviation_sum'] += r[:, None] * counts[i] * client_variances[i]
    result = fedtem.m_step(mixture, totals['count'], totals['feature_sum'], totals['squared_deviation_sum'],
                           pi_momentum=0.99, variance_floor=1e-3)
    assignments = np.where(scores >= np.sort(scores)[::-1][2], 0, 1)  # The 3 highest scores join mode 1.
    weights, means, variances = _numpy_m_step(mixture['weights'], mixture['means'], mixture['variances'],
                                              assignments, counts, client_means, client_variances, 0.99, 1e-3)
    self.assertAllClose(result['weights'], weights)
    self.assertAllClose(result['means'], means, atol=1e-5)
    self.assertAllClose(result['variances'], variances, atol=1e-5)

  def test_statistics_decay_is_a_mass_weighted_average(self):
    mixture = fedtem.initial_mixture(2, 2, seed=0)
    mixture['mass'] = np.array([30.0, 5.0], np.float32)
    counts = np.array([10.0, 20.0], np.float32)
    feature_sums = np.array([[10.0, 20.0], [40.0, 0.0]], np.float32)  # This round's means: (1, 2) and (2, 0).
    squared = np.array([[5.0, 5.0], [20.0, 20.0]], np.float32)  # This round's variances: 0.5 and 1.0.
    result = fedtem.m_step(mixture, counts, feature_sums, squared, pi_momentum=0.5, variance_floor=1e-3,
                           statistics_decay=0.5)
    old_mass = 0.5 * np.array([30.0, 5.0])  # 15 and 2.5, against 10 and 20 new samples.
    expected_means = [(15 * mixture['means'][0] + 10 * np.array([1.0, 2.0])) / 25,
                      (2.5 * mixture['means'][1] + 20 * np.array([2.0, 0.0])) / 22.5]
    expected_variances = [(15 * 1.0 + 10 * 0.5) / 25, (2.5 * 1.0 + 20 * 1.0) / 22.5]
    self.assertAllClose(result['means'], expected_means, atol=1e-6)
    self.assertAllClose(result['variances'], np.array(expected_variances)[:, None] * np.ones((2, 2)), atol=1e-6)
    self.assertAllClose(result['mass'], old_mass + counts)
    self.assertAllClose(result['weights'], 0.5 * 0.5 + 0.5 * counts / 30.0)

  def test_empty_mode_keeps_its_parameters(self):
    mixture = fedtem.initial_mixture(2, 3, seed=0)
    counts = np.array([10.0, 0.0], np.float32)
    result = fedtem.m_step(mixture, counts, np.ones((2, 3), np.float32) * 10, np.ones((2, 3), np.float32),
                           pi_momentum=0.0, variance_floor=1e-3)
    self.assertAllClose(result['means'][1], mixture['means'][1])
    self.assertAllClose(result['variances'][1], mixture['variances'][1])
    self.assertAllClose(result['means'][0], np.ones(3))
    # beta = 0: pi = (1, 0) by Eq. 10, floored at 1e-6 and renormalized, so log pi_2 stays finite.
    self.assertAllClose(result['weights'], [1.0 / (1.0 + 1e-6), 1e-6 / (1.0 + 1e-6)], rtol=1e-6)
    self.assertTrue(np.all(np.isfinite(np.log(result['weights']))))

  def test_em_only_assigns_by_argmax(self):
    log_mle = np.log(np.array([0.3, 0.7], np.float32))
    self.assertAllEqual(fedtem.assignment(np.array([10.0, 0.5], np.float32), log_mle,
                                          np.zeros(2, np.float32), use_prior=False), [0.0, 1.0])

  def test_ranking_score_orders_like_pi_one_and_stays_finite(self):
    pis = np.array([0.2, 0.5, 0.9, 0.999], np.float32)
    scores = [float(fedtem.ranking_score(np.log([p, 1 - p]))) for p in pis]
    self.assertEqual(sorted(scores), scores)
    # pi_1 = 1 - 1e-30 rounds to 1.0 in float32, the log-odds does not.
    self.assertAllClose(fedtem.ranking_score(np.array([0.0, -69.0], np.float32)), 69.0)

  def test_feature_pass_over_a_whole_client(self):
    rng = np.random.default_rng(2)
    x = rng.normal(size=(23, 4)).astype(np.float32)
    model = tf.keras.Model(inputs := tf.keras.Input((4,)), {'features': inputs * 2.0, 'logits': inputs})
    mixture = fedtem.initial_mixture(2, 4, seed=3)
    batches = tf.data.Dataset.from_tensor_slices({'x': x, 'mode': np.full(23, 1, np.int32)}).batch(5)
    examples, _, _ = routing.client_examples(batches)
    result = fedtem.feature_pass(model, examples, mixture['means'], mixture['variances'], mixture['weights'])
    features = 2.0 * x
    log_gammas = gmm.log_responsibilities(gmm.log_gaussians(features, mixture['means'], mixture['variances']),
                                          np.log(mixture['weights']))
    self.assertAllClose(result.log_mle, gmm.log_client_mle(log_gammas), atol=1e-5)
    self.assertAllClose(result.moments.squared_deviation_sum, features.var(0) * 23, rtol=1e-4)
    self.assertEqual(result.mode_one_count, np.sum(np.argmax(log_gammas, axis=1) == 0))  # Eq. 25 numerator.
    self.assertEqual(result.mode, 1)

  def test_selected_branch_objective_is_eq_4(self):
    rng = np.random.default_rng(4)
    logits = rng.normal(size=(6, 2, 5)).astype(np.float32)
    labels = rng.integers(0, 5, size=6)
    lam, eps = 0.3, 0.4
    result = objectives.selected_branch(tf.constant(1), lam, eps)({'logits': logits}, {'y': labels})
    log_p = logits - special.logsumexp(logits, axis=-1, keepdims=True)
    chosen = -log_p[np.arange(6), 1, labels].mean()
    smoothed = eps / 5 + (1 - eps) * np.eye(5)[labels]
    other = -(smoothed * log_p[:, 0]).sum(-1).mean()
    self.assertAllClose(result.loss, chosen + lam * other, atol=1e-5)
    self.assertAllClose(result.num_correct, np.sum(logits[:, 1].argmax(-1) == labels))


if __name__ == '__main__':
  tf.test.main()
