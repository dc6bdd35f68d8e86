"""`emnist_fashion`: EMNIST digits, EMNIST characters and Fashion-MNIST, three bases (pFedEM's K = 3
extension).

The pFedEM paper (Chen et al.) extends its EMNIST digits/letters mixture with Fashion-MNIST as a third base
distribution (its Figure 3b, `mixture_drift` with K = 3). Bases 0 and 1 are exactly the `emnist` task's (TFF's
EMNIST-62 from `--cache_dir`); base 2 is the real Fashion-MNIST from Debian's `dataset-fashion-mnist`
(`tasks.fashion_mnist_files`, at Debian's path), its 60,000 training images dealt into clients of 100 uniformly
at random (seeded by `--seed`), its labels moved to 62-71 so
the three bases keep distinct classes (the paper does not say whether they share outputs; distinct labels make a
client's base visible in its labels, as digits and letters already are). Fashion-MNIST examples take EMNIST's raw
structure ({'pixels': [28, 28] float32 in [0, 1], 'label': int32}), so clients mixing bases concatenate their
parts. Model: the EMNIST LeNet with 72-way branches. Default hyperparameters: EMNIST's.
"""

import collections
from typing import Optional

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from models import emnist_cnn
from tasks import emnist
from tasks import fashion_mnist_files
from tasks import partition
from tasks import task as task_lib
from utils import settings as settings_lib

FASHION_LABEL_OFFSET = emnist_cnn.NUM_CLASSES
NUM_CLASSES = FASHION_LABEL_OFFSET + 10
CLIENT_SIZE = 100
DEFAULTS = dict(emnist.DEFAULTS)

NAME = 'emnist_fashion'
RAW_INPUT_SPACE = True
READS_FILES = True
UNSUPPORTED = {'periodic': 'it has three bases; the day/night shift has two'}
Settings = settings_lib.NoSettings


def _emnist_elements(images: np.ndarray, labels: np.ndarray) -> collections.OrderedDict:
  """Fashion-MNIST images [N, 28, 28] uint8 as EMNIST elements, labels moved to 62-71."""
  return collections.OrderedDict(label=(labels + FASHION_LABEL_OFFSET).astype(np.int32),
                                 pixels=images.astype(np.float32) / 255.0)


def create_task(cache_dir: Optional[str], fashion_mnist_dir: Optional[str], seed: int = 0) -> task_lib.Task:
  base = emnist.create_task(cache_dir, seed)
  splits = fashion_mnist_files.load(fashion_mnist_dir)
  (images, labels), (test_images, test_labels) = splits['train'], splits['test']
  clients = {f'fashion_{i:04d}': _emnist_elements(images[idx], labels[idx])
             for i, idx in enumerate(partition.iid_partition(len(labels), CLIENT_SIZE, seed))}
  return task_lib.Task(
      name='emnist_fashion',
      train_data=[*base.train_data, tff.simulation.datasets.TestClientData(clients)],
      client_sizes=[*base.client_sizes, {client_id: CLIENT_SIZE for client_id in clients}],
      test_data=[*base.test_data, tf.data.Dataset.from_tensor_slices(_emnist_elements(test_images, test_labels))],
      test_sizes=[*base.test_sizes, len(test_labels)], batch_fn=emnist.batch_fn,
      model_fn=lambda num_branches: emnist_cnn.create_model(num_branches, NUM_CLASSES), num_classes=NUM_CLASSES,
      mode_names=('day', 'night', 'fashion'), input_range=(0.0, 1.0), raw_label_key='label')


def create(settings: Settings, files: task_lib.DataFiles, seed: int) -> task_lib.Task:
  """The task for `--task=emnist_fashion` (the contract: `tasks.task`)."""
  del settings  # It has none.
  return create_task(files.cache_dir, None, seed)
