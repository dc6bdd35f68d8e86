"""How often ShiftEx's reuse test (`shiftex.reuse_test`) judges a cluster far from an expert's memory: at rate alpha
when the cluster has the memory's distribution, whatever its size and the embedding's dimension, and with the power
printed when it does not.

ShiftEx (Bhope et al., "Shift Happens: Mixture of Experts based Continual Adaptation in Federated Learning", 2025)
reuses an expert when a cluster of shifted parties is within epsilon of the expert's memory; the suite makes that a
permutation test at level alpha = 5% (`algorithms/methods/shiftex.py`). Profiles (a party's mean embedding) are
p @ M + 0.3 z, with label weights p ~ Dir(1) over 10 class means M [10, d] (N(0, 1) entries) and z ~ N(0, I_d). An
expert's memory keeps `shiftex.MEMORY_PROFILES` of them; a cluster holds n parties of the same distribution (1,000
clusters per cell: a rate of 5% has a standard deviation of 0.69%), or with the class means moved by delta along one
random unit direction (200 clusters per cell and delta), for d = 8, 64, 512 and n = 10, 60, 150. It prints the share
judged far per cell.

  bazel run //experiment:shiftex_reuse_calibration
"""

import itertools

from absl import app
import numpy as np
import tensorflow as tf

from algorithms.methods import shiftex

ALPHA = 0.05
DIMENSIONS = (8, 64, 512)
CLUSTER_SIZES = (10, 60, 150)
SHIFTS = (0.3, 1.0)
_CLASSES = 10
_NULL_TRIALS = 1000
_SHIFTED_TRIALS = 200
_PADDED = 160  # The cluster's rows, padded as the census buffer pads them.


def _p_value_fn(dim: int):
  config = shiftex.Config()

  @tf.function(input_signature=[tf.TensorSpec([_PADDED, dim], tf.float32), tf.TensorSpec([_PADDED], tf.bool),
                                tf.TensorSpec([shiftex.MEMORY_PROFILES, dim], tf.float32),
                                tf.TensorSpec([2], tf.int32)])
  def p_value(cluster, members, memory, seed):
    return shiftex.reuse_test(cluster, members, memory, tf.constant(shiftex.MEMORY_PROFILES), seed, config)

  return p_value


def far_rates(dim: int, size: int, seed: int) -> tuple[float, ...]:
  """The share of clusters of `size` parties judged far: of the memory's distribution, then moved by each of
  SHIFTS."""
  rng = np.random.default_rng(seed)
  p_value = _p_value_fn(dim)
  direction = rng.normal(size=dim)
  direction /= np.linalg.norm(direction)

  def profiles(means, count):
    return (rng.dirichlet(np.ones(_CLASSES), size=count) @ means + 0.3 * rng.normal(size=(count, dim))).astype(
        np.float32)

  members = np.arange(_PADDED) < size
  rates = []
  for delta in (0.0,) + SHIFTS:
    far, trials = 0, _NULL_TRIALS if delta == 0 else _SHIFTED_TRIALS
    for trial in range(trials):
      means = rng.normal(size=(_CLASSES, dim))
      memory = profiles(means, shiftex.MEMORY_PROFILES)
      cluster = np.zeros((_PADDED, dim), np.float32)
      cluster[:size] = profiles(means + delta * direction, size)
      far += float(p_value(cluster, members, memory, tf.constant([trial, size], tf.int32))) <= ALPHA
    rates.append(far / trials)
  return tuple(rates)


def calibration() -> list[dict]:
  """Per (d, n): `null`, the share of same-distribution clusters judged far, and `power`, per shift of SHIFTS."""
  rows = []
  for dim, size in itertools.product(DIMENSIONS, CLUSTER_SIZES):
    null, *power = far_rates(dim, size, seed=dim * 1000 + size)
    rows.append(dict(dim=dim, size=size, null=null, power=dict(zip(SHIFTS, power))))
  return rows


def main(argv):
  del argv  # Unused.
  print('| d | n | judged far, same distribution | ' + ' | '.join(f'power, delta {delta:g}' for delta in SHIFTS) + ' |')
  print('|---|---|---|' + '---|' * len(SHIFTS))
  for row in calibration():
    print(f"| {row['dim']} | {row['size']} | {row['null']:.3f} | "
          + ' | '.join(f"{row['power'][delta]:.3f}" for delta in SHIFTS) + ' |')


if __name__ == '__main__':
  app.run(main)
