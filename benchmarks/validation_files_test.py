"""The validation layout holds exactly the training digits of `emnist_real_digits` and none of its test digits, read
back from both layouts' files (`sqlite3` and `tf.train.Example`, not the writers' code)."""

import collections
import os
import sqlite3

from absl.testing import absltest
import numpy as np
import tensorflow as tf

from benchmarks import task_files
from benchmarks import validation_files
from tasks import fashion_mnist_files


def _examples(directory: str) -> dict[str, collections.Counter]:
  """Split name -> multiset of (label, pixel bytes) in the layout's file."""
  found = collections.defaultdict(collections.Counter)
  with sqlite3.connect(os.path.join(directory, 'emnist_all.sqlite')) as connection:
    for split, proto in connection.execute('SELECT split_name, serialized_example_proto FROM examples'):
      features = tf.train.Example.FromString(proto).features.feature
      pixels = np.asarray(features['pixels'].float_list.value, np.float32)
      found[split][(int(features['label'].int64_list.value[0]), pixels.tobytes())] += 1
  return found


class ValidationFilesTest(absltest.TestCase):

  def test_the_validation_split_is_a_fifth_of_the_training_digits_and_meets_no_test_digit(self):
    real, tuning = self.create_tempdir().full_path, self.create_tempdir().full_path
    task_files.write('emnist_real_digits', real, np.random.default_rng(3))
    validation_files.write(tuning, seed=3)
    real, tuning = _examples(real), _examples(tuning)
    # As multisets: the validation layout's digits are the real layout's training digits, so none of its test split.
    self.assertEqual(tuning['all_train'] + tuning['all_test'], real['all_train'])
    self.assertEqual(sum(tuning['all_test'].values()), sum(real['all_train'].values()) // 5)
    self.assertNotEqual(validation_files.split(1797, 3)[1].tolist(), validation_files.split(1797, 4)[1].tolist())


  def test_the_fashion_mnist_validation_split_is_a_fifth_of_its_training_images_and_none_of_its_test_images(self):
    directory = self.create_tempdir().full_path
    validation_files.write_fashion_mnist(directory, seed=1)
    real, split = fashion_mnist_files.load(), fashion_mnist_files.load(directory)
    rows = lambda images, labels: collections.Counter(zip(labels.tolist(), map(bytes, images.reshape(len(labels), -1))))
    (train, train_labels), (test, test_labels) = real['train'], real['test']
    held = rows(*split['train']) + rows(*split['test'])
    self.assertEqual(held, rows(train, train_labels))
    self.assertLen(split['test'][1], 12000)
    self.assertFalse(set(rows(test, test_labels)) & set(held))


if __name__ == '__main__':
  absltest.main()
