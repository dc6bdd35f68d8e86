"""Writes dataset files in the exact layouts the suite reads offline, for tests and benchmarks.

TFF's SQLite cache schema (`tff.simulation.datasets.SqlClientData`, written as `sql_client_data_utils` does):
`examples(split_name TEXT, client_id TEXT, serialized_example_proto BLOB)` and
`client_metadata(client_id TEXT, split_name TEXT, num_examples INTEGER)`, with serialized `tf.train.Example`s that
carry the real feature names, types and shapes of each TFF loader's parser.
"""

import os
import pickle
import sqlite3

import numpy as np
import tensorflow as tf


def _feature(value):
  value = np.asarray(value)
  if value.dtype.kind == 'f':
    return tf.train.Feature(float_list=tf.train.FloatList(value=value.ravel().tolist()))
  if value.dtype.kind in 'iu':
    return tf.train.Feature(int64_list=tf.train.Int64List(value=value.ravel().tolist()))
  return tf.train.Feature(bytes_list=tf.train.BytesList(value=[value.item().encode()]))


def _serialize(element: dict) -> bytes:
  return tf.train.Example(features=tf.train.Features(
      feature={name: _feature(value) for name, value in element.items()})).SerializeToString()


def write_sqlite(path: str, splits: dict) -> None:
  """`splits`: split name -> {client id -> list of elements (feature name -> value)}."""
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with sqlite3.connect(path) as connection:
    connection.execute('CREATE TABLE examples (split_name TEXT NOT NULL, client_id TEXT NOT NULL, '
                       'serialized_example_proto BLOB NOT NULL);')
    connection.execute('CREATE TABLE client_metadata (client_id TEXT NOT NULL, split_name TEXT NOT NULL, '
                       'num_examples INTEGER NOT NULL);')
    for split_name, clients in splits.items():
      for client_id, elements in clients.items():
        connection.executemany('INSERT INTO examples VALUES (?, ?, ?);',
                               [(split_name, client_id, _serialize(e)) for e in elements])
        connection.execute('INSERT INTO client_metadata VALUES (?, ?, ?);', (client_id, split_name, len(elements)))


def emnist_elements(rng: np.random.Generator, labels) -> list:
  return [{'label': np.int64(label), 'pixels': rng.uniform(size=(28, 28)).astype(np.float32)} for label in labels]


def cifar100_elements(rng: np.random.Generator, labels) -> list:
  return [{'coarse_label': np.int64(label // 5), 'image': rng.integers(0, 256, (32, 32, 3)).astype(np.int64),
           'label': np.int64(label)} for label in labels]


def stackoverflow_elements(texts_and_types) -> list:
  return [{'creation_date': np.array('2010-01-01 00:00:00', object), 'score': np.int64(1),
           'tags': np.array('python', object), 'title': np.array('a title', object),
           'tokens': np.array(text, object), 'type': np.array(kind, object)} for text, kind in texts_and_types]


def write_cifar10(directory: str, rng: np.random.Generator, train_per_batch: int, test_size: int) -> None:
  """The python version of CIFAR-10 (`cifar-10-batches-py/`: data_batch_1..5, test_batch; pickled dicts with
  b'data' [N, 3072] uint8 in channel-major order and b'labels')."""
  os.makedirs(directory, exist_ok=True)
  for name, size in [(f'data_batch_{i}', train_per_batch) for i in range(1, 6)] + [('test_batch', test_size)]:
    batch = {b'data': rng.integers(0, 256, (size, 3072)).astype(np.uint8),
             b'labels': rng.integers(0, 10, size).tolist()}
    with open(os.path.join(directory, name), 'wb') as f:
      pickle.dump(batch, f)


def write_small_cache(directory: str, seed: int = 0) -> dict:
  """Small EMNIST, CIFAR-10/100 and Stack Overflow files in `directory`; returns each task's expected
  `population_summary()` computed from what was written."""
  rng = np.random.default_rng(seed)
  emnist_train = {f'w{i}': rng.integers(0, 62, 30) for i in range(6)}
  emnist_train['w_no_digits'] = rng.integers(10, 62, 12)
  emnist_test = {f'w{i}': rng.integers(0, 62, 20) for i in range(3)}
  write_sqlite(os.path.join(directory, 'emnist_all.sqlite'), {
      'all_train': {w: emnist_elements(rng, labels) for w, labels in emnist_train.items()},
      'all_test': {w: emnist_elements(rng, labels) for w, labels in emnist_test.items()}})
  write_cifar10(os.path.join(directory, 'cifar-10-batches-py'), rng, train_per_batch=40, test_size=20)
  write_sqlite(os.path.join(directory, 'cifar100.sqlite'), {
      'train': {str(i): cifar100_elements(rng, rng.integers(0, 100, 20)) for i in range(3)},
      'test': {str(i): cifar100_elements(rng, rng.integers(0, 100, 10)) for i in range(2)}})
  os.makedirs(os.path.join(directory, 'datasets'), exist_ok=True)
  with open(os.path.join(directory, 'datasets', 'stackoverflow.word_count'), 'w') as f:
    f.writelines(f'w{i} {100000 - i}\n' for i in range(10000))
  so_train = {f'u{i}': [(' '.join(f'w{j}' for j in rng.integers(0, 11000, rng.integers(3, 30))),
                         str(rng.choice(['question', 'answer']))) for _ in range(12)] for i in range(5)}
  so_test = {f't{i}': [('w1 w2 w3', kind) for kind in ('question', 'answer', 'answer')] for i in range(3)}
  write_sqlite(os.path.join(directory, 'stackoverflow.sqlite'), {
      'train': {u: stackoverflow_elements(texts) for u, texts in so_train.items()},
      'heldout': {'h0': stackoverflow_elements([('w1', 'question')])},
      'test': {u: stackoverflow_elements(texts) for u, texts in so_test.items()}})

  def summary(train, test, mode_of):
    result = {}
    for mode, name in enumerate(('day', 'night')):
      sizes = [sum(mode_of(x) == mode for x in values) for values in train.values()]
      result[name] = {'clients': sum(s > 0 for s in sizes), 'train_examples': int(sum(sizes)),
                      'test_examples': int(sum(sum(mode_of(x) == mode for x in values) for values in test.values()))}
    return result

  so_mode = lambda text_and_kind: 0 if text_and_kind[1] == 'question' else 1
  return {
      'emnist': summary(emnist_train, emnist_test, lambda label: int(label >= 10)),
      'cifar': {'day': {'clients': 2, 'train_examples': 200, 'test_examples': 20},
                'night': {'clients': 3, 'train_examples': 60, 'test_examples': 20}},
      'stackoverflow': summary(so_train, so_test, so_mode),
  }
