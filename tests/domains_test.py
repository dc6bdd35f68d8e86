"""Tests the domain transforms against scipy/numpy: image rotation, flip, inversion, vector rotation, labels."""

import collections

import numpy as np
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

  def test_plain_domains_are_the_identity_and_bad_permutations_fail(self):
    transform = domains.DomainTransform(domains.plain_domains(('day', 'night')), 3)
    self.assertTrue(transform.is_identity)
    batch = {'x': np.ones((2, 3), np.float32), 'y': np.zeros(2, np.int32)}
    self.assertIs(transform(batch, np.zeros(2, np.int32)), batch)
    with self.assertRaisesRegex(ValueError, 'not a permutation of 3 labels'):
      domains.DomainTransform([domains.Domain('bad', 0, label_permutation=(0, 0, 1))], 3)


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
    batch = next(iter(task_lib.model_batches(shifted.client_dataset(1, 'c0', spec, 0), shifted.batch_fn)))
    self.assertAllEqual(batch['mode'], np.ones(6))
    order = np.argsort(-batch['x'][:, 0])  # Inverted: x' = -x, so the largest x' is the smallest x.
    self.assertAllClose(-batch['x'].numpy()[order], np.arange(12, dtype=np.float32).reshape(6, 2))
    self.assertAllEqual(np.sort(batch['y']), np.sort(np.array([1, 2, 0, 1, 2, 0])))
    test_batch = next(iter(shifted.test_dataset(1, 4)))
    self.assertAllEqual(test_batch['y'], [1, 1, 1, 1])
    self.assertAllEqual(test_batch['mode'], [1, 1, 1, 1])


if __name__ == '__main__':
  tf.test.main()
