"""Tests the EMNIST, CIFAR and Stack Overflow tasks on small files in the exact layouts they read offline."""

import collections
import contextlib
import os
import sqlite3
from unittest import mock

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tasks import cifar
from tasks import emnist
from tasks import stackoverflow
from tasks import tff_files
from tasks.testing import fake_tff_files
from tasks import partition

_SPEC = tff.simulation.baselines.ClientSpec(num_epochs=1, batch_size=4)


def _labels(task, mode, client_id):
  return np.concatenate([raw['label'].numpy() for raw, _ in task.client_dataset(mode, client_id, _SPEC, (0, 0))])


def _assert_same_clients(test, ours, theirs, client_ids):
  """`ours` (the task's traced client data) gives each client's examples exactly as TFF's loader does, in order."""
  for client_id in client_ids:
    expected = list(theirs.create_tf_dataset_for_client(client_id).as_numpy_iterator())
    got = list(ours.create_tf_dataset_for_client(client_id).as_numpy_iterator())
    test.assertNotEmpty(expected)
    test.assertLen(got, len(expected))
    for got_element, expected_element in zip(got, expected):
      tf.nest.map_structure(np.testing.assert_array_equal, got_element, expected_element)


def _test_labels(task, mode):
  return np.concatenate([batch['y'].numpy() for batch in task.test_dataset(mode, 8)])


class EmnistTaskTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    self.cache_dir = self.create_tempdir().full_path
    rng = np.random.default_rng(0)
    self.train = {'w_both': [3, 15, 7, 61, 0], 'w_chars': [20, 40, 11], 'w_digits': [1, 2, 9, 9]}
    fake_tff_files.write_sqlite(os.path.join(self.cache_dir, emnist.FILENAME), {
        'all_train': {w: fake_tff_files.emnist_elements(rng, labels) for w, labels in self.train.items()},
        'all_test': {'w_both': fake_tff_files.emnist_elements(rng, [4, 5, 33]),
                     'w_chars': fake_tff_files.emnist_elements(rng, [10, 12])},
        'digits_only_train': {'w_digits': fake_tff_files.emnist_elements(rng, [1])}})
    self.task = emnist.create_task(self.cache_dir)

  def test_populations_are_counted_exactly(self):
    self.assertEqual(self.task.client_sizes, [{'w_both': 3, 'w_digits': 4}, {'w_both': 2, 'w_chars': 3}])
    self.assertNotIn('w_chars', self.task.client_sizes[0])  # A writer with no digits is no day client.
    self.assertEqual(self.task.population_summary(), {
        'day': {'clients': 2, 'train_examples': 7, 'test_examples': 2},
        'night': {'clients': 2, 'train_examples': 5, 'test_examples': 3}})

  def test_modes_hold_the_right_labels(self):
    self.assertCountEqual(_labels(self.task, 0, 'w_both'), [3, 7, 0])
    self.assertCountEqual(_labels(self.task, 1, 'w_both'), [15, 61])
    self.assertCountEqual(_test_labels(self.task, 0), [4, 5])
    self.assertCountEqual(_test_labels(self.task, 1), [33, 10, 12])
    batch = next(iter(self.task.test_dataset(1, 8)))
    self.assertEqual(batch['x'].shape[1:], (28, 28, 1))

  def test_client_datasets_are_tffs_loader_s(self):
    train, _ = tff.simulation.datasets.emnist.load_data(only_digits=False, cache_dir=self.cache_dir)
    for mode in range(2):
      _assert_same_clients(self, self.task.train_data[mode], train.preprocess(emnist._mode_filter(mode)),
                           self.task.client_sizes[mode])

  def test_mode_counts_are_cached_against_the_file(self):
    path = os.path.join(self.cache_dir, emnist.FILENAME)
    cached = [name for name in os.listdir(self.cache_dir) if name.endswith('.mode_counts.json')]
    self.assertLen(cached, 2)  # all_train and all_test.
    calls = []
    mode_fn = lambda serialized: (calls.append(1), tf.zeros_like(serialized, tf.int64))[1]
    counts = tff_files.mode_counts(path, 'all_train', mode_fn, 2, cache_key='digit_vs_character')
    self.assertEqual(counts['w_digits'], [4, 0])
    self.assertEmpty(calls)  # Read from the cache, no scan.


  def test_client_reads_use_the_client_index(self):
    # TFF's SqlClientData query for one client's dataset, as it runs on the worker.
    query = ("EXPLAIN QUERY PLAN SELECT serialized_example_proto FROM examples WHERE client_id = 'w_both' and "
             "split_name ='all_train'")
    with contextlib.closing(sqlite3.connect(os.path.join(self.cache_dir, emnist.FILENAME))) as connection:
      plan = ' '.join(row[-1] for row in connection.execute(query).fetchall())
    self.assertIn(f'USING INDEX {tff_files.CLIENT_INDEX}', plan)


class ClientIndexTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    self.path = os.path.join(self.create_tempdir().full_path, 'data.sqlite')
    fake_tff_files.write_sqlite(self.path, {'train': {'a': fake_tff_files.emnist_elements(np.random.default_rng(0),
                                                                                          [1, 2])}})

  def _indexes(self):
    with contextlib.closing(sqlite3.connect(self.path)) as connection:
      return [row[1] for row in connection.execute("PRAGMA index_list('examples')").fetchall()]

  def test_an_index_by_client_the_file_has_is_kept(self):
    with contextlib.closing(sqlite3.connect(self.path)) as connection:
      connection.execute('CREATE INDEX theirs ON examples (client_id)')
    self.assertTrue(tff_files.index_clients(self.path))
    self.assertEqual(self._indexes(), ['theirs'])

  def test_an_index_not_by_client_gets_ours_beside_it(self):
    with contextlib.closing(sqlite3.connect(self.path)) as connection:
      connection.execute('CREATE INDEX by_split ON examples (split_name, client_id)')
    self.assertTrue(tff_files.index_clients(self.path))
    self.assertCountEqual(self._indexes(), ['by_split', tff_files.CLIENT_INDEX])

  def test_every_tff_database_of_a_directory_is_indexed(self):
    directory = os.path.dirname(self.path)
    with contextlib.closing(sqlite3.connect(os.path.join(directory, 'other.sqlite'))) as connection:
      connection.execute('CREATE TABLE notes (client_id TEXT)')
    with open(os.path.join(directory, 'notes.txt'), 'w') as f:
      f.write('not a database')
    self.assertEmpty(tff_files.index_databases(directory))
    self.assertEqual(self._indexes(), [tff_files.CLIENT_INDEX])
    with contextlib.closing(sqlite3.connect(os.path.join(directory, 'other.sqlite'))) as connection:
      self.assertEmpty(connection.execute("SELECT name FROM sqlite_master WHERE type = 'index'").fetchall())

  def test_a_file_it_cannot_write_is_read_unindexed_with_a_warning(self):
    with mock.patch.object(tff_files.os, 'access', return_value=False), self.assertLogs(level='WARNING') as logs:
      self.assertFalse(tff_files.index_clients(self.path))
    self.assertLen(logs.output, 1)
    self.assertIn('cannot be written', logs.output[0])
    self.assertEmpty(self._indexes())


class CifarTaskTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    self.cache_dir = self.create_tempdir().full_path
    rng = np.random.default_rng(1)
    fake_tff_files.write_cifar10(os.path.join(self.cache_dir, cifar.CIFAR10_DIRNAME), rng, train_per_batch=50,
                                 test_size=12)
    fake_tff_files.write_sqlite(os.path.join(self.cache_dir, cifar.CIFAR100_FILENAME), {
        'train': {str(i): fake_tff_files.cifar100_elements(rng, rng.integers(0, 100, 3 + i)) for i in range(3)},
        'test': {str(i): fake_tff_files.cifar100_elements(rng, rng.integers(0, 100, 4)) for i in range(2)}})

  def test_populations_labels_and_preprocessing(self):
    task = cifar.create_task(self.cache_dir, seed=3)
    self.assertEqual(task.population_summary(), {
        'day': {'clients': 2, 'train_examples': 200, 'test_examples': 12},  # 250 images: 2 clients of 100.
        'night': {'clients': 3, 'train_examples': 12, 'test_examples': 8}})
    day = _labels(task, 0, 'cifar10_0000')
    self.assertLen(day, 100)
    self.assertTrue(np.all((day >= 100) & (day < 110)))
    self.assertTrue(np.all(_labels(task, 1, '2') < 100))
    self.assertTrue(np.all(_test_labels(task, 0) >= 100))
    batch = next(iter(task.test_dataset(1, 4)))
    self.assertEqual(batch['x'].shape, (4, 24, 24, 3))
    self.assertAllClose(tf.reduce_mean(batch['x'], axis=[1, 2, 3]), np.zeros(4), atol=1e-4)  # Standardized.
    self.assertAllClose(tf.math.reduce_std(batch['x'], axis=[1, 2, 3]), np.ones(4), atol=1e-3)

  def test_night_client_datasets_are_tffs_loader_s(self):
    task = cifar.create_task(self.cache_dir, seed=3)
    train, _ = tff.simulation.datasets.cifar100.load_data(cache_dir=self.cache_dir)
    _assert_same_clients(self, task.train_data[1], train, task.client_sizes[1])

  def test_client_split_is_seeded_and_without_replacement(self):
    labels = np.random.default_rng(0).integers(0, 10, 1000)
    first = partition.dirichlet_partition(labels, 100, 1.0, seed=5)
    self.assertLen(first, 10)
    self.assertEqual(len(np.unique(np.concatenate(first))), 1000)  # Every image used exactly once.
    second = partition.dirichlet_partition(labels, 100, 1.0, seed=5)
    other = partition.dirichlet_partition(labels, 100, 1.0, seed=6)
    self.assertAllEqual(np.concatenate(first), np.concatenate(second))
    self.assertNotAllEqual(np.concatenate(first), np.concatenate(other))
    # Dirichlet(1) mixes are skewed: a typical client's most frequent class is far above a tenth.
    self.assertGreater(np.median([np.bincount(labels[c]).max() for c in first]), 25)


class StackoverflowTaskTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    self.cache_dir = self.create_tempdir().full_path
    os.makedirs(os.path.join(self.cache_dir, 'datasets'))
    words = ['the', 'a', 'to'] + [f'w{i}' for i in range(stackoverflow.VOCAB_SIZE)]
    with open(os.path.join(self.cache_dir, stackoverflow.WORD_COUNT_FILE), 'w') as f:
      f.writelines(f'{word} {1000000 - i}\n' for i, word in enumerate(words))
    q, a = 'question', 'answer'
    fake_tff_files.write_sqlite(os.path.join(self.cache_dir, stackoverflow.FILENAME), {
        'train': {'u1': fake_tff_files.stackoverflow_elements([('the a', q), ('to zzz', a), ('a a', q)]),
                  'u2': fake_tff_files.stackoverflow_elements([('the', a)]),
                  'u3': fake_tff_files.stackoverflow_elements([('w5 w6', q)])},
        'heldout': {'u9': fake_tff_files.stackoverflow_elements([('the', q)])},
        'test': {'u4': fake_tff_files.stackoverflow_elements([('the to', q), ('a', a), ('w1', a)])}})
    self.task = stackoverflow.create_task(self.cache_dir)

  def test_populations_are_counted_exactly(self):
    self.assertEqual(self.task.client_sizes, [{'u1': 2, 'u3': 1}, {'u1': 1, 'u2': 1}])
    self.assertEqual(self.task.test_sizes, [1, 2])

  def test_client_datasets_are_tffs_loader_s(self):
    train, _, _ = tff.simulation.datasets.stackoverflow.load_data(cache_dir=self.cache_dir)
    for mode in range(2):
      _assert_same_clients(self, self.task.train_data[mode], train.preprocess(stackoverflow._mode_filter(mode)),
                           self.task.client_sizes[mode])

  def test_batches_follow_the_vocabulary_and_masks(self):
    v = stackoverflow.VOCAB_SIZE
    raw = collections.OrderedDict(tokens=tf.constant(['the zzz to', ' '.join(['a'] * 25)]))
    batch = self.task.batch_fn(raw)
    bos, eos, oov = v + 2, v + 3, v + 1
    # 'the' = 1, 'a' = 2, 'to' = 3 (ids follow the word-count order, 0 is padding).
    self.assertAllEqual(batch['x'][0], [bos, 1, oov, 3, eos] + [0] * 15)
    self.assertAllEqual(batch['y'][0], [1, oov, 3, eos] + [0] * 16)
    self.assertAllEqual(batch['loss_mask'][0], [1, 1, 1, 1] + [0] * 16)
    self.assertAllEqual(batch['accuracy_mask'][0], [1, 0, 1, 0] + [0] * 16)  # No special tokens.
    self.assertAllEqual(batch['x'][1], [bos] + [2] * 19)  # Truncated to 20 words: no end token.
    self.assertAllEqual(batch['y'][1], [2] * 20)
    self.assertEqual(stackoverflow.EXTENDED_VOCAB_SIZE, v + 4)

  def test_modes_hold_questions_and_answers(self):
    texts = [raw['tokens'].numpy().tolist() for raw, _ in self.task.client_dataset(1, 'u1', _SPEC, (0, 0))]
    self.assertEqual(texts, [[b'to zzz']])


class MissingFilesTest(tf.test.TestCase):

  def test_one_line_names_the_file_and_the_flag(self):
    cache_dir = self.create_tempdir().full_path
    for create, filename in ((emnist.create_task, emnist.FILENAME), (cifar.create_task, cifar.CIFAR100_FILENAME),
                             (stackoverflow.create_task, stackoverflow.FILENAME)):
      with self.assertRaises(FileNotFoundError) as raised:
        create(cache_dir)
      message = str(raised.exception)
      self.assertIn(os.path.join(cache_dir, filename), message)
      self.assertIn('--cache_dir', message)
      self.assertNotIn('\n', message)


if __name__ == '__main__':
  tf.test.main()
