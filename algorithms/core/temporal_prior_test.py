"""Tests the temporal priors against hand-worked values, eagerly and inside a tf.function (Eq. 3, Eq. 26)."""

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from algorithms.core import temporal_prior


class TemporalPriorTest(tf.test.TestCase, parameterized.TestCase):

  def test_linear_and_cosine_by_hand(self):
    # T = 8: linear 1, 0.75, 0.5, 0.25, 0, 0.25, 0.5, 0.75; cosine (cos(pi t / 4) + 1) / 2.
    rounds = tf.range(9)
    self.assertAllClose(temporal_prior.linear(rounds, 8), [1, .75, .5, .25, 0, .25, .5, .75, 1])
    c = (np.sqrt(0.5) + 1) / 2
    self.assertAllClose(temporal_prior.cosine(rounds, 8), [1, c, .5, 1 - c, 0, 1 - c, .5, c, 1])

  def test_soft_prior_trace(self):
    # (t, observed q~'_S(t), expected q~_S(t)) for T = 8, starting from q~_S = 0.4.
    trace = [
        (1, 0.2, 1.0),  # t mod T = 1: reset to 1 whatever is observed.
        (2, 0.7, 0.7),  # 1 < t mod T < T/2: min(1, 0.7).
        (3, 0.9, 0.7),  # min(0.7, 0.9): cannot increase in the first half.
        (3, 0.2, 0.2),  # min(0.7, 0.2)  (same phase again, from the previous value 0.7).
        (4, 0.9, 0.0),  # t mod T = T/2: reset to 0.
        (5, 0.3, 0.3),  # t mod T > T/2: max(0, 0.3).
        (6, 0.1, 0.3),  # max(0.3, 0.1): cannot decrease in the second half.
        (7, 0.8, 0.8),
        (8, 0.6, 0.8),  # t mod T = 0 closes the period: max branch.
        (9, 0.0, 1.0),  # Next period starts at 1.
    ]
    previous = 0.4
    for t, observed, expected in trace:
      if (t, observed) == (3, 0.2):
        previous = 0.7
      value = temporal_prior.soft(t, 8, previous, observed)
      self.assertAllClose(value, expected, msg=f't={t}')
      previous = float(value)

  def test_soft_prior_in_graph_with_tensor_round(self):

    @tf.function
    def step(t, previous, observed):
      return temporal_prior.soft(t, 8, previous, observed)

    self.assertAllClose(step(tf.constant(2, tf.int64), 0.5, 0.6), 0.5)
    self.assertAllClose(step(tf.constant(13, tf.int64), 0.5, 0.6), 0.6)  # 13 mod 8 = 5 > 4: max.

  @parameterized.named_parameters(('linear', 'linear'), ('cosine', 'cosine'))
  def test_prior_value_ignores_state_for_fixed_priors(self, name):
    value = temporal_prior.prior_value(name, 3, 16, previous=0.123, observed_ratio=0.456)
    expected = getattr(temporal_prior, name)(3, 16)
    self.assertAllClose(value, expected)

  def test_unknown_prior(self):
    with self.assertRaisesRegex(ValueError, 'prior must be one of'):
      temporal_prior.prior_value('quadratic', 1, 8, 0.0, 0.0)


if __name__ == '__main__':
  tf.test.main()
