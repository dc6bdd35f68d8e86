"""Domains: a base population of the task with an optional input transform and label permutation.

Scenarios of seeds 001, 003 and 004 make new distributions from a task's base populations: rotated images
(evolving domains, seed 001: domain m rotated by m * Delta degrees), the rotation + horizontal flip + intensity
inversion with a fixed label permutation of seed 004's transformed component, and label permutations as concepts
(concept drift). `DomainTransform` applies each example's domain inside the TFF client computation and in
evaluation (TensorFlow ops, traced once), after the task's `batch_fn`:

  x' = invert(flip(rotate(x, theta_d)))  and  y' = P_d[y]  for an example of domain d.

- rotate: images [B, H, W, C] are rotated counter-clockwise by theta_d about their centre (bilinear, the area
  outside filled with the task's background value); vectors [B, D] (the synthetic task) are rotated by theta_d in
  a fixed random plane of R^D (seeded by `plane_seed`), the vector analogue that keeps norms and distances.
- flip: images are mirrored left-right; vectors are reflected across the plane's first axis.
- invert: x' = lo + hi - x for inputs in [lo, hi] (`input_range`; EMNIST [0, 1]); for standardized inputs (CIFAR,
  synthetic: `input_range=None`) x' = -x.
- P_d: a permutation of the labels (None: identity).

A scenario whose domains are all plain bases needs no transform, and `DomainTransform.is_identity` lets the task
skip it, so such runs trace exactly the graphs they traced before domains existed.
"""

import dataclasses
import math
from typing import Optional, Sequence

import numpy as np
import tensorflow as tf


@dataclasses.dataclass(frozen=True)
class Domain:
  """One domain: examples of base population `base`, transformed."""
  name: str
  base: int
  rotation_degrees: float = 0.0
  flip: bool = False
  invert: bool = False
  label_permutation: Optional[tuple[int, ...]] = None

  @property
  def is_plain(self) -> bool:
    return (self.rotation_degrees == 0.0 and not self.flip and not self.invert and
            self.label_permutation is None)


def plain_domains(base_names: Sequence[str]) -> tuple[Domain, ...]:
  """One untransformed domain per base population."""
  return tuple(Domain(name, base) for base, name in enumerate(base_names))


def _plane(dimension: int, seed: int) -> np.ndarray:
  """Two orthonormal vectors [2, D] spanning a random plane of R^D."""
  basis, _ = np.linalg.qr(np.random.default_rng(seed).normal(size=(dimension, 2)))
  return basis.T.astype(np.float32)


def rotation_transforms(angles: tf.Tensor, height: int, width: int) -> tf.Tensor:
  """[B, 8] projective transforms (output -> input coordinates) rotating images counter-clockwise by `angles`
  (radians, [B]) about their centre, for `ImageProjectiveTransformV3`."""
  cos, sin = tf.cos(angles), tf.sin(angles)
  cx, cy = (width - 1) / 2.0, (height - 1) / 2.0
  # Output pixel (x, y) samples input (cos (x - cx) - sin (y - cy) + cx, sin (x - cx) + cos (y - cy) + cy), which
  # turns the image counter-clockwise as displayed (y grows downwards).
  x_offset = cx - cos * cx + sin * cy
  y_offset = cy - sin * cx - cos * cy
  zeros = tf.zeros_like(angles)
  return tf.stack([cos, -sin, x_offset, sin, cos, y_offset, zeros, zeros], axis=1)


class DomainTransform:
  """Applies each example's domain to a model batch `{'x', 'y', ...}` given its domain ids [B]."""

  def __init__(self, domains: Sequence[Domain], num_classes: int, input_range: Optional[tuple[float, float]] = None,
               plane_seed: int = 0):
    self.domains = tuple(domains)
    self._num_classes = num_classes
    self._input_range = input_range
    self._plane_seed = plane_seed
    self._angles = np.array([math.radians(d.rotation_degrees) for d in domains], np.float32)
    self._flips = np.array([d.flip for d in domains])
    self._inverts = np.array([d.invert for d in domains])
    permutations = [list(d.label_permutation or range(num_classes)) for d in domains]
    for domain, permutation in zip(domains, permutations):
      if sorted(permutation) != list(range(num_classes)):
        raise ValueError(f'label_permutation of domain {domain.name} is not a permutation of {num_classes} labels.')
    self._permutations = np.array(permutations, np.int32)

  @property
  def is_identity(self) -> bool:
    return all(domain.is_plain for domain in self.domains)

  def __call__(self, batch: dict, domain_ids: tf.Tensor) -> dict:
    if self.is_identity:
      return batch
    domain_ids = tf.cast(domain_ids, tf.int32)
    x = tf.convert_to_tensor(batch['x'])
    angles = tf.gather(self._angles, domain_ids)
    flips = tf.gather(self._flips, domain_ids)
    if x.shape.rank == 4:
      x = self._transform_images(x, angles, flips)
    else:
      x = self._transform_vectors(x, angles, flips)
    inverts = tf.reshape(tf.gather(self._inverts, domain_ids), [-1] + [1] * (x.shape.rank - 1))
    reflected = (self._input_range[0] + self._input_range[1] - x) if self._input_range else -x
    result = dict(batch)
    result['x'] = tf.where(inverts, reflected, x)
    result['y'] = tf.gather_nd(self._permutations, tf.stack([domain_ids, tf.cast(batch['y'], tf.int32)], axis=-1))
    return result

  def _transform_images(self, x: tf.Tensor, angles: tf.Tensor, flips: tf.Tensor) -> tf.Tensor:
    height, width = int(x.shape[1]), int(x.shape[2])
    fill = self._input_range[0] if self._input_range else 0.0
    rotated = tf.raw_ops.ImageProjectiveTransformV3(
        images=x, transforms=rotation_transforms(angles, height, width), output_shape=[height, width],
        fill_value=fill, interpolation='BILINEAR', fill_mode='CONSTANT')
    return tf.where(tf.reshape(flips, [-1, 1, 1, 1]), tf.reverse(rotated, axis=[2]), rotated)

  def _transform_vectors(self, x: tf.Tensor, angles: tf.Tensor, flips: tf.Tensor) -> tf.Tensor:
    u, v = _plane(int(x.shape[-1]), self._plane_seed)
    a, b = tf.linalg.matvec(x, u), tf.linalg.matvec(x, v)  # Coordinates in the plane, [B].
    rest = x - a[:, None] * u - b[:, None] * v
    a = tf.where(flips, -a, a)
    cos, sin = tf.cos(angles), tf.sin(angles)
    return rest + (cos * a - sin * b)[:, None] * u + (sin * a + cos * b)[:, None] * v
