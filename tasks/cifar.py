"""CIFAR with a CIFAR-10 (day) mode and a CIFAR-100 (night) mode, 110 classes (Section 4, Table 1).

Data, read offline from `--cache_dir`:
- night: TFF's federated CIFAR-100 (`tff.simulation.datasets.cifar100.load_data(cache_dir)`, the file
  `<cache_dir>/cifar100.sqlite`): 500 training clients of 100 images, fine labels 0-99 kept as they are; test =
  its `test` split (10,000 images).
- day: CIFAR-10 in the layout of its "python version" archive and of Keras' `cifar10.load_data` cache:
  `<cache_dir>/cifar-10-batches-py/` with `data_batch_1` ... `data_batch_5` and `test_batch` (pickled dicts with
  b'data' [N, 3072] uint8, channel-major, and b'labels'). Labels become 100-109 (the public code's mapping), so
  the 110 classes are CIFAR-100's 0-99 then CIFAR-10's. The 50,000 training images are split into clients of
  100 (500 clients on the full data): each client draws its class mix from Dirichlet(alpha = 1) over the ten
  classes and then its images by that mix, without replacement; a class that runs out is dropped from the
  remaining mixes (as the public code's `load_cifar10_federated`, but seeded by `--seed`). Test = `test_batch`
  (10,000 images). Alternatively (`--tfds_data_dir`), CIFAR-10 comes from tensorflow-datasets' prepared `cifar10`
  (`tasks.tfds_files`), the same images and labels in another layout.
- preprocessing (the public code's): cast to float, center crop to 24x24 (`resize_with_crop_or_pad`), per-image
  standardization; no augmentation.
- model: ResNet-18 with GroupNorm (`models.resnet_gn`), 512-d feature, 110-way branches.
"""

import collections
import os
import pickle
from typing import Optional

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from models import resnet_gn
from tasks import partition
from tasks import task as task_lib
from tasks import tfds_files
from tasks import tff_files
from utils import settings as settings_lib

CIFAR100_FILENAME = 'cifar100.sqlite'
CIFAR10_DIRNAME = 'cifar-10-batches-py'
CIFAR10_LABEL_OFFSET = 100
CLIENT_SIZE = 100
DIRICHLET_ALPHA = 1.0

# Table 2; T = 256 as for most of the paper's results (Section 4).
DEFAULTS = {
    'server_learning_rate': 1.0,
    'server_adam_epsilon': 0.1,
    'client_learning_rate': 10**-1.5,
    'clients_per_round': 10,
    'client_batch_size': 20,
    'total_rounds': 8196,
    'period': 256,
}

NAME = 'cifar'
RAW_INPUT_SPACE = True
READS_FILES = True
UNSUPPORTED = {}
Settings = settings_lib.NoSettings


def read_cifar10(directory: str) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
  """((train images [N, 32, 32, 3] uint8, labels [N] int64), (test images, labels)) from the python layout."""

  def read(name):
    with open(os.path.join(directory, name), 'rb') as f:
      batch = pickle.load(f, encoding='bytes')
    images = np.asarray(batch[b'data'], np.uint8).reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
    return images, np.asarray(batch[b'labels'], np.int64)

  parts = [read(f'data_batch_{i}') for i in range(1, 6)]
  train = (np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]))
  return train, read('test_batch')


def _cifar10_element(images: np.ndarray, labels: np.ndarray) -> collections.OrderedDict:
  """CIFAR-10 examples in the structure of TFF's CIFAR-100 elements (coarse_label -1: none)."""
  return collections.OrderedDict(coarse_label=np.full(len(labels), -1, np.int64), image=images,
                                 label=labels + CIFAR10_LABEL_OFFSET)


def batch_fn(batch: collections.OrderedDict) -> collections.OrderedDict:
  images = tf.image.resize_with_crop_or_pad(tf.cast(batch['image'], tf.float32), *resnet_gn.INPUT_SHAPE[:2])
  return collections.OrderedDict(x=tf.image.per_image_standardization(images),
                                 y=tf.cast(batch['label'], tf.int32))


def create_task(cache_dir: str, seed: int = 0, tfds_data_dir: Optional[str] = None) -> task_lib.Task:
  """The CIFAR task; `seed` draws the CIFAR-10 client split. With `tfds_data_dir`, CIFAR-10 is read from
  tensorflow-datasets' prepared `cifar10` there instead of `<cache_dir>/cifar-10-batches-py`."""
  cache_dir = cache_dir or tff_files.default_cache_dir()
  cifar100_path = tff_files.require_database(cache_dir, CIFAR100_FILENAME, 'cifar')
  if tfds_data_dir:
    splits = tfds_files.load('cifar10', tfds_data_dir, 'cifar')
    (train_images, train_labels), (test_images, test_labels) = splits['train'], splits['test']
  else:
    (train_images, train_labels), (test_images, test_labels) = read_cifar10(
        tff_files.require(cache_dir, CIFAR10_DIRNAME, 'cifar'))
  day_clients = {f'cifar10_{i:04d}': _cifar10_element(train_images[idx], train_labels[idx]) for i, idx in
                 enumerate(partition.dirichlet_partition(train_labels, CLIENT_SIZE, DIRICHLET_ALPHA, seed))}
  night_train, night_test = tff.simulation.datasets.cifar100.load_data(cache_dir=cache_dir)
  night_sizes = tff_files.client_counts(cifar100_path, 'train')
  return task_lib.Task(
      name='cifar',
      train_data=[tff.simulation.datasets.TestClientData(day_clients), tff_files.traced_client_data(night_train)],
      client_sizes=[{client: len(data['label']) for client, data in day_clients.items()}, night_sizes],
      test_data=[tf.data.Dataset.from_tensor_slices(_cifar10_element(test_images, test_labels)),
                 night_test.create_tf_dataset_from_all_clients().cache()],
      test_sizes=[len(test_labels), sum(tff_files.client_counts(cifar100_path, 'test').values())],
      batch_fn=batch_fn, model_fn=resnet_gn.create_model, num_classes=resnet_gn.NUM_CLASSES, raw_label_key='label')


def create(settings: Settings, files: task_lib.DataFiles, seed: int) -> task_lib.Task:
  """The task for `--task=cifar` (the contract: `tasks.task`)."""
  del settings  # It has none.
  return create_task(files.cache_dir, seed, files.tfds_data_dir)
