"""Statistical and reproducibility tests of the round sampler (Eq. 2)."""

import collections

from absl.testing import absltest
import numpy as np

from periodic_shift import client_sampler
from periodic_shift import day_probability

_DAY_IDS = [f'd{i}' for i in range(40)]
_NIGHT_IDS = [f'n{i}' for i in range(60)]


def _linear_sampler(seed, period=16, p=1.0, clients_per_round=10):
  q = day_probability.build_day_probability_fn('linear', period, p, day_population_share=0.4)
  return client_sampler.RoundSampler([_DAY_IDS, _NIGHT_IDS], clients_per_round,
                                     client_sampler.day_night_probabilities(q), seed)


class RoundSamplerTest(absltest.TestCase):

  def test_day_count_is_binomial_in_every_phase(self):
    period, m, rounds = 16, 10, 4000
    sampler = _linear_sampler(seed=3, period=period, clients_per_round=m)
    day_counts = collections.defaultdict(list)
    for t in range(rounds):
      sample = sampler.sample(t)
      day_counts[t % period].append(int(np.sum(sample.modes == client_sampler.DAY)))
    for phase, counts in day_counts.items():
      q = abs(2.0 * phase / period - 1.0)  # q_{L,1}, written out independently of the module.
      mean, n = np.mean(counts), len(counts)
      if q in (0.0, 1.0):
        self.assertTrue(np.all(np.asarray(counts) == m * q), msg=f'phase {phase}')
        continue
      # Binomial(m, q): the mean of n draws has standard error sqrt(m q (1 - q) / n). 4.5 sigma over 14 phases.
      standard_error = np.sqrt(m * q * (1 - q) / n)
      self.assertLess(abs(mean - m * q), 4.5 * standard_error, msg=f'phase {phase}')
      # The variance matches a binomial's too (loose: sample variance of 250 draws).
      self.assertBetween(np.var(counts), 0.7 * m * q * (1 - q), 1.3 * m * q * (1 - q))

  def test_modes_match_ids_and_no_client_repeats_within_a_round(self):
    sampler = _linear_sampler(seed=0, p=0.5)
    for t in range(200):
      sample = sampler.sample(t)
      self.assertLen(sample.client_ids, 10)
      self.assertLen(set(sample.client_ids), 10)
      for client_id, mode in zip(sample.client_ids, sample.modes):
        self.assertEqual(client_id[0], 'd' if mode == client_sampler.DAY else 'n')

  def test_same_seed_same_clients_regardless_of_history(self):
    first, second = _linear_sampler(seed=7), _linear_sampler(seed=7)
    for t in range(50):
      first.sample(t)
    # `second` never saw rounds 0-49: round 50 depends on (seed, round) only, as a resumed run needs.
    self.assertEqual(first.sample(50).client_ids, second.sample(50).client_ids)
    self.assertEqual([first.sample(t).client_ids for t in range(20)],
                     [second.sample(t).client_ids for t in range(20)])

  def test_different_seeds_draw_different_clients(self):
    a = [_linear_sampler(seed=1).sample(t).client_ids for t in range(20)]
    b = [_linear_sampler(seed=2).sample(t).client_ids for t in range(20)]
    self.assertNotEqual(a, b)

  def test_no_shift_gives_every_client_the_same_chance(self):
    m, rounds = 10, 5000
    share = len(_DAY_IDS) / (len(_DAY_IDS) + len(_NIGHT_IDS))
    q = day_probability.build_day_probability_fn('none', 16, 1.0, day_population_share=share)
    sampler = client_sampler.RoundSampler([_DAY_IDS, _NIGHT_IDS], m, client_sampler.day_night_probabilities(q),
                                          seed=5)
    counts = collections.Counter()
    for t in range(rounds):
      counts.update(sampler.sample(t).client_ids)
    expected = rounds * m / 100  # Each of the 100 clients joins with probability m / N per round.
    per_client = np.array([counts[i] for i in _DAY_IDS + _NIGHT_IDS])
    # Day and night clients alike: the two group means agree with m / N within 4 standard errors.
    for group in (per_client[:40], per_client[40:]):
      self.assertLess(abs(group.mean() - expected), 4 * np.sqrt(expected / len(group)))

  def test_three_modes(self):
    ids = [[f'{k}-{i}' for i in range(20)] for k in range(3)]
    sampler = client_sampler.RoundSampler(ids, 6, lambda t: np.array([0.5, 0.3, 0.2]), seed=0)
    totals = np.zeros(3)
    for t in range(2000):
      totals += np.bincount(sampler.sample(t).modes, minlength=3)
    np.testing.assert_allclose(totals / totals.sum(), [0.5, 0.3, 0.2], atol=0.02)

  def test_invalid_arguments(self):
    probabilities = lambda t: np.array([0.5, 0.5])
    with self.assertRaisesRegex(ValueError, 'between 1 and the smallest mode population'):
      client_sampler.RoundSampler([_DAY_IDS, _NIGHT_IDS], 41, probabilities, seed=0)
    with self.assertRaisesRegex(ValueError, 'between 1 and the smallest mode population'):
      client_sampler.RoundSampler([_DAY_IDS, _NIGHT_IDS], 0, probabilities, seed=0)
    with self.assertRaisesRegex(ValueError, 'at least 2 mode populations'):
      client_sampler.RoundSampler([_DAY_IDS], 1, probabilities, seed=0)


if __name__ == '__main__':
  absltest.main()
