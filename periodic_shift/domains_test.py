"""Tests the domain transforms against scipy/numpy: image rotation, flip, inversion, vector rotation, labels."""

import collections

import numpy as np
from scipy import linalg
from scipy import ndimage
import tensorflow as tf
import tensorflow_federated as tff

from periodic_shift import domains
from tasks import task as task_lib


def _apply(domain_list, x, y, domain_ids, num_classes=4, input_range=(0.0, 1.0)):
  transform = domains.DomainTransform(domain_list, num_classes, input_range)
  result = transform({'x': tf.constant(x), 'y': tf.constant(y)}, tf.constant(domain_ids))
  return result['x'].numpy(), result['y'].numpy()


class DomainTransformTest(tf.test.TestCase):

  def test_images_rotate_like_scipy_per_example(self):
    rng = np.random.default_rng(0)
    images = rng.uniform(size=(3, 28, 28, 1)).astype(np.float32)
    domain_list = [domains.Domain('d0', 0), domains.Domain('d30', 0, rotation_degrees=30.0),
                   domains.Domain('d-75', 0, rotation_degrees=-75.0)]
    rotated, _ = _apply(domain_list, images, np.zeros(3, np.int32), [2, 0, 1])
    # Within a disc whose rotation stays inside the image (the two treat the border differently).
    rows, cols = np.mgrid[:28, :28]
    inside = np.hypot(rows - 13.5, cols - 13.5) < 12.5
    for index, angle in enumerate((-75.0, 0.0, 30.0)):  # The angles of domains 2, 0, 1.
      expected = ndimage.rotate(images[index, :, :, 0], angle, reshape=False, order=1, cval=0.0)
      self.assertAllClose(rotated[index, :, :, 0][inside], expected[inside], atol=1e-5)

  def test_rotation_turns_counter_clockwise_as_displayed(self):
    image = np.zeros((1, 9, 9, 1), np.float32)
    image[0, 1, 4:8, 0] = 1.0  # A bar in the top rows, right of the centre column.
    rotated, _ = _apply([domains.Domain('r', 0, rotation_degrees=90.0)], image, np.zeros(1, np.int32), [0])
    self.assertEqual(np.argwhere(rotated[0, :, :, 0] > 0.5).tolist(), [[1, 1], [2, 1], [3, 1], [4, 1]])

  def test_flip_inversion_and_label_permutation(self):
    rng = np.random.default_rng(1)
    images = rng.uniform(size=(2, 5, 5, 3)).astype(np.float32)
    domain_list = [domains.Domain('plain', 0),
                   domains.Domain('flip_invert', 0, flip=True, invert=True, label_permutation=(2, 0, 3, 1))]
    x, y = _apply(domain_list, images, np.array([1, 3], np.int32), [1, 0])
    self.assertAllClose(x[0], 1.0 - images[0, :, ::-1, :])
    self.assertAllClose(x[1], images[1])
    self.assertAllEqual(y, [0, 3])  # P[1] = 0 for the transformed example; the plain one keeps its label.
    standardized, _ = _apply(domain_list, images, np.zeros(2, np.int32), [1, 1], input_range=None)
    self.assertAllClose(standardized[0], -images[0, :, ::-1, :])

  def test_vectors_rotate_in_a_fixed_plane(self):
    rng = np.random.default_rng(2)
    x = rng.normal(size=(4, 16)).astype(np.float32)
    domain_list = [domains.Domain(f'r{a}', 0, rotation_degrees=a) for a in (0.0, 40.0, 80.0, 360.0)]
    rotated, _ = _apply(domain_list, x, np.zeros(4, np.int32), [0, 1, 2, 3], input_range=None)
    self.assertAllClose(np.linalg.norm(rotated, axis=1), np.linalg.norm(x, axis=1), rtol=1e-5)
    self.assertAllClose(rotated[3], x[3], atol=1e-5)  # A full turn.
    twice, _ = _apply(domain_list, rotated[1:2], np.zeros(1, np.int32), [1], input_range=None)
    once, _ = _apply(domain_list, x[1:2], np.zeros(1, np.int32), [2], input_range=None)
    self.assertAllClose(twice, once, atol=1e-5)  # 40 + 40 = 80 degrees.
    # Only a plane moves: the change has rank 2 over many vectors.
    many = rng.normal(size=(50, 16)).astype(np.float32)
    moved, _ = _apply(domain_list, many, np.zeros(50, np.int32), np.full(50, 1), input_range=None)
    self.assertEqual(np.linalg.matrix_rank(moved - many, tol=1e-4), 2)

  def test_vectors_turn_several_orthogonal_planes_as_the_exponential_of_their_generator(self):
    rng = np.random.default_rng(3)
    dimension, planes = 12, 6
    x = rng.normal(size=(40, dimension)).astype(np.float32)
    angles = (0.0, 25.0, 180.0)
    domain_list = [domains.Domain(f'r{a}', 0, rotation_degrees=a, rotation_planes=planes) for a in angles]
    ids = np.arange(40) % 3
    turned, _ = _apply(domain_list, x, np.zeros(40, np.int32), ids, input_range=None)
    self.assertAllClose(turned[ids == 0], x[ids == 0])
    self.assertAllClose(turned[ids == 2], -x[ids == 2], atol=1e-5)  # 180 degrees in every plane: x -> -x.
    # The rotation is exp(theta G), G = sum_p v_p u_p^T - u_p v_p^T, over orthonormal planes (u_p, v_p) that the
    # transform moves: recover them from the 90-degree map M (M u = v, M v = -u), then compare exp(theta G) x.
    quarter, _ = _apply([domains.Domain('q', 0, rotation_degrees=90.0, rotation_planes=planes)],
                        np.eye(dimension, dtype=np.float32), np.zeros(dimension, np.int32), np.zeros(dimension),
                        input_range=None)
    generator = quarter.T  # Column j is the image of e_j: G = M for a quarter turn in every plane.
    self.assertAllClose(generator, -generator.T, atol=1e-5)
    self.assertAllClose(generator @ generator, -np.eye(dimension), atol=1e-5)
    expected = x[ids == 1] @ linalg.expm(np.radians(25.0) * generator).T
    self.assertAllClose(turned[ids == 1], expected, atol=1e-4)

  def test_fewer_planes_leave_the_rest_of_the_space_alone(self):
    rng = np.random.default_rng(4)
    many = rng.normal(size=(60, 16)).astype(np.float32)
    domain_list = [domains.Domain('three', 0, rotation_degrees=50.0, rotation_planes=3),
                   domains.Domain('all', 0, rotation_degrees=50.0, rotation_planes=8)]
    for domain_id, rank in ((0, 6), (1, 16)):
      moved, _ = _apply(domain_list, many, np.zeros(60, np.int32), np.full(60, domain_id), input_range=None)
      self.assertAllClose(np.linalg.norm(moved, axis=1), np.linalg.norm(many, axis=1), rtol=1e-5)
      self.assertEqual(np.linalg.matrix_rank(moved - many, tol=1e-3), rank)
    with self.assertRaisesRegex(ValueError, 'at most half'):
      _apply([domains.Domain('too_many', 0, rotation_degrees=5.0, rotation_planes=9)], many, np.zeros(60, np.int32),
             np.zeros(60), input_range=None)

  def test_plain_domains_are_the_identity_and_bad_permutations_fail(self):
    transform = domains.DomainTransform(domains.plain_domains(('day', 'night')), 3)
    self.assertTrue(transform.is_identity)
    batch = {'x': np.ones((2, 3), np.float32), 'y': np.zeros(2, np.int32)}
    self.assertIs(transform(batch, np.zeros(2, np.int32)), batch)
    with self.assertRaisesRegex(ValueError, 'not a permutation of 3 labels'):
      domains.DomainTransform([domains.Domain('bad', 0, label_permutation=(0, 0, 1))], 3)

  def test_time_stages_are_added_to_the_batch_without_transforming_it(self):
    transform = domains.DomainTransform([domains.Domain('first', 0), domains.Domain('later', 0, stage=4)], 3)
    self.assertFalse(transform.is_identity)
    batch = {'x': np.arange(6, dtype=np.float32).reshape(2, 3), 'y': np.array([2, 1], np.int32)}
    result = transform(batch, np.array([1, 0], np.int32))
    self.assertAllEqual(result['stage'], [4, 0])
    self.assertAllEqual(result['x'], batch['x'])
    self.assertAllEqual(result['y'], batch['y'])
    self.assertNotIn('stage', domains.DomainTransform(domains.plain_domains(('a', 'b')), 3)(batch, [0, 1]))


class CorruptionTest(tf.test.TestCase):

  def _corrupt(self, family, severity, x, input_range=(0.0, 1.0)):
    domain_list = [domains.Domain('clean', 0), domains.Domain('c', 0, corruption=family, severity=severity)]
    clean, _ = _apply(domain_list, x, np.zeros(len(x), np.int32), np.zeros(len(x), np.int32),
                      input_range=input_range)
    self.assertAllClose(clean, x, atol=1e-6)  # The clean domain is untouched in the same batch.
    corrupted, _ = _apply(domain_list, x, np.zeros(len(x), np.int32), np.ones(len(x), np.int32),
                          input_range=input_range)
    return corrupted

  def test_pointwise_families_match_numpy(self):
    x = np.random.default_rng(3).uniform(size=(2, 6, 6, 1)).astype(np.float32)
    self.assertAllClose(self._corrupt('brightness', 3, x), x + 0.15)
    mean = x.mean(axis=(1, 2, 3), keepdims=True)
    self.assertAllClose(self._corrupt('contrast', 5, x), mean + 0.15 * (x - mean), atol=1e-6)
    self.assertAllClose(self._corrupt('haze', 2, x), 0.8 * x + 0.2 * 1.0, atol=1e-6)
    vectors = np.random.default_rng(4).normal(size=(3, 8)).astype(np.float32)
    self.assertAllClose(self._corrupt('scale', 4, vectors, input_range=None), 1.2 * vectors, atol=1e-6)

  def test_noise_has_the_severity_standard_deviation(self):
    x = np.full((4, 32, 32, 1), 0.5, np.float32)
    noise = self._corrupt('noise', 5, x) - x
    self.assertBetween(float(noise.std()), 0.10 * 0.97, 0.10 * 1.03)  # 4096 draws: s.e. of the s.d. ~1.1%.
    self.assertAllClose(noise, self._corrupt('noise', 5, x) - x)  # The same batch gets the same noise.
    images = np.random.default_rng(8).uniform(size=(3, 8, 8, 1)).astype(np.float32)
    for family in ('noise', 'shot_noise', 'impulse_noise', 'fog'):  # An example alike in any batch.
      alone = self._corrupt(family, 5, images[:1])
      self.assertAllClose(self._corrupt(family, 5, images[[2, 0, 1]])[1:2], alone)
      self.assertNotAllClose(self._corrupt(family, 5, images[1:2]), alone)

  def test_blur_and_zoom_match_scipy(self):
    image = np.random.default_rng(5).uniform(size=(1, 16, 16, 1)).astype(np.float32)
    blurred = self._corrupt('blur', 5, image)[0, :, :, 0]
    expected = ndimage.gaussian_filter(image[0, :, :, 0], sigma=1.0, mode='reflect', truncate=2.0)
    self.assertAllClose(blurred, expected, atol=1e-5)
    zoomed = self._corrupt('scale', 5, image)[0, :, :, 0]
    centre = 7.5
    expected = ndimage.affine_transform(image[0, :, :, 0], np.eye(2) / 1.3, offset=centre - centre / 1.3, order=1,
                                        cval=0.0)
    self.assertAllClose(zoomed, expected, atol=1e-5)

  def test_shot_and_impulse_noise_have_the_benchmarks_statistics(self):
    x = np.full((4, 32, 32, 1), 0.5, np.float32)
    shot = self._corrupt('shot_noise', 5, x)  # Poisson(0.5 c) / c, c = 50: mean 0.5, variance 0.5 / 50.
    self.assertBetween(float(shot.mean()), 0.49, 0.51)
    self.assertBetween(float(shot.var()), 0.01 * 0.93, 0.01 * 1.07)  # 4096 draws: s.e. of the variance ~2.2%.
    impulse = self._corrupt('impulse_noise', 5, x)  # 7% of the values: half to 1, half to 0.
    self.assertBetween(float(np.mean(impulse == 1.0)), 0.035 - 0.009, 0.035 + 0.009)
    self.assertBetween(float(np.mean(impulse == 0.0)), 0.035 - 0.009, 0.035 + 0.009)
    self.assertAllClose(impulse[(impulse != 0) & (impulse != 1)], np.full(np.sum((impulse != 0) & (impulse != 1)), 0.5))

  def test_defocus_and_motion_blur_are_their_kernels_with_edges_extended_as_scipy(self):
    image = np.random.default_rng(6).uniform(size=(2, 12, 12, 1)).astype(np.float32)
    for family, severity in (('defocus_blur', 1), ('defocus_blur', 5), ('motion_blur', 3)):
      domain = domains.Domain('c', 0, corruption=family, severity=severity)
      kernel = domains._kernel_table([domains.Domain('clean', 0), domain], family, 0)[1]
      self.assertAllClose(kernel.sum(), 1.0, atol=1e-6)
      expected = np.stack([ndimage.correlate(image[i, :, :, 0], kernel, mode='nearest') for i in range(2)])
      self.assertAllClose(self._corrupt(family, severity, image)[..., 0], np.clip(expected, 0, 1), atol=1e-5)
    # Defocus at radius < 1 is the centre pixel under its 3 x 3 Gaussian; at 1.5 the whole 3 x 3 disk.
    gaussian = np.exp(-0.5 * (np.arange(-1, 2) / 0.4) ** 2)
    self.assertAllClose(domains._defocus_kernel(0.3, 0.4)[1:4, 1:4], np.outer(gaussian, gaussian) / gaussian.sum() ** 2,
                        atol=1e-6)
    # A motion trail's mass lies along its direction: at 0 degrees, on the centre row, right of the centre.
    trail = domains._motion_kernel(6, 2.0, 0.0)
    self.assertAllClose(trail[6, 6:].sum(), 1.0, atol=1e-6)
    self.assertGreater(trail[6, 6], trail[6, 9])

  def test_fog_pixelate_and_jpeg(self):
    digits = np.zeros((3, 16, 16, 1), np.float32)
    digits[:, 4:12, 6:10] = 0.8
    fog = self._corrupt('fog', 5, digits)
    self.assertTrue(np.all((fog >= 0) & (fog <= 1)))
    self.assertGreater(float(fog[digits == 0].mean()), 0.2)  # The background lifts ...
    self.assertLess(float(fog[digits > 0].mean()), 0.8)  # ... and the stroke's contrast falls.
    ramp = np.tile(np.linspace(0, 1, 16, dtype=np.float32), (1, 16, 1))[..., None]
    pixelated = self._corrupt('pixelate', 5, ramp)  # int(16 x 0.65) = 10 box averages, back up by nearest.
    self.assertLen(np.unique(np.round(pixelated[0, 0, :, 0], 5)), 10)
    texture = np.random.default_rng(7).uniform(size=(2, 16, 16, 1)).astype(np.float32)
    errors = [float(np.abs(self._corrupt('jpeg', severity, texture) - texture).mean()) for severity in (1, 5)]
    self.assertGreater(errors[1], errors[0])  # Quality 40 loses more than quality 80.
    self.assertGreater(errors[0], 0.0)

  def test_image_only_families_and_too_many_planes_are_refused(self):
    with self.assertRaisesRegex(ValueError, 'corruption must be one of'):
      domains.Domain('bad', 0, corruption='snow', severity=1)
    data = tff.simulation.datasets.TestClientData({'c0': collections.OrderedDict(
        x=np.zeros((2, 4), np.float32), y=np.zeros(2, np.int32))})
    model_fn = lambda k: tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(2)])
    task = task_lib.Task(name='vectors', train_data=[data], client_sizes=[{'c0': 2}], test_data=[], test_sizes=[],
                         batch_fn=lambda b: b, model_fn=model_fn, num_classes=2, mode_names=('a',))
    with self.assertRaisesRegex(ValueError, 'the blur corruption is defined for images; vectors has'):
      task.with_domains([domains.Domain('a', 0), domains.Domain('b', 0, corruption='blur', severity=1)])
    with self.assertRaisesRegex(ValueError, r'at most half their dimension; vectors has inputs of shape \(4,\) and '
                                'rotation_planes is 3'):
      task.with_domains([domains.Domain('a', 0, rotation_degrees=10.0, rotation_planes=3)])


class TaskDomainsTest(tf.test.TestCase):

  def test_task_with_domains_labels_and_transforms_examples(self):
    data = tff.simulation.datasets.TestClientData({'c0': collections.OrderedDict(
        x=np.arange(12, dtype=np.float32).reshape(6, 2), y=np.array([0, 1, 2, 0, 1, 2], np.int32))})
    test = tf.data.Dataset.from_tensor_slices(collections.OrderedDict(x=np.ones((4, 2), np.float32),
                                                                      y=np.zeros(4, np.int32)))
    task = task_lib.Task(name='t', train_data=[data], client_sizes=[{'c0': 6}], test_data=[test], test_sizes=[4],
                         batch_fn=lambda b: b, model_fn=None, num_classes=3, mode_names=('base',))
    shifted = task.with_domains([domains.Domain('base', 0), domains.Domain('permuted', 0, invert=True,
                                                                            label_permutation=(1, 2, 0))])
    self.assertEqual(shifted.num_modes, 2)
    self.assertEqual(shifted.domain_names, ['base', 'permuted'])
    spec = tff.simulation.baselines.ClientSpec(num_epochs=1, batch_size=6)
    batch = next(iter(task_lib.model_batches(shifted.client_dataset(1, 'c0', spec, (0, 0)), shifted.batch_fn)))
    self.assertAllEqual(batch['mode'], np.ones(6))
    order = np.argsort(-batch['x'][:, 0])  # Inverted: x' = -x, so the largest x' is the smallest x.
    self.assertAllClose(-batch['x'].numpy()[order], np.arange(12, dtype=np.float32).reshape(6, 2))
    self.assertAllEqual(np.sort(batch['y']), np.sort(np.array([1, 2, 0, 1, 2, 0])))
    test_batch = next(iter(shifted.test_dataset(1, 4)))
    self.assertAllEqual(test_batch['y'], [1, 1, 1, 1])
    self.assertAllEqual(test_batch['mode'], [1, 1, 1, 1])


if __name__ == '__main__':
  tf.test.main()
