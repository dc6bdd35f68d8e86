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
              with a seed keyed by the example's values (the same noise for an example in every batch);
  blur        (images) a Gaussian blur, sigma = .4 .6 .7 .8 1.0 pixels (5 x 5 kernel, edges mirrored);
  brightness  x + delta_s r, delta = .05 .1 .15 .2 .3;
  contrast    m + c_s (x - m), m the example's mean, c = .75 .5 .4 .3 .15;
  haze        (images; fog-like) (1 - a_s) x + a_s hi, a = .1 .2 .3 .4 .5 (standardized: hi = the example's max);
  rotation    by 5 10 15 20 30 degrees (the rotation above);
  scale       a zoom about the centre by 1.05 1.1 1.15 1.2 1.3 (images), or x times that factor (vectors);
  jitter      (images) per-channel gains 1 + j_s u_c with u_c in [-1, 1] fixed per domain, j = .05 .1 .15 .2 .3.
  shot_noise    (images) Poisson(x c_s) / c_s, c = 500 250 100 75 50;
  impulse_noise (images) a share a_s of the values set to 0 or 1 (half each), a = .01 .02 .03 .05 .07;
  defocus_blur  (images) a disk of radius r_s pixels under a 3 x 3 Gaussian of sigma g_s, (r, g) = (.3, .4) (.4, .5)
                (.5, .6) (1, .2) (1.5, .1);
  motion_blur   (images) a trail of L_s pixels weighted by a Gaussian of sigma s_s, (L, s) = (6, 1) (6, 1.5) (6, 2)
                (8, 2) (9, 2.5), in a direction drawn per domain in [-45, 45] degrees;
  fog           (images) (x + a_s F) m / (m + a_s), m the image's max, F a plasma-like field in [0, 1] whose octaves
                decay by d_s, (a, d) = (.2, 3) (.5, 3) (.75, 2.5) (1, 2) (1.5, 1.75);
  pixelate      (images) box-downsampled to p_s of the side and back up, p = .95 .9 .85 .75 .65;
  jpeg          (images) JPEG at quality 80 65 58 50 40 (TensorFlow's encoder).
These are parametric stand-ins for the published corruption suites (which cannot be downloaded here); the severity
tables follow CIFAR-10-C where it has the family (Hendrycks and Dietterich, "Benchmarking Neural Network Robustness
to Common Corruptions and Perturbations", 2019). The families from shot_noise on work on intensities scaled to
[0, 1] and are clipped to them, with CIFAR-10-C's pixel lengths (of 32 x 32 images) unscaled. Random draws are
seeded by the example's own values, so an example is corrupted alike in every batch and every epoch, as a
corrupted benchmark holds one corrupted copy of each image.

A scenario whose domains are all plain bases needs no transform, and `DomainTransform.is_identity` lets the task
skip it, so such runs trace exactly the graphs they traced before domains existed. Domains with time stages
(`Domain.stage`) add each example's stage to the batch, `stage` [B], the one domain property methods may read.
"""

import dataclasses
import math
from typing import Optional, Sequence

import numpy as np
import tensorflow as tf


CORRUPTIONS = ('noise', 'blur', 'brightness', 'contrast', 'haze', 'rotation', 'scale', 'jitter', 'shot_noise',
               'impulse_noise', 'defocus_blur', 'motion_blur', 'fog', 'pixelate', 'jpeg')
# The families of CIFAR-10-C (Hendrycks and Dietterich, 2019) this module has, with its severity ladders: what a
# windowed scenario draws its image regimes from (`periodic_shift.windowed`).
COMMON_CORRUPTIONS = ('noise', 'shot_noise', 'impulse_noise', 'defocus_blur', 'motion_blur', 'contrast', 'brightness',
                      'fog', 'pixelate', 'jpeg')
# What a windowed scenario draws from for vector inputs (the image-only families excluded).
VECTOR_CORRUPTIONS = ('noise', 'brightness', 'contrast', 'rotation', 'scale')
IMAGE_ONLY_CORRUPTIONS = frozenset({'blur', 'haze', 'jitter', 'shot_noise', 'impulse_noise', 'defocus_blur',
                                    'motion_blur', 'fog', 'pixelate', 'jpeg'})
# Families whose value per severity is a tuple (`Domain.corruption_parameters`); the first entry is the value.
_SEVERITY_PARAMETERS = {
    'defocus_blur': ((0.3, 0.4), (0.4, 0.5), (0.5, 0.6), (1.0, 0.2), (1.5, 0.1)),  # Disk radius, its Gaussian.
    'motion_blur': ((6, 1.0), (6, 1.5), (6, 2.0), (8, 2.0), (9, 2.5)),  # Trail length, Gaussian sigma (pixels).
    'fog': ((0.2, 3.0), (0.5, 3.0), (0.75, 2.5), (1.0, 2.0), (1.5, 1.75)),  # Amplitude, octave decay.
}
_SEVERITIES = {
    'noise': (0.04, 0.06, 0.08, 0.09, 0.10),
    'shot_noise': (500.0, 250.0, 100.0, 75.0, 50.0),
    'impulse_noise': (0.01, 0.02, 0.03, 0.05, 0.07),
    'pixelate': (0.95, 0.9, 0.85, 0.75, 0.65),
    'jpeg': (80.0, 65.0, 58.0, 50.0, 40.0),
    **{family: tuple(float(value[0]) for value in values) for family, values in _SEVERITY_PARAMETERS.items()},
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

  @property
  def corruption_parameters(self) -> tuple[float, ...]:
    """All of the family's parameters at this severity (one for most families)."""
    if self.corruption in _SEVERITY_PARAMETERS:
      return tuple(float(v) for v in _SEVERITY_PARAMETERS[self.corruption][self.severity - 1])
    return (self.corruption_value,)


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
    self._kernels = {family: _kernel_table(domains, family, plane_seed) for family in ('defocus_blur', 'motion_blur')
                     if family in self._families}
    self._decays = np.array([d.corruption_parameters[1] if d.corruption == 'fog' else 1.0 for d in domains],
                            np.float32)
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
        corrupted = x + value * spread * _per_example(x, 7, lambda shape, seed, _: tf.random.stateless_normal(
            shape, seed, dtype=x.dtype))
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
      elif family == 'jitter':
        directions = np.random.default_rng(self._plane_seed + 1).uniform(-1.0, 1.0, size=int(x.shape[-1]))
        corrupted = x * (1.0 + value * directions.astype(np.float32))
      else:  # The common corruptions' image families, on intensities in [0, 1].
        corrupted = self._common_corruption(x, family, value, domain_ids)
      x = tf.where(selected, corrupted, x)
    return x

  def _unit_range(self, x: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """(x scaled to [0, 1], lo, hi): by `input_range`, or per image by its min and max for standardized inputs."""
    if self._input_range:
      lo, hi = (tf.constant(v, x.dtype) for v in self._input_range)
    else:
      lo = tf.reduce_min(x, axis=[1, 2, 3], keepdims=True)
      hi = tf.maximum(tf.reduce_max(x, axis=[1, 2, 3], keepdims=True), lo + 1e-6)
    return (x - lo) / (hi - lo), lo, hi

  def _common_corruption(self, x: tf.Tensor, family: str, value: tf.Tensor, domain_ids: tf.Tensor) -> tf.Tensor:
    """Images [B, H, W, C] under `family` at each example's value [B, 1, 1, 1] (module docstring), clipped to the
    input range as the benchmark clips to [0, 255]."""
    unit, lo, hi = self._unit_range(x)
    if family == 'shot_noise':
      rate = tf.where(value > 0, value, 1.0)
      unit = _per_example(x, 8, lambda shape, seed, lam: tf.random.stateless_poisson(shape, seed, lam, unit.dtype),
                          unit * rate) / rate
    elif family == 'impulse_noise':
      draw = _per_example(x, 9, lambda shape, seed, _: tf.random.stateless_uniform(shape, seed, dtype=unit.dtype))
      unit = tf.where(draw < value / 2, 1.0, tf.where(draw > 1 - value / 2, 0.0, unit))
    elif family in self._kernels:
      unit = _filter_each(unit, tf.gather(self._kernels[family], domain_ids))
    elif family == 'fog':
      field = _plasma(x, tf.gather(self._decays, domain_ids))
      top = tf.reduce_max(unit, axis=[1, 2, 3], keepdims=True)
      unit = (unit + value * field) * top / (top + value)
    elif family == 'pixelate':
      unit = _per_value(unit, value, self._families[family], _pixelated)
    else:  # jpeg
      unit = _per_value(unit, value, self._families[family], lambda images, quality: tf.map_fn(
          lambda image: tf.image.adjust_jpeg_quality(image, int(quality)), images))
    return lo + tf.clip_by_value(unit, 0.0, 1.0) * (hi - lo)

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


def _defocus_kernel(radius: float, alias_sigma: float) -> np.ndarray:
  """CIFAR-10-C's defocus kernel: a disk of `radius` pixels, normalized, smoothed by a 3 x 3 Gaussian of
  `alias_sigma` (its anti-aliasing): [5, 5]."""
  grid = np.arange(-1, 2)
  disk = (grid[:, None] ** 2 + grid[None] ** 2 <= radius ** 2).astype(np.float64)
  gaussian = np.exp(-0.5 * (grid / alias_sigma) ** 2)
  gaussian = np.outer(gaussian, gaussian) / np.outer(gaussian, gaussian).sum()
  kernel = np.zeros((5, 5))
  for i in range(3):
    for j in range(3):
      kernel[i:i + 3, j:j + 3] += disk[i, j] * gaussian
  return kernel / kernel.sum()


def _motion_kernel(length: float, sigma: float, angle: float) -> np.ndarray:
  """A motion blur's kernel: a trail of `length` pixels in direction `angle` (radians) behind the pixel, weights
  exp(-t^2 / (2 sigma^2)) at t = 0 .. length (ImageMagick's motion blur, which CIFAR-10-C calls), each sample split
  bilinearly between its neighbouring pixels: [2 length + 1, 2 length + 1]."""
  size = 2 * int(np.ceil(length)) + 1
  kernel = np.zeros((size, size))
  center = size // 2
  for t in np.arange(0.0, length + 1e-9, 0.25):
    weight = np.exp(-t ** 2 / (2 * sigma ** 2))
    row, column = center + t * np.sin(angle), center + t * np.cos(angle)
    r0, c0 = int(np.floor(row)), int(np.floor(column))
    for r, wr in ((r0, 1 - (row - r0)), (r0 + 1, row - r0)):
      for c, wc in ((c0, 1 - (column - c0)), (c0 + 1, column - c0)):
        if 0 <= r < size and 0 <= c < size:
          kernel[r, c] += weight * wr * wc
  return kernel / kernel.sum()


def _kernel_table(domains: Sequence[Domain], family: str, seed: int) -> np.ndarray:
  """Each domain's kernel of `family` [domains, k, k] (centred, one size), the identity for other domains. A motion
  blur's direction is drawn per domain (seeded) in [-45, 45] degrees, where CIFAR-10-C draws one per image."""
  rng = np.random.default_rng([seed, 19])
  kernels = []
  for domain in domains:
    angle = np.radians(rng.uniform(-45.0, 45.0))
    if domain.corruption != family:
      kernels.append(np.ones((1, 1)))
    elif family == 'defocus_blur':
      kernels.append(_defocus_kernel(*domain.corruption_parameters))
    else:
      kernels.append(_motion_kernel(*domain.corruption_parameters, angle))
  size = max(k.shape[0] for k in kernels)
  table = np.zeros((len(kernels), size, size), np.float32)
  for index, kernel in enumerate(kernels):
    offset = (size - kernel.shape[0]) // 2
    table[index, offset:offset + kernel.shape[0], offset:offset + kernel.shape[0]] = kernel
  return table


def _filter_each(x: tf.Tensor, kernels: tf.Tensor) -> tf.Tensor:
  """Images x [B, H, W, C], each filtered by its kernel [B, k, k] (k odd; every channel alike), edges extended: one
  depthwise convolution over the batch folded into channels."""
  size = int(kernels.shape[-1])
  half = size // 2
  height, width, channels = (int(d) for d in x.shape[1:])
  rows = tf.clip_by_value(tf.range(-half, height + half), 0, height - 1)
  columns = tf.clip_by_value(tf.range(-half, width + half), 0, width - 1)
  padded = tf.gather(tf.gather(x, rows, axis=1), columns, axis=2)  # [B, H + k - 1, W + k - 1, C]
  batch = tf.shape(x)[0]
  folded = tf.reshape(tf.transpose(padded, [1, 2, 0, 3]), [1, height + 2 * half, width + 2 * half, -1])
  filters = tf.reshape(tf.repeat(tf.transpose(kernels, [1, 2, 0]), channels, axis=2), [size, size, -1, 1])
  filtered = tf.nn.depthwise_conv2d(folded, filters, [1, 1, 1, 1], 'VALID')  # [1, H, W, B C]
  return tf.transpose(tf.reshape(filtered, [height, width, batch, channels]), [2, 0, 1, 3])


def _per_example(x: tf.Tensor, salt: int, draw, parameters: Optional[tf.Tensor] = None,
                 shape: Optional[tf.Tensor] = None) -> tf.Tensor:
  """draw(shape, seed, parameter) per example of x [B, ...] (parameters [B, ...] or None; shape: an example's by
  default), its seed (the example's fingerprint, salt): an example is corrupted alike in every batch and every
  epoch, as a corrupted benchmark holds one corrupted copy of each image, and its copies stay copies."""
  keys = tf.bitcast(tf.fingerprint(tf.reshape(x, [tf.shape(x)[0], -1])), tf.int64)
  shape = tf.shape(x)[1:] if shape is None else shape
  parameters = tf.zeros(tf.shape(x)[:1], x.dtype) if parameters is None else parameters
  return tf.map_fn(lambda item: draw(shape, tf.stack([item[0], tf.constant(salt, tf.int64)]), item[1]),
                   (keys, parameters), fn_output_signature=x.dtype)


def _plasma(x: tf.Tensor, decays: tf.Tensor) -> tf.Tensor:
  """A fog field [B, H, W, 1] in [0, 1] per image of x: random grids of 2^o + 1 points per side (o = 1, 2, ...; per
  example, `_per_example`) resized bilinearly and summed with amplitudes decays^-(o - 1) per image (decays [B];
  CIFAR-10-C's plasma fractal, whose diamond-square steps divide the noise by the decay per octave), then scaled to
  [0, 1] per image."""
  shape, dtype = tf.shape(x), x.dtype
  height, width = shape[1], shape[2]
  octaves = 6  # 65 points a side: finer than the largest image here (64 x 64).
  field = tf.zeros([shape[0], height, width, 1], dtype)
  for octave in range(1, octaves + 1):
    points = 2 ** octave + 1
    grid = _per_example(x, 10 + octave, lambda size, seed, _: tf.random.stateless_uniform(size, seed, -1.0, 1.0, dtype),
                        shape=tf.constant([points, points, 1]))
    amplitude = tf.reshape(tf.pow(decays, -(octave - 1.0)), [-1, 1, 1, 1])
    field += amplitude * tf.image.resize(grid, tf.stack([height, width]), 'bilinear')
  low = tf.reduce_min(field, axis=[1, 2, 3], keepdims=True)
  high = tf.reduce_max(field, axis=[1, 2, 3], keepdims=True)
  return (field - low) / tf.maximum(high - low, 1e-6)


def _pixelated(images: tf.Tensor, factor: float) -> tf.Tensor:
  """CIFAR-10-C's pixelate: box-downsampled to int(side x factor) and back up (nearest)."""
  height, width = int(images.shape[1]), int(images.shape[2])
  small = tf.image.resize(images, [max(1, int(height * factor)), max(1, int(width * factor))], 'area')
  return tf.image.resize(small, [height, width], 'nearest')


def _per_value(images: tf.Tensor, value: tf.Tensor, levels: np.ndarray, corrupt) -> tf.Tensor:
  """`corrupt(images, v)` for each nonzero v of the domains' levels, each image taking the result at its own value
  [B, 1, 1, 1]; images of value 0 are returned as they are."""
  result = images
  for level in sorted(set(float(v) for v in levels) - {0.0}):
    result = tf.where(tf.equal(value, level), corrupt(images, level), result)
  return result
