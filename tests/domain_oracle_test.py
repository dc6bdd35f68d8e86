"""ShiftEx's and FedDrift's evaluations read no true domain unless `--oracle_test_domains` says so: a test batch
scored with its `mode` scrambled gives the same loss and accuracy by default, and (the check can fail) different ones
under the oracle, whose pool spreads each domain over the experts its parties trained."""

from absl.testing import absltest
import numpy as np
import tensorflow as tf

from algorithms.methods import feddrift
from algorithms.methods import shiftex
from models import multi_branch

_BATCH, _SLOTS, _CLASSES, _DIM, _MODES = 40, 4, 5, 6, 3


def _inputs(seed: int):
  rng = np.random.default_rng(seed)
  outputs = {multi_branch.LOGITS: tf.constant(rng.normal(size=(_BATCH, _SLOTS, _CLASSES)) * 3, tf.float32),
             multi_branch.FEATURES: tf.constant(rng.normal(size=(_BATCH, _SLOTS, _DIM)), tf.float32)}
  labels = tf.constant(rng.integers(_CLASSES, size=_BATCH), tf.int32)
  # Each domain's parties trained other experts: domain d on expert d + 1 (mod K) more than on the others.
  domain_slots = tf.constant(np.eye(_MODES, _SLOTS, k=1) * 5 + 0.5, tf.float32)
  return outputs, labels, domain_slots


def _scores(objective, outputs, labels, mode: int, *state) -> tuple[float, float]:
  batch = {'y': labels, 'mode': tf.fill([_BATCH], mode)}
  result = objective(outputs, batch, *state)
  return float(result.loss_sum), float(result.num_correct)


class DomainOracleTest(absltest.TestCase):

  def _check(self, make_objective, state_of):
    for seed in range(5):
      outputs, labels, domain_slots = _inputs(seed)
      state = state_of(seed, domain_slots)
      by_mode = [_scores(make_objective(False), outputs, labels, mode, *state) for mode in range(_MODES)]
      self.assertEqual(len(set(by_mode)), 1, by_mode)  # Label-free: the same whatever the batch's domain.
      oracle = [_scores(make_objective(True), outputs, labels, mode, *state) for mode in range(_MODES)]
      self.assertGreater(len(set(oracle)), 1, oracle)  # The oracle reads it.

  def test_shiftex(self):
    config = shiftex.Config(num_branches=_SLOTS)

    def state_of(seed, domain_slots):
      memory = tf.constant(np.random.default_rng([seed, 1]).normal(size=(_SLOTS, _DIM)), tf.float32)
      return tf.constant([True] * _SLOTS), memory, domain_slots

    self._check(lambda oracle: shiftex.evaluation_objective(config, _MODES, oracle), state_of)

  def test_feddrift(self):
    config = feddrift.Config(num_branches=_SLOTS)
    self._check(lambda oracle: feddrift.evaluation_objective(config, _MODES, False, oracle),
                lambda seed, domain_slots: (tf.constant([True] * _SLOTS), domain_slots))


if __name__ == '__main__':
  absltest.main()
