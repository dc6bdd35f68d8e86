"""Checks Eq. 2 of the ShiftEx paper against a numpy reference written from the equation, and the exhaustive optimum
against a search over every labelling."""

import itertools

import numpy as np
from scipy.spatial import distance
import tensorflow as tf

from algorithms.core import facility_location


def _reference(choice, profiles, histograms, sizes, memories, open_existing, gamma_k, lam, mu):
  """Eq. 2 by loops: MMD of point masses, lambda per new expert used, mu x JSD of each used expert's labels."""
  k = len(memories)
  experts = sorted(set(choice))
  if any(e < k and not open_existing[e] for e in experts):
    return np.inf
  pooled = (sizes[:, None] * histograms).sum(0) / sizes.sum()
  total = 0.0
  for e in experts:
    parties = [i for i, c in enumerate(choice) if c == e]
    profile = memories[e] if e < k else profiles[parties].mean(0)
    for i in parties:
      total += np.sqrt(max(2 - 2 * np.exp(-gamma_k * np.sum((profiles[i] - profile)**2)), 0))
    labels = (sizes[parties, None] * histograms[parties]).sum(0) / sizes[parties].sum()
    total += mu * distance.jensenshannon(labels, pooled)**2 + (lam if e >= k else 0.0)
  return total


class FacilityLocationTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    rng = np.random.default_rng(0)
    self.profiles = rng.normal(size=(4, 3)).astype(np.float32)
    self.histograms = rng.dirichlet(np.ones(5), size=4).astype(np.float32)
    self.sizes = rng.integers(10, 50, size=4).astype(np.float32)
    self.memories = rng.normal(size=(2, 3)).astype(np.float32)
    self.open = np.array([True, False])
    self.terms = dict(gamma_k=0.4, new_expert_cost=0.3, imbalance_weight=2.0)

  def _objective(self, candidates, sizes=None):
    return facility_location.objective(
        tf.constant(candidates), tf.constant(self.profiles), tf.constant(self.histograms),
        tf.constant(self.sizes if sizes is None else sizes), tf.constant(self.memories), tf.constant(self.open),
        **self.terms).numpy()

  def test_objective_matches_the_reference(self):
    candidates = facility_location.assignments(4, 2)
    values = self._objective(candidates)
    for choice, value in zip(candidates, values):
      expected = _reference(list(choice), self.profiles, self.histograms, self.sizes, self.memories, self.open,
                            0.4, 0.3, 2.0)
      if np.isinf(expected):
        self.assertTrue(np.isinf(value))
      else:
        self.assertAllClose(value, expected, rtol=1e-4, atol=1e-5)

  def test_restricted_growth_covers_every_labelling(self):
    candidates = facility_location.assignments(4, 2)
    best = min(_reference(list(choice), self.profiles, self.histograms, self.sizes, self.memories, self.open,
                          0.4, 0.3, 2.0) for choice in itertools.product(range(2 + 4), repeat=4))
    optimal, _ = facility_location.optimum(candidates, tf.constant(self.profiles), tf.constant(self.histograms),
                                           tf.constant(self.sizes), tf.constant(self.memories),
                                           tf.constant(self.open), **self.terms)
    self.assertAllClose(optimal, best, rtol=1e-4)
    self.assertLen(candidates, len({tuple(c) for c in candidates}))

  def test_padding_rows_change_nothing(self):
    candidates = facility_location.assignments(4, 2)
    padded = self.sizes.copy()
    padded[3] = 0.0
    values = self._objective(candidates, padded)
    for choice, value in zip(candidates[:50], values[:50]):
      expected = _reference(list(choice[:3]), self.profiles[:3], self.histograms[:3], self.sizes[:3],
                            self.memories, self.open, 0.4, 0.3, 2.0)
      if np.isfinite(expected):
        self.assertAllClose(value, expected, rtol=1e-4, atol=1e-5)


if __name__ == '__main__':
  tf.test.main()
