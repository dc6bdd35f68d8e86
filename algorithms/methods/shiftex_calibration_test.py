"""ShiftEx's detector on streams with a known truth (`shiftex_streams`): each party's permutation tests
(`drift_statistics`, called as the client round calls them) raise false alarms at rate alpha per statistic on windows
drawn afresh from an unchanged distribution, whatever the party's size, and detect shifts of a stated size. The
arrays stand for the parties' embeddings: the tests are checked here, not the encoder.
"""

from absl.testing import absltest
import numpy as np
import tensorflow as tf

from algorithms.core import drift_statistics
from algorithms.methods import shiftex
from algorithms.methods import shiftex_streams

_CLASSES, _DIM = shiftex_streams.CLASSES, shiftex_streams.DIM
_SAMPLES, _ALPHA, _PERMUTATIONS = 32, 0.05, 99
_PARTIES = 1200  # Per rate: 5% +- 0.63% (one standard deviation), so [2.5%, 10%] is about 4 of them either side.
_Streams = shiftex_streams.Streams


@tf.function(input_signature=[tf.TensorSpec([None, _DIM], tf.float32), tf.TensorSpec([None], tf.int32),
                              tf.TensorSpec([None, _DIM], tf.float32), tf.TensorSpec([None], tf.int32),
                              tf.TensorSpec([2], tf.int32)])
def _p_values(x_previous, y_previous, x_current, y_current, seed):
  """(p-value of the MMD test, of the JSD test) of the current window against the previous one, as a party computes
  them in a census round (`shiftex.build_client_round`: samples of _SAMPLES embeddings, all labels' counts)."""
  previous, previous_weights = shiftex.sample_rows(x_previous, _SAMPLES, seed)
  current, current_weights = shiftex.sample_rows(x_current, _SAMPLES, seed + 7)
  counts = lambda y: drift_statistics.label_counts(y, _CLASSES)
  _, p_covariate = drift_statistics.mmd_permutation_test(current, current_weights, previous, previous_weights,
                                                         seed + 2, _PERMUTATIONS)
  _, p_label = drift_statistics.jsd_permutation_test(counts(y_current), counts(y_previous), seed + 4, _PERMUTATIONS)
  return tf.stack([p_covariate, p_label])


def _detections(streams: _Streams, shift=None) -> np.ndarray:
  """Per party, whether each test [P, 2] (MMD, JSD) flags its next window at level alpha; `shift` (None: stationary)
  maps a party's (n, label weights, style) to its next window."""
  flags = []
  for index in range(_PARTIES):
    n, weights, style = streams.party(index)
    previous = streams.window(n, weights, style)
    current = streams.window(n, weights, style) if shift is None else shift(n, weights, style)
    flags.append(_p_values(*previous, *current, tf.constant([index, 3], tf.int32)).numpy() <= _ALPHA)
  return np.array(flags)


class CalibrationTest(absltest.TestCase):

  def test_false_alarm_rate_of_each_test_is_near_alpha_on_stationary_streams(self):
    flags = _detections(_Streams(1))
    for name, rate in zip(('MMD', 'JSD'), flags.mean(0)):
      self.assertBetween(rate, _ALPHA / 2, 2 * _ALPHA, f'{name}: false-alarm rate {rate:.3f}')
    # Small parties as large ones: the level holds at each party's own sample size.
    small = flags[1::2].mean(0)
    self.assertTrue(np.all((small >= _ALPHA / 3) & (small <= 3 * _ALPHA)), small)

  def test_power_on_a_covariate_shift_and_a_label_shift(self):
    streams = _Streams(2)
    # Covariate: every example moves by 2 noise standard deviations along one axis, the labels stay.
    covariate = _detections(streams, lambda n, weights, style: streams.window(n, weights, style, shift=2.0))
    # Label: new label weights ~ Dir(1), the class means stay.
    label = _detections(streams, lambda n, weights, style: streams.window(
        n, streams.rng.dirichlet(np.ones(_CLASSES)), style))
    # Measured: the MMD test finds 35%, 74%, 93% of covariate shifts of 1, 1.5, 2 standard deviations, the JSD test
    # 87% of the label shifts (halves of each window against W0 nulls found 67% and 57%).
    self.assertGreater(covariate[:, 0].mean(), 0.85)
    self.assertGreater(label[:, 1].mean(), 0.75)



if __name__ == '__main__':
  absltest.main()
