"""The online (decayed-mass) average that FedTEM's M step and FedTKM's center update share.

Eq. 10 (FedTEM) and Eq. 12 (FedTKM) replace a cluster's parameters by this round's estimate from the clients
assigned to it. With a decay b > 0 each cluster k keeps a decayed sample mass A_k <- b A_k + M_k, and its new
value is the mass-weighted average of the old value (weight b A_k) and this round's estimate (weight M_k): the
online k-means / online EM update. A round that assigns one small client to a cluster then moves it little, and
b = 0 is the paper's update exactly. A cluster with M_k = 0 keeps its value.
"""

from typing import NamedTuple

import tensorflow as tf


class Blend(NamedTuple):
  """mass: the new A_k [K]; average(old [K, ...], estimate [K, ...]) -> the blended values [K, ...]."""
  mass: tf.Tensor
  average: object


def blend(old_mass: tf.Tensor, counts: tf.Tensor, decay: float) -> Blend:
  """A_k <- b A_k + M_k, and the average for clusters with masses `old_mass` [K] given this round's `counts` M_k."""
  kept_mass = decay * old_mass
  mass = kept_mass + counts

  def average(old, estimate):
    shape = [-1] + [1] * (len(old.shape) - 1)
    has_data = tf.reshape(counts > 0.0, shape)
    old_share = tf.reshape(kept_mass / tf.maximum(mass, 1e-12), shape)
    return tf.where(has_data, old_share * old + (1.0 - old_share) * estimate, old)

  return Blend(mass, average)
