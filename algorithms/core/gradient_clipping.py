"""A client optimizer whose every step's gradient is clipped to a global norm (Pascanu, Mikolov and Bengio, "On the
difficulty of training recurrent neural networks", ICML 2013, Algorithm 1):

  g <- g * min(1, G / ||g||_2),   ||g||_2 over all trained tensors together,

then the wrapped optimizer's step. The scale is exactly 1 when ||g||_2 <= G, so a run whose steps all stay under
the bound is bit-identical to the unwrapped optimizer's (`tf.clip_by_global_norm` computes G * (1 / G) instead,
which is not always 1 in float32). A non-finite norm gives a non-finite step, which the client's non-finite
exclusion then drops (`client_training.excluded_unless`).
"""

import tensorflow as tf
import tensorflow_federated as tff


def global_norm_scale(gradients, max_norm: float) -> tf.Tensor:
  """min(1, max_norm / ||gradients||_2): the factor that brings the gradients' global norm to at most max_norm."""
  return tf.minimum(1.0, max_norm / tf.linalg.global_norm(tf.nest.flatten(gradients)))


class GlobalNormClipped(tff.learning.optimizers.Optimizer):
  """`optimizer` stepping with gradients clipped to global norm `max_norm`; the same state and hyperparameters."""

  def __init__(self, optimizer: tff.learning.optimizers.Optimizer, max_norm: float):
    if max_norm <= 0:
      raise ValueError(f'max_norm must be > 0; got {max_norm}')
    self._optimizer = optimizer
    self._max_norm = max_norm

  def initialize(self, specs):
    return self._optimizer.initialize(specs)

  def next(self, state, weights, gradients):
    scale = global_norm_scale(gradients, self._max_norm)
    return self._optimizer.next(state, weights, tf.nest.map_structure(lambda g: g * scale, gradients))

  def get_hparams(self, state):
    return self._optimizer.get_hparams(state)

  def set_hparams(self, state, hparams):
    return self._optimizer.set_hparams(state, hparams)


def clipped(optimizer: tff.learning.optimizers.Optimizer, max_norm: float) -> tff.learning.optimizers.Optimizer:
  """`optimizer` itself when max_norm is 0 (no clipping), else `GlobalNormClipped(optimizer, max_norm)`."""
  return optimizer if max_norm == 0 else GlobalNormClipped(optimizer, max_norm)
