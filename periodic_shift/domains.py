"""Domains: a base population of the task with an optional input transform and label permutation.

Scenarios of seeds 001, 003 and 004 make new distributions from a task's base populations: rotated images
(evolving domains, the FedEvolve paper: domain m rotated by m * Delta degrees), the rotation + horizontal flip +
intensity inversion with a fixed label permutation of the FedGMM paper's transformed component, and label permutations
as concepts (concept drift). `DomainTransform` applies each example's domain inside the TFF client computation and in
evaluation (TensorFlow ops, traced once), after the task's `batch_fn`:

  x' = invert(flip(rotate(x, theta_d)))  and  y' = P_d[y]  for an example of domain d.

- rotate: images [B, H, W, C] are rotated counter-clockwise by theta_d about their centre (bilinear, the area
  outside filled with the task's background value); vectors [B, D] (the synthetic task) are rotated by theta_d in
  a fixed random plane of R^D (seeded by `plane_seed`), the vector analogue that keeps norms and distances. A
  domain with `rotation_planes` = k > 1 turns k mutually orthogonal planes by theta_d at once, the planes spanned
  by consecutive column pairs of one seeded random orthonormal basis Q of R^D:
      x' = x + sum_{p<k} [(cos theta - 1) a_p - sin theta b_p] u_p + [sin theta a_p + (cos theta - 1) b_p] v_p,
  a_p = x . u_p, b_p = x . v_p, (u_p, v_p) = (Q[:, 2p], Q[:, 2p + 1]). One plane of a 64-d input moves an example
  little (a rotation by theta moves x by 2 sin(theta / 2) times its component in the plane); with k = D / 2 every
  direction turns, as every pixel of a rotated image moves, and theta = 180 degrees maps x to -x. (Scenarios give
  all their domains the same k; were k = 1 mixed with k > 1, the one-plane domains would turn Q's first plane.)
- flip: images are mirrored left-right; vectors are reflected across the plane's first axis.
- invert: x' = lo + hi - x for inputs in [lo, hi] (`input_range`; EMNIST [0, 1]); for standardized inputs (CIFAR,
  synthetic: `input_range=None`) x' = -x.
- P_d: a permutation of the labels (None: identity).

Corruptions (the ShiftEx paper's covariate shift, CIFAR-10-C and FEMNIST-style; `corruption`, `severity` 1-5), applied
before the steps above; r = hi - lo (1 for standardized inputs), images and vectors unless marked:
  noise       x + N(0, (sigma_s r)^2) per value, sigma = .04 .06 .08 .09 .10 (CIFAR-10-C's Gaussian noise), drawn
              with a seed keyed by the batch's values (fresh noise per batch, reproducible for the same batch);
  blur        (images) a Gaussian blur, sigma = .4 .6 .7 .8 1.0 pixels (5 x 5 kernel, edges mirrored);
  brightness  x + delta_s r, delta = .05 .1 .15 .2 .3;
  contrast    m + c_s (x - m), m the example's mean, c = .75 .5 .4 .3 .15;
  haze        (images; fog-like) (1 - a_s) x + a_s hi, a = .1 .2 .3 .4 .5 (standardized: hi = the example's max);
  rotation    by 5 10 15 20 30 degrees (the rotation above);
  scale       a zoom about the centre by 1.05 1.1 1.15 1.2 1.3 (images), or x times that factor (vectors);
  jitter      (images) per-channel gains 1 + j_s u_c with u_c in [-1, 1] fixed per domain, j = .05 .1 .15 .2 .3.
These are parametric stand-ins for the published corruption suites (which cannot be downloaded here); the severity
tables follow CIFAR-10-C where it has the family.

A scenario whose domains are all plain bases needs no transform, and `DomainTransform.is_identity` lets the task
skip it, so such runs trace exactly the graphs they traced before domains existed. Domains with time stages
(`Domain.stage`) add each example's stage to the batch, `stage` [B], the one domain property methods may read.
"""

import dataclasses
import math
from typing import Optional, Sequence

import numpy as np
import tensorflow as tf


CORRUPTIONS = ('noise', 'blur', 'brightness', 'contrast', 'haze', 'rotation', 'scale', 'jitter')
IMAGE_ONLY_CORRUPTIONS = frozenset({'blur', 'haze', 'jitter'})
_SEVERITIES = {
    'noise': (0.04, 0.06, 0.08, 0.09, 0.10),
    'blur': (0.4, 0.6, 0.7, 0.8, 1.0),
    'brightness': (0.05, 0.1, 0.15, 0.2, 0.3),
    'contrast': (0.75, 0.5, 0.4, 0.3, 0.15),
    'haze': (0.1, 0.2, 0.3, 0.4, 0.5),
    'rotation': (5.0, 10.0, 15.0, 20.0, 30.0),
    'scale': (1.05, 1.1, 1.15, 1.2, 1.3),
    'jitter': (0.05, 0.1, 0.15, 0.2, 0.3),
}


@dataclasses.dataclass(frozen=True)
class Domain:
  """One domain: examples of base population `base`, transformed.

  `stage` is not a transform: it is when the domain's data were collected (the FedEvolve paper's domain index m), which
  a client knows of its own data, so unlike the domain index methods may read it (a model batch's `stage` [B]).
  Scenarios without time stages leave it 0 everywhere, and their batches have no `stage`.
  """
  name: str
  base: int
  rotation_degrees: float = 0.0
  flip: bool = False
  invert: bool = False
  label_permutation: Optional[tuple[int, ...]] = None
  corruption: Optional[str] = None
  severity: int = 0
  stage: int = 0
  rotation_planes: int = 1

  def __post_init__(self):
    if self.rotation_planes < 1:
      raise ValueError(f'--rotation_planes must be >= 1; got {self.rotation_planes}.')
    if self.corruption is not None and (self.corruption not in CORRUPTIONS or not 1 <= self.severity <= 5):
      raise ValueError(f'corruption must be one of {", ".join(CORRUPTIONS)} with severity 1-5; got '
                       f'{self.corruption!r}, {self.severity}.')

  @property
  def is_plain(self) -> bool:
    return (self.rotation_degrees == 0.0 and not self.flip and not self.invert and
            self.label_permutation is None and self.corruption is None)

  @property
  def corruption_value(self) -> float:
    """The family's parameter at this severity (0 without a corruption)."""
    return _SEVERITIES[self.corruption][self.severity - 1] if self.corruption else 0.0


def plain_domains(base_names: Sequence[str]) -> tuple[Domain, ...]:
  """One untransformed domain per base population."""
  return tuple(Domain(name, base) for base, name in enumerate(base_names))


def _plane(dimension: int, seed: int) -> np.ndarray:
  """Two orthonormal vectors [2, D] spanning a random plane of R^D."""
  basis, _ = np.linalg.qr(np.random.default_rng(seed).normal(size=(dimension, 2)))
  return basis.T.astype(np.float32)


def _planes(dimension: int, count: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
  """u, v [count, D]: the first `count` column pairs of a random orthonormal basis of R^D, orthogonal planes."""
  if 2 * count > dimension:
    raise ValueError(f'--rotation_planes must be at most half the input dimension ({dimension // 2}); got {count}.')
  basis, _ = np.linalg.qr(np.random.default_rng([seed, 17]).normal(size=(dimension, dimension)))
  return basis[:, 0:2 * count:2].T.astype(np.float32), basis[:, 1:2 * count:2].T.astype(np.float32)


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
    self._angles = np.array([math.radians(d.rotation_degrees + (d.corruption_value if d.corruption == 'rotation'
                                                                 else 0.0)) for d in domains], np.float32)
    self._families = {family: np.array([d.corruption_value if d.corruption == family else 0.0 for d in domains],
                                       np.float32)
                      for family in CORRUPTIONS if family != 'rotation' and any(d.corruption == family
                                                                                for d in domains)}
    self._flips = np.array([d.flip for d in domains])
    self._rotation_planes = np.array([d.rotation_planes for d in domains], np.int32)
    self._inverts = np.array([d.invert for d in domains])
    permutations = [list(d.label_permutation or range(num_classes)) for d in domains]
    for domain, permutation in zip(domains, permutations):
      if sorted(permutation) != list(range(num_classes)):
        raise ValueError(f'label_permutation of domain {domain.name} is not a permutation of {num_classes} labels.')
    self._permutations = np.array(permutations, np.int32)
    self._stages = np.array([d.stage for d in domains], np.int32)

  @property
  def is_identity(self) -> bool:
    """True when batches leave unchanged: every domain plain, no time stages."""
    return all(domain.is_plain for domain in self.domains) and not self._stages.any()

  def __call__(self, batch: dict, domain_ids: tf.Tensor) -> dict:
    if self.is_identity:
      return batch
    domain_ids = tf.cast(domain_ids, tf.int32)
    result = dict(batch)
    if self._stages.any():
      result['stage'] = tf.gather(self._stages, domain_ids)
    if all(domain.is_plain for domain in self.domains):
      return result
    x = self._corrupt(tf.convert_to_tensor(batch['x']), domain_ids)
    angles = tf.gather(self._angles, domain_ids)
    flips = tf.gather(self._flips, domain_ids)
    if x.shape.rank == 4:
      x = self._transform_images(x, angles, flips)
    else:
      x = self._transform_vectors(x, angles, flips, domain_ids)
    inverts = tf.reshape(tf.gather(self._inverts, domain_ids), [-1] + [1] * (x.shape.rank - 1))
    reflected = (self._input_range[0] + self._input_range[1] - x) if self._input_range else -x
    result['x'] = tf.where(inverts, reflected, x)
    result['y'] = tf.gather_nd(self._permutations, tf.stack([domain_ids, tf.cast(batch['y'], tf.int32)], axis=-1))
    return result

  def _corrupt(self, x: tf.Tensor, domain_ids: tf.Tensor) -> tf.Tensor:
    """Each example's corruption (rotation is applied with the domain's own rotation)."""
    is_image = x.shape.rank == 4
    lo, hi = self._input_range if self._input_range else (None, None)
    spread = (hi - lo) if self._input_range else 1.0
    axes = list(range(1, x.shape.rank))
    for family, values in self._families.items():
      if family in IMAGE_ONLY_CORRUPTIONS and not is_image:
        raise ValueError(f'the {family} corruption is defined for images, not vectors [B, D].')
      value = tf.gather(values, domain_ids)
      selected = tf.reshape(value > 0.0, [-1] + [1] * (x.shape.rank - 1))
      value = tf.reshape(value, [-1] + [1] * (x.shape.rank - 1))
      if family == 'noise':
        key = tf.cast(tf.reduce_sum(tf.abs(x)) * 1000.0, tf.int64)
        corrupted = x + value * spread * tf.random.stateless_normal(tf.shape(x), seed=tf.stack([key, 7]))
      elif family == 'blur':
        corrupted = _gaussian_blur(x, value)
      elif family == 'brightness':
        corrupted = x + value * spread
      elif family == 'contrast':
        mean = tf.reduce_mean(x, axis=axes, keepdims=True)
        corrupted = mean + value * (x - mean)
      elif family == 'haze':
        top = hi if self._input_range else tf.reduce_max(x, axis=axes, keepdims=True)
        corrupted = (1.0 - value) * x + value * top
      elif family == 'scale':
        corrupted = self._zoom(x, value) if is_image else x * value
      else:  # jitter
        directions = np.random.default_rng(self._plane_seed + 1).uniform(-1.0, 1.0, size=int(x.shape[-1]))
        corrupted = x * (1.0 + value * directions.astype(np.float32))
      x = tf.where(selected, corrupted, x)
    return x

  def _zoom(self, x: tf.Tensor, factors: tf.Tensor) -> tf.Tensor:
    """Images zoomed in about their centre by `factors` [B, 1, 1, 1] (1 keeps an image as it is)."""
    height, width = int(x.shape[1]), int(x.shape[2])
    inverse = 1.0 / tf.reshape(factors, [-1])
    cx, cy = (width - 1) / 2.0, (height - 1) / 2.0
    zeros = tf.zeros_like(inverse)
    transforms = tf.stack([inverse, zeros, cx * (1.0 - inverse), zeros, inverse, cy * (1.0 - inverse), zeros, zeros],
                          axis=1)
    fill = self._input_range[0] if self._input_range else 0.0
    return tf.raw_ops.ImageProjectiveTransformV3(images=x, transforms=transforms, output_shape=[height, width],
                                                 fill_value=fill, interpolation='BILINEAR', fill_mode='CONSTANT')

  def _transform_images(self, x: tf.Tensor, angles: tf.Tensor, flips: tf.Tensor) -> tf.Tensor:
    height, width = int(x.shape[1]), int(x.shape[2])
    fill = self._input_range[0] if self._input_range else 0.0
    rotated = tf.raw_ops.ImageProjectiveTransformV3(
        images=x, transforms=rotation_transforms(angles, height, width), output_shape=[height, width],
        fill_value=fill, interpolation='BILINEAR', fill_mode='CONSTANT')
    return tf.where(tf.reshape(flips, [-1, 1, 1, 1]), tf.reverse(rotated, axis=[2]), rotated)

  def _transform_vectors(self, x: tf.Tensor, angles: tf.Tensor, flips: tf.Tensor,
                         domain_ids: tf.Tensor) -> tf.Tensor:
    if self._rotation_planes.max() > 1:
      return self._turn_planes(x, angles, flips, domain_ids)
    u, v = _plane(int(x.shape[-1]), self._plane_seed)
    a, b = tf.linalg.matvec(x, u), tf.linalg.matvec(x, v)  # Coordinates in the plane, [B].
    rest = x - a[:, None] * u - b[:, None] * v
    a = tf.where(flips, -a, a)
    cos, sin = tf.cos(angles), tf.sin(angles)
    return rest + (cos * a - sin * b)[:, None] * u + (sin * a + cos * b)[:, None] * v

  def _turn_planes(self, x: tf.Tensor, angles: tf.Tensor, flips: tf.Tensor, domain_ids: tf.Tensor) -> tf.Tensor:
    """x [B, D] with each example's first `rotation_planes` planes of the basis turned by its angle (module
    docstring); a flip reflects the first plane's first axis before the turn."""
    count = int(self._rotation_planes.max())
    u, v = _planes(int(x.shape[-1]), count, self._plane_seed)
    a, b = tf.linalg.matmul(x, u, transpose_b=True), tf.linalg.matmul(x, v, transpose_b=True)  # [B, count] each.
    a_first = tf.where(flips, -a[:, 0], a[:, 0])
    a_flipped = tf.concat([a_first[:, None], a[:, 1:]], axis=1)
    turned = tf.sequence_mask(tf.gather(self._rotation_planes, domain_ids), count)  # [B, count]
    cos, sin = tf.cos(angles)[:, None], tf.sin(angles)[:, None]
    a_new = tf.where(turned, cos * a_flipped - sin * b, a_flipped)
    b_new = tf.where(turned, sin * a_flipped + cos * b, b)
    return x + tf.linalg.matmul(a_new - a, u) + tf.linalg.matmul(b_new - b, v)


def _gaussian_blur(x: tf.Tensor, sigmas: tf.Tensor) -> tf.Tensor:
  """Each image [B, H, W, C] blurred by a 5 x 5 Gaussian of its sigma [B, 1, 1, 1], edges mirrored; separable,
  per example (callers keep the uncorrupted examples)."""
  offsets = tf.range(-2.0, 3.0)
  sigma = tf.maximum(tf.reshape(sigmas, [-1, 1]), 1e-3)
  kernel = tf.exp(-0.5 * (offsets[tf.newaxis] / sigma) ** 2)
  kernel = kernel / tf.reduce_sum(kernel, axis=1, keepdims=True)  # [B, 5]
  padded = tf.pad(x, [[0, 0], [2, 2], [2, 2], [0, 0]], mode='SYMMETRIC')
  height, width = int(x.shape[1]), int(x.shape[2])
  rows = sum(kernel[:, i, None, None, None] * padded[:, i:i + height] for i in range(5))
  return sum(kernel[:, j, None, None, None] * rows[:, :, j:j + width] for j in range(5))
