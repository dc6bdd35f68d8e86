"""Writes small dataset files in the exact layouts the suite reads offline, for tests.

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
