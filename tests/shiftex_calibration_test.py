"""ShiftEx's detector on streams with a known truth: its thresholds, the (1 - alpha) quantiles of the parties'
null statistics (`shiftex.null_statistics`, `drift_statistics.null_threshold`), give each statistic a false-alarm
rate near alpha on windows drawn afresh from an unchanged distribution, and detect shifts of a stated size.

The streams (numpy): 10 classes with means mu_y in R^8 (N(0, 1) entries) and unit Gaussian noise; a party has label
weights p ~ Dir(1), a style offset s ~ N(0, 0.1^2 I) and a size n ~ lognormal(log 60, 0.6) clipped to [10, 400]
(the synthetic task's); every window draws its n examples anew. These arrays are the parties' embeddings: the
detector's statistics are compared here, the encoder is not.
"""

from absl.testing import absltest
import numpy as np
import tensorflow as tf

from algorithms.core import drift_statistics
from algorithms.methods import shiftex

_CLASSES, _DIM, _SAMPLES, _ALPHA = 10, 8, 32, 0.05
_PARTIES = 1200  # Per rate: 5% +- 0.63% (one standard deviation), so [2.5%, 10%] is about 4 of them either side.


class _Streams:
  """Parties of the module docstring, drawn from one seeded generator."""

  def __init__(self, seed: int):
    self.rng = np.random.default_rng(seed)
    self.means = self.rng.normal(size=(_CLASSES, _DIM))

  def party(self):
    n = int(np.clip(np.exp(self.rng.normal(np.log(60.0), 0.6)), 10, 400))
    return n, self.rng.dirichlet(np.ones(_CLASSES)), 0.1 * self.rng.normal(size=_DIM)

  def window(self, n, weights, style, shift=0.0):
    """n examples (x [n, 8] float32, y [n] int32); `shift` moves every x along the first axis."""
    y = self.rng.choice(_CLASSES, size=n, p=weights)
    x = self.means[y] + style + self.rng.normal(size=(n, _DIM))
    x[:, 0] += shift
    return x.astype(np.float32), y.astype(np.int32)


@tf.function(input_signature=[tf.TensorSpec([None, _DIM], tf.float32), tf.TensorSpec([None], tf.int32),
                              tf.TensorSpec([None, _DIM], tf.float32), tf.TensorSpec([None], tf.int32),
                              tf.TensorSpec([2], tf.int32)])
def _party_statistics(x_previous, y_previous, x_current, y_current, seed):
  """(null MMD^2, null JSD) of the previous window, as the party reports them in W0, and (MMD^2, JSD) of the current
  window against it, as the party detects: the client round's code path (`build_client_round`)."""
  previous, previous_weights = shiftex.sample_rows(x_previous, _SAMPLES, seed)
  current, current_weights = shiftex.sample_rows(x_current, _SAMPLES, seed + 7)
  null = shiftex.null_statistics(previous, previous_weights, y_previous, _CLASSES, seed, False)
  previous_half = shiftex.label_halves(y_previous, _CLASSES, seed)[0]
  current_half = shiftex.label_halves(y_current, _CLASSES, seed + 7)[0]
  detection = shiftex.detection_statistics(current, current_weights, previous, previous_weights, current_half,
                                           previous_half, seed + 7, False)
  return tf.stack(null), tf.stack(detection)


def _statistics(streams: _Streams, shift=None) -> tuple[np.ndarray, np.ndarray]:
  """Nulls [P, 2] and detection statistics [P, 2] (MMD^2, JSD) of _PARTIES parties; `shift` (None: stationary)
  maps a party's (n, label weights, style) to its next window's."""
  nulls, detections = [], []
  for index in range(_PARTIES):
    n, weights, style = streams.party()
    previous = streams.window(n, weights, style)
    current = streams.window(n, weights, style) if shift is None else shift(n, weights, style)
    null, detection = _party_statistics(*previous, *current, tf.constant([index, 3], tf.int32))
    nulls.append(null.numpy())
    detections.append(detection.numpy())
  return np.array(nulls), np.array(detections)


def _thresholds(nulls: np.ndarray) -> np.ndarray:
  """(delta_cov, delta_label) from the nulls, as the server computes them."""
  return np.array([drift_statistics.null_threshold(tf.constant(nulls[:, i], tf.float32), len(nulls), _ALPHA).numpy()
                   for i in range(2)])


class CalibrationTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    # Thresholds from one population's W0 nulls; every rate below is over other, independent parties.
    cls.thresholds = _thresholds(_statistics(_Streams(0))[0])

  def test_false_alarm_rate_of_each_statistic_is_near_alpha_on_stationary_streams(self):
    _, detections = _statistics(_Streams(1))
    rates = (detections > self.thresholds).mean(0)
    for name, rate in zip(('MMD^2', 'JSD'), rates):
      self.assertBetween(rate, _ALPHA / 2, 2 * _ALPHA, f'{name}: false-alarm rate {rate:.3f}')

  def test_power_on_a_covariate_shift_and_a_label_shift(self):
    streams = _Streams(2)
    # Covariate: every example moves by 3 noise standard deviations along one axis, the labels stay. Measured power
    # of the MMD at halves of 16 embeddings: 0.16, 0.37, 0.67, 0.98 at shifts of 1, 1.5, 2, 3 (larger
    # --shiftex_samples buy more).
    _, covariate = _statistics(streams, lambda n, weights, style: streams.window(n, weights, style, shift=3.0))
    # Label: new label weights ~ Dir(1), the class means stay (the MMD sees it too, through the means).
    _, label = _statistics(streams, lambda n, weights, style: streams.window(
        n, streams.rng.dirichlet(np.ones(_CLASSES)), style))
    self.assertGreater((covariate[:, 0] > self.thresholds[0]).mean(), 0.9)
    # Measured 0.57 for the JSD at half the labels; comparing whole windows against these thresholds found 0.43
    # (and had a false-alarm rate of 0.9%, not 5%).
    self.assertGreater((label[:, 1] > self.thresholds[1]).mean(), 0.45)


if __name__ == '__main__':
  absltest.main()
