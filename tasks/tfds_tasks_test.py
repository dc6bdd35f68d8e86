"""Tests the tasks read with tensorflow-datasets (MNIST, CIFAR-10) from small files written in its prepared layout by
TFDS itself; `mnist`'s Fashion-MNIST base is the real one (Debian's files, `tasks.fashion_mnist_files`)."""

import os

import numpy as np
import tensorflow as tf

from tasks import cifar
from tasks import fashion_mnist_files
from tasks.testing import fake_tff_files
from tasks.testing import fake_tfds_files
from tasks import mnist
from tasks import tfds_files


def _labels(dataset):
  return np.array([int(e['label']) for e in dataset.as_numpy_iterator()])


class MnistTaskTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.data_dir = os.path.join(os.environ.get('TEST_TMPDIR', '/tmp'), 'tfds_tasks_test')
    cls.splits = {}
    cls.splits['mnist'] = {'train': fake_tfds_files.random_images((28, 28, 1), 250, 10, 0),
                           'test': fake_tfds_files.random_images((28, 28, 1), 30, 10, 10)}
    fake_tfds_files.write('mnist', cls.data_dir, cls.splits['mnist'])

  def test_bases_clients_labels_and_inputs(self):
    task = mnist.create_task(self.data_dir, seed=4)
    self.assertEqual(task.population_summary(), {  # 250 MNIST images: 2 clients of 100; Fashion-MNIST's 60,000.
        'day': {'clients': 2, 'train_examples': 200, 'test_examples': 30},
        'night': {'clients': 600, 'train_examples': 60000, 'test_examples': 10000}})
    day, night = (np.concatenate([_labels(task.train_data[b].create_tf_dataset_for_client(c))
                                  for c in task.mode_client_ids()[b][:2]]) for b in (0, 1))
    self.assertTrue(np.all(day < 10) and np.all((night >= 10) & (night < 20)))
    self.assertAllEqual(np.sort(_labels(task.test_data[1])), np.sort(fashion_mnist_files.load()['test'][1]) + 10)
    batch = next(iter(task.test_dataset(0, 8)))
    self.assertEqual(batch['x'].shape, (8, 28, 28, 1))
    self.assertBetween(float(tf.reduce_min(batch['x'])), 0.0, 1.0)
    self.assertBetween(float(tf.reduce_max(batch['x'])), 0.9, 1.0)  # image / 255.
    self.assertEqual(task.model_fn(2).output_shape['logits'], (None, 2, 20))
    # The IID split deals each base's images out without replacement, the same for the same seed.
    pixels = np.concatenate([np.stack([e['image'] for e in task.train_data[0].create_tf_dataset_for_client(c)
                                       .as_numpy_iterator()]) for c in task.mode_client_ids()[0]])
    self.assertLen(np.unique(pixels.reshape(200, -1), axis=0), 200)
    again = mnist.create_task(self.data_dir, seed=4)
    first = task.mode_client_ids()[0][0]
    self.assertAllEqual(_labels(task.train_data[0].create_tf_dataset_for_client(first)),
                        _labels(again.train_data[0].create_tf_dataset_for_client(first)))

  def test_missing_data_is_one_line_naming_the_flag(self):
    with self.assertRaisesRegex(FileNotFoundError, '^task mnist needs mnist prepared .* --tfds_data_dir=DIR.$'):
      mnist.create_task(self.create_tempdir().full_path)
    with self.assertRaisesRegex(FileNotFoundError, 'set --tfds_data_dir'):
      mnist.create_task(None)


class CifarFromTfdsTest(tf.test.TestCase):

  def test_cifar10_from_tfds_replaces_the_python_layout(self):
    cache_dir, data_dir = self.create_tempdir().full_path, self.create_tempdir().full_path
    rng = np.random.default_rng(1)
    fake_tff_files.write_sqlite(os.path.join(cache_dir, cifar.CIFAR100_FILENAME), {
        'train': {str(i): fake_tff_files.cifar100_elements(rng, rng.integers(0, 100, 3)) for i in range(2)},
        'test': {'0': fake_tff_files.cifar100_elements(rng, rng.integers(0, 100, 4))}})
    train = fake_tfds_files.random_images((32, 32, 3), 300, 10, 0)
    fake_tfds_files.write('cifar10', data_dir, {'train': train, 'test': fake_tfds_files.random_images(
        (32, 32, 3), 20, 10, 1)})
    task = cifar.create_task(cache_dir, seed=0, tfds_data_dir=data_dir)  # No cifar-10-batches-py in cache_dir.
    self.assertEqual(task.population_summary()['day'], {'clients': 3, 'train_examples': 300, 'test_examples': 20})
    labels = np.concatenate([_labels(task.train_data[0].create_tf_dataset_for_client(c))
                             for c in task.mode_client_ids()[0]])
    self.assertAllEqual(np.sort(labels), np.sort(train[1]) + cifar.CIFAR10_LABEL_OFFSET)


class TfdsFilesTest(tf.test.TestCase):

  def test_reads_every_split_as_written(self):
    data_dir = self.create_tempdir().full_path
    splits = {'train': fake_tfds_files.random_images((28, 28, 1), 40, 10, 0),
              'test': fake_tfds_files.random_images((28, 28, 1), 15, 10, 1)}
    fake_tfds_files.write('mnist', data_dir, splits)
    self.assertTrue(os.path.exists(os.path.join(data_dir, 'mnist', '3.0.1', 'dataset_info.json')))
    loaded = tfds_files.load('mnist', data_dir, 'mnist')
    for split, (images, labels) in splits.items():
      order = np.lexsort(images.reshape(len(images), -1).T)
      got_images, got_labels = loaded[split]
      got_order = np.lexsort(got_images.reshape(len(got_images), -1).T)
      self.assertAllEqual(got_images[got_order], images[order])  # TFDS shuffles; the examples are the same.
      self.assertAllEqual(got_labels[got_order], labels[order])


if __name__ == '__main__':
  tf.test.main()
