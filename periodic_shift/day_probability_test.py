"""Tests q(t) against values worked out by hand (Eq. 3)."""

from absl.testing import absltest
from absl.testing import parameterized
import numpy as np

from periodic_shift import day_probability


class DayProbabilityTest(parameterized.TestCase):

  @parameterized.named_parameters(
      # |2 (t mod T) / T - 1|^p with T = 8.
      ('start_of_day', 0, 1.0, 1.0),
      ('quarter', 2, 1.0, 0.5),
      ('midnight', 4, 1.0, 0.0),
      ('three_quarters', 6, 1.0, 0.5),
      ('next_period', 10, 1.0, 0.5),
      ('p_above_one', 3, 2.0, 0.0625),  # |6/8 - 1|^2 = 0.25^2
      ('p_below_one', 2, 0.5, 0.7071067811865476),  # 0.5^0.5
      ('p_quarter', 7, 0.25, 0.9306048591020996),  # |14/8 - 1|^0.25 = 0.75^0.25
  )
  def test_linear(self, t, p, expected):
    self.assertAlmostEqual(day_probability.linear(t, 8, p), expected, places=12)

  @parameterized.named_parameters(
      # [(cos(2 pi t / T) + 1) / 2]^p with T = 8.
      ('start_of_day', 0, 1.0, 1.0),
      ('eighth', 1, 1.0, (np.sqrt(0.5) + 1.0) / 2.0),
      ('quarter', 2, 1.0, 0.5),
      ('midnight', 4, 1.0, 0.0),
      ('three_quarters', 6, 1.0, 0.5),
      ('p_above_one', 1, 2.0, ((np.sqrt(0.5) + 1.0) / 2.0)**2),
      ('p_below_one', 2, 0.5, np.sqrt(0.5)),
      ('next_period', 9, 1.0, (np.sqrt(0.5) + 1.0) / 2.0),
  )
  def test_cosine(self, t, p, expected):
    self.assertAlmostEqual(day_probability.cosine(t, 8, p), expected, places=12)

  def test_block_cyclic_even_and_odd_period(self):
    np.testing.assert_array_equal(day_probability.block_cyclic(np.arange(16), 8), [1] * 4 + [0] * 4 + [1] * 4 + [0] * 4)
    np.testing.assert_array_equal(day_probability.block_cyclic(np.arange(5), 5), [1, 1, 1, 0, 0])

  def test_exponent_shifts_the_average_towards_day_or_night(self):
    t = np.arange(256)
    for shift in (day_probability.linear, day_probability.cosine):
      self.assertAlmostEqual(shift(t, 256, 1.0).mean(), 0.5, places=2)
      self.assertGreater(shift(t, 256, 0.25).mean(), 0.7)
      self.assertLess(shift(t, 256, 4.0).mean(), 0.3)

  def test_none_is_the_population_share(self):
    fn = day_probability.build_day_probability_fn('none', 8, 1.0, day_population_share=0.3)
    self.assertEqual([fn(t) for t in range(4)], [0.3] * 4)

  def test_built_functions_match_module_functions(self):
    fn = day_probability.build_day_probability_fn('cosine', 16, 2.0, day_population_share=0.5)
    self.assertAlmostEqual(fn(3), float(day_probability.cosine(3, 16, 2.0)))

  @parameterized.named_parameters(
      ('unknown_fn', 'sine', 8, 1.0, 'shift_fn must be one of'),
      ('short_period', 'linear', 1, 1.0, 'period must be at least 2'),
      ('zero_p', 'linear', 8, 0.0, 'shift_p must be > 0'),
      ('negative_p', 'cosine', 8, -1.0, 'shift_p must be > 0'),
  )
  def test_invalid_arguments(self, shift_fn, period, p, message):
    with self.assertRaisesRegex(ValueError, message):
      day_probability.build_day_probability_fn(shift_fn, period, p, day_population_share=0.5)


if __name__ == '__main__':
  absltest.main()
