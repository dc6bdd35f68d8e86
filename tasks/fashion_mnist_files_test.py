"""Fashion-MNIST from Debian's IDX files: the real files read as the dataset's published facts say, the task deals
every training image to one client once, and a missing or damaged file ends in one line naming it."""

import gzip
import os

from absl.testing import absltest
import numpy as np

from tasks import fashion_mnist
from tasks import fashion_mnist_files
from tasks import task as task_lib


def _idx(array: np.ndarray) -> bytes:
  """IDX bytes of a uint8 array, written from the format's definition (independently of the reader)."""
  header = bytes([0, 0, 0x08, array.ndim]) + b''.join(int(size).to_bytes(4, 'big') for size in array.shape)
  return header + array.astype(np.uint8).tobytes()


def _copy_with_damage(directory: str, name: str, damage) -> None:
  """Debian's four files linked into `directory`, but file `name` rewritten as `damage(its IDX bytes)` (None: left
  out)."""
  for file_name in (name for files in fashion_mnist_files.FILES.values() for name in files):
    if file_name != name:
      os.symlink(os.path.join(fashion_mnist_files.DEBIAN_DIR, file_name), os.path.join(directory, file_name))
  with gzip.open(os.path.join(fashion_mnist_files.DEBIAN_DIR, name), 'rb') as f:
    data = damage(f.read())
  if data is not None:
    with gzip.open(os.path.join(directory, name), 'wb') as f:
      f.write(data)


class FashionMnistFilesTest(absltest.TestCase):

  def test_the_real_files_hold_the_published_dataset(self):
    splits = fashion_mnist_files.load()
    (images, labels), (test_images, test_labels) = splits['train'], splits['test']
    self.assertEqual((images.shape, labels.shape, test_images.shape, test_labels.shape),
                     ((60000, 28, 28), (60000,), (10000, 28, 28), (10000,)))
    # Xiao, Rasul and Vollgraf (2017): 7,000 images per class, 6,000 of them in training.
    np.testing.assert_array_equal(np.bincount(labels), np.full(10, 6000))
    np.testing.assert_array_equal(np.bincount(test_labels), np.full(10, 1000))
    # The training pixels' mean and standard deviation, 0.2860 and 0.3530 of full scale, as widely published.
    self.assertAlmostEqual(images.mean() / 255, 0.2860, places=3)
    self.assertAlmostEqual(images.std() / 255, 0.3530, places=3)

  def test_a_file_written_by_the_format_reads_back(self):
    directory = self.create_tempdir().full_path
    array = np.random.default_rng(0).integers(0, 256, (3, 28, 28)).astype(np.uint8)
    path = os.path.join(directory, 'x.gz')
    with gzip.open(path, 'wb') as f:
      f.write(_idx(array))
    np.testing.assert_array_equal(fashion_mnist_files.read_idx(path, (3, 28, 28)), array)

  def test_the_task_deals_every_training_image_to_one_client_once(self):
    task = fashion_mnist.create(fashion_mnist.Settings(), task_lib.DataFiles(), seed=3)
    self.assertEqual(fashion_mnist.create(fashion_mnist.Settings(dir=fashion_mnist_files.DEBIAN_DIR),
                                          task_lib.DataFiles(), seed=3).client_sizes, task.client_sizes)
    (images, labels), (_, test_labels) = (fashion_mnist_files.load()[split] for split in ('train', 'test'))
    data, = task.train_data
    self.assertLen(data.client_ids, 200)
    held = np.concatenate([np.stack([example['label'] for example in data.create_tf_dataset_for_client(client)])
                           for client in data.client_ids[:4]])
    self.assertLen(held, 4 * 300)
    self.assertEqual(sum(task.client_sizes[0].values()), len(labels))
    self.assertEqual(task.test_sizes, [len(test_labels)])
    batch = next(iter(data.create_tf_dataset_for_client(data.client_ids[0]).batch(5).map(task.batch_fn)))
    self.assertEqual(batch['x'].shape, (5, 28, 28, 1))
    self.assertBetween(float(batch['x'].numpy().max()), 0.0, 1.0)
    self.assertEqual(task.num_classes, 10)

  def test_a_missing_or_damaged_file_ends_in_one_line_naming_it(self):
    labels, test_labels = 'train-labels-idx1-ubyte.gz', 't10k-labels-idx1-ubyte.gz'
    cases = {
        'missing': (test_labels, lambda raw: None, FileNotFoundError,
                    r't10k-labels-idx1-ubyte\.gz is missing: install Debian\'s dataset-fashion-mnist'),
        'truncated data': (test_labels, lambda raw: raw[:-7], fashion_mnist_files.DamagedFileError,
                           r't10k-labels-idx1-ubyte\.gz is damaged \(9993 bytes of data, not 10000\)'),
        'another shape': (labels, lambda raw: raw[:4] + (59999).to_bytes(4, 'big') + raw[8:-1],
                          fashion_mnist_files.DamagedFileError, r'header says shape \(59999,\), not \(60000,\)'),
        'not IDX': (labels, lambda raw: b'P5 28 28' + raw, fashion_mnist_files.DamagedFileError, 'not an IDX file'),
        'labels out of range': (test_labels, lambda raw: raw[:-1] + bytes([10]), fashion_mnist_files.DamagedFileError,
                                r'label 10 outside 0-9'),
    }
    for what, (name, damage, error, message) in cases.items():
      directory = self.create_tempdir().full_path
      _copy_with_damage(directory, name, damage)
      with self.assertRaisesRegex(error, message, msg=what) as raised:
        fashion_mnist_files.load(directory)
      self.assertNotIn('\n', str(raised.exception))
      self.assertIn(os.path.join(directory, name), str(raised.exception))
    not_gzip = self.create_tempdir().full_path
    _copy_with_damage(not_gzip, labels, lambda raw: None)
    with open(os.path.join(not_gzip, labels), 'wb') as f:
      f.write(b'not gzip at all')
    with self.assertRaisesRegex(fashion_mnist_files.DamagedFileError, r'train-labels-idx1-ubyte\.gz is damaged '
                                r'\(BadGzipFile: .*\); reinstall it with `apt-get install --reinstall'):
      fashion_mnist_files.load(not_gzip)


if __name__ == '__main__':
  absltest.main()
