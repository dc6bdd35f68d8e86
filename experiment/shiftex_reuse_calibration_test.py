"""ShiftEx's reuse test judges a cluster of the expert's own distribution far at rate alpha, whatever the cluster's
size and the embedding's dimension, and finds large shifted clusters (`shiftex_reuse_calibration`).

A rate from 1,000 clusters has a standard deviation of 0.69% at alpha = 5%: [alpha / 2, 2 alpha] is 3.6 of them below.
"""

from absl.testing import absltest

from experiment import shiftex_reuse_calibration as calibration_lib

# The least power against class means moved by 1, for clusters of 150 parties: 10 parties in 512 dimensions are found
# far less often, as a mean shift of 1 is small against that spread.
_MIN_POWER = 0.9


class ReuseTestCalibrationTest(absltest.TestCase):

  def test_same_distribution_is_judged_far_at_rate_alpha_and_a_shift_of_one_is_found(self):
    alpha = calibration_lib.ALPHA
    rows = calibration_lib.calibration()
    self.assertLen(rows, len(calibration_lib.DIMENSIONS) * len(calibration_lib.CLUSTER_SIZES))
    outside = [f"d={r['dim']}, n={r['size']}: {r['null']:.3f}" for r in rows if not alpha / 2 <= r['null'] <= 2 * alpha]
    weak = [f"d={r['dim']}: {r['power'][1.0]:.3f}" for r in rows if r['size'] == 150 and r['power'][1.0] < _MIN_POWER]
    self.assertEmpty(outside, 'false alarms outside [alpha / 2, 2 alpha]')
    self.assertEmpty(weak, 'power against a shift of 1 for clusters of 150 parties')


if __name__ == '__main__':
  absltest.main()
