"""Global-norm clipping of a client optimizer's steps, against numpy."""

from absl.testing import absltest
import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from algorithms.core import gradient_clipping


def _sgd_step(optimizer, weights, gradients):
  specs = tuple(tf.TensorSpec(w.shape, tf.float32) for w in weights)
  state = optimizer.initialize(specs)
  _, updated = optimizer.next(state, tuple(tf.constant(w) for w in weights), tuple(tf.constant(g) for g in gradients))
  return [u.numpy() for u in updated]


class GradientClippingTest(absltest.TestCase):

  def setUp(self):
    super().setUp()
    rng = np.random.default_rng(0)
    self.weights = [rng.normal(size=(3, 4)).astype(np.float32), rng.normal(size=(4,)).astype(np.float32)]
    self.gradients = [rng.normal(size=(3, 4)).astype(np.float32), rng.normal(size=(4,)).astype(np.float32)]
    self.norm = np.sqrt(sum(np.sum(g.astype(np.float64) ** 2) for g in self.gradients))

  def test_a_step_above_the_bound_is_scaled_to_it(self):
    sgd = tff.learning.optimizers.build_sgdm(0.5)
    bound = self.norm / 4
    updated = _sgd_step(gradient_clipping.clipped(sgd, bound), self.weights, self.gradients)
    for w, g, u in zip(self.weights, self.gradients, updated):
      np.testing.assert_allclose(u, w - 0.5 * g * bound / self.norm, rtol=1e-5, atol=1e-6)
    step = np.sqrt(sum(np.sum((w - u) ** 2) for w, u in zip(self.weights, updated)))
    self.assertAlmostEqual(step, 0.5 * bound, places=4)

  def test_a_step_under_the_bound_is_bit_identical(self):
    sgd = tff.learning.optimizers.build_sgdm(0.5, momentum=0.9)
    # A bound G whose float32 G * (1 / G) is not 1, as tf.clip_by_global_norm scales by.
    bound = float(np.float32(self.norm * 1.1054108))
    plain = _sgd_step(sgd, self.weights, self.gradients)
    clipped = _sgd_step(gradient_clipping.clipped(sgd, bound), self.weights, self.gradients)
    for p, c in zip(plain, clipped):
      np.testing.assert_array_equal(c, p)

  def test_zero_is_the_optimizer_itself_and_a_negative_bound_is_refused(self):
    sgd = tff.learning.optimizers.build_sgdm(0.5)
    self.assertIs(gradient_clipping.clipped(sgd, 0.0), sgd)
    with self.assertRaisesRegex(ValueError, 'max_norm must be > 0'):
      gradient_clipping.GlobalNormClipped(sgd, -1.0)

  def test_the_scale_matches_numpy(self):
    for bound in (0.1, 1.0, self.norm, 10.0):
      scale = gradient_clipping.global_norm_scale(self.gradients, bound).numpy()
      self.assertAlmostEqual(scale, min(1.0, bound / self.norm), places=6)


if __name__ == '__main__':
  absltest.main()
