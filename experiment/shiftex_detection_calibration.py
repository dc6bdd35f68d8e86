"""ShiftEx's two readings of its shift thresholds on parties with a known truth (`shiftex_streams`): each party's
permutation tests at level alpha (`--shiftex_detection=permutation`, the suite's default) against fixed thresholds
delta_cov, delta_label, the (1 - alpha) quantiles over the parties of their statistics with no shift
(`--shiftex_detection=w0_threshold`, the paper's "p-value estimation from bootstrapped client feature representations
assuming no shift", Bhope et al., "Shift Happens: Mixture of Experts based Continual Adaptation in Federated
Learning", 2025, Section 5). Each party's previous window stands for W0 (its null statistics, `shiftex.
null_statistics`); its next window is drawn from the same distribution (false alarms), with every input moved by 2
noise standard deviations along one axis (covariate power) or with new label weights ~ Dir(1) (label power). It
prints, per reading and statistic, the false-alarm rate over all parties and over the smallest and the largest
quarter by size, and the power; alpha 5%, 1,200 parties per condition (a rate of 5% has a standard deviation of
0.63%).

  bazel run //experiment:shiftex_detection_calibration
"""

from absl import app
import numpy as np
import tensorflow as tf

from algorithms.core import drift_statistics
from algorithms.methods import shiftex
from algorithms.methods import shiftex_streams

ALPHA = 0.05
PARTIES = 1200
_CONFIG = shiftex.Config(samples=32, alpha=ALPHA, permutations=99)
_DIM, _CLASSES = shiftex_streams.DIM, shiftex_streams.CLASSES
_WINDOW = [tf.TensorSpec([None, _DIM], tf.float32), tf.TensorSpec([None], tf.int32)]


@tf.function(input_signature=_WINDOW + _WINDOW + [tf.TensorSpec([2], tf.int32)])
def _checks(x_previous, y_previous, x_current, y_current, seed):
  """[2, 3]: per statistic (MMD^2, JSD) its value, its permutation p-value and its value under no shift from the
  previous window, as a party computes them in a census round."""
  previous, previous_weights = shiftex.sample_rows(x_previous, _CONFIG.samples, seed)
  current, current_weights = shiftex.sample_rows(x_current, _CONFIG.samples, seed + 7)
  counts = lambda y: drift_statistics.label_counts(y, _CLASSES)
  mmd, p_covariate = drift_statistics.mmd_permutation_test(current, current_weights, previous, previous_weights,
                                                           seed + 2, _CONFIG.permutations)
  jsd, p_label = drift_statistics.jsd_permutation_test(counts(y_current), counts(y_previous), seed + 4,
                                                       _CONFIG.permutations)
  null_mmd, null_jsd = shiftex.null_statistics(x_previous, y_previous, _CLASSES, seed + 6, _CONFIG)
  return tf.stack([tf.stack([mmd, p_covariate, null_mmd]), tf.stack([jsd, p_label, null_jsd])])


def _condition(seed: int, next_window) -> tuple[np.ndarray, np.ndarray]:
  """(checks [P, 2, 3], sizes [P]) of PARTIES parties whose next window is `next_window(streams, n, weights,
  style)`."""
  streams = shiftex_streams.Streams(seed)
  checks, sizes = [], []
  for index in range(PARTIES):
    n, weights, style = streams.party(index)
    previous = streams.window(n, weights, style)
    checks.append(_checks(*previous, *next_window(streams, n, weights, style),
                          tf.constant([index, 3], tf.int32)).numpy())
    sizes.append(n)
  return np.array(checks), np.array(sizes)


def _flags(checks: np.ndarray, thresholds: np.ndarray) -> dict[str, np.ndarray]:
  """Per reading, the flags [P, 2] of each statistic."""
  return {'permutation': checks[:, :, 1] <= ALPHA, 'w0_threshold': checks[:, :, 0] > thresholds}


def calibration() -> list[dict]:
  """Per reading and statistic: the false-alarm rate (all, smallest and largest quarter of parties) and the power."""
  stationary, sizes = _condition(1, lambda streams, n, weights, style: streams.window(n, weights, style))
  covariate, _ = _condition(2, lambda streams, n, weights, style: streams.window(n, weights, style, shift=2.0))
  label, _ = _condition(3, lambda streams, n, weights, style: streams.window(
      n, streams.rng.dirichlet(np.ones(_CLASSES)), style))
  # delta_cov, delta_label: the (1 - alpha) quantiles of the no-shift statistics, as W0's census sets them.
  thresholds = np.quantile(stationary[:, :, 2], 1 - ALPHA, axis=0, method='inverted_cdf')
  small, large = sizes <= np.quantile(sizes, 0.25), sizes >= np.quantile(sizes, 0.75)
  alarms = _flags(stationary, thresholds)
  found = {'MMD': _flags(covariate, thresholds), 'JSD': _flags(label, thresholds)}
  rows = []
  for reading in ('permutation', 'w0_threshold'):
    for index, statistic in enumerate(('MMD', 'JSD')):
      flags = alarms[reading][:, index]
      rows.append(dict(reading=reading, statistic=statistic, threshold=float(thresholds[index]),
                       false_alarms=flags.mean(), small=flags[small].mean(), large=flags[large].mean(),
                       power=found[statistic][reading][:, index].mean()))
  return rows


def main(argv):
  del argv  # Unused.
  print('| detection | statistic | false alarms | smallest quarter | largest quarter | power |')
  print('|---|---|---|---|---|---|')
  for row in calibration():
    name = row['reading'] + (f" (delta {row['threshold']:.3f})" if row['reading'] == 'w0_threshold' else '')
    print(f"| {name} | {row['statistic']} | {row['false_alarms']:.3f} | {row['small']:.3f} | {row['large']:.3f} | "
          f"{row['power']:.3f} |")


if __name__ == '__main__':
  app.run(main)
