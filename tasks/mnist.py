"""`mnist`: MNIST digits (day) and Fashion-MNIST (night), 20 classes, read with tensorflow-datasets offline.

The papers use MNIST for rotated MNIST (the FedEvolve paper's RMNIST, the `evolving_domains` scenario on base 0) and for
the novelty experiment of the FedGMM paper (the `dirichlet_mixture` scenario with `transformed` components on base 0),
and Fashion-MNIST as pFedEM's third distribution (Chen et al.). This task gives both as its two base populations, the
analogue of EMNIST's digits and characters (named `day` and `night` like every task's two bases), so every
scenario runs on it.

Data: `tensorflow-datasets`' prepared `mnist` in `--tfds_data_dir` (`tasks.tfds_files`) and the real Fashion-MNIST
from Debian's `dataset-fashion-mnist` (`tasks.fashion_mnist_files`, at Debian's path); each 60,000 training and
10,000 test images of 28 x 28. Neither has a natural federation: each base's training
images are dealt into clients of `CLIENT_SIZE` = 100 uniformly at random (an IID split seeded by `--seed`; 600
clients per base), so the heterogeneity is the scenario's to set (`evolving_domains --dirichlet_alpha`, the
`dirichlet_mixture` weights, windowed label skew). Labels: MNIST 0-9, Fashion-MNIST 10-19.

Preprocessing: x = image / 255 in [0, 1], y = label. Model: the EMNIST LeNet (`models.emnist_cnn`) with 20-way
branches; the FedEvolve paper's methods use its CNN (`models.representation.conv_representation`). Default
hyperparameters: EMNIST's (Table 2 of the Diurnal-or-Nocturnal paper); none of the papers gives MNIST's.
"""

import collections
from typing import Optional

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from models import emnist_cnn
from models import representation
from tasks import emnist
from tasks import fashion_mnist_files
from tasks import partition
from tasks import task as task_lib
from tasks import tfds_files
from utils import settings as settings_lib

BASES = ('mnist', 'fashion_mnist')
CLASSES_PER_BASE = 10
NUM_CLASSES = len(BASES) * CLASSES_PER_BASE
CLIENT_SIZE = 100
DEFAULTS = dict(emnist.DEFAULTS)

NAME = 'mnist'
RAW_INPUT_SPACE = True
READS_FILES = True
UNSUPPORTED = {}
Settings = settings_lib.NoSettings


def batch_fn(batch: collections.OrderedDict) -> collections.OrderedDict:
  return collections.OrderedDict(x=tf.cast(batch['image'], tf.float32) / 255.0, y=tf.cast(batch['label'], tf.int32))


def _elements(images: np.ndarray, labels: np.ndarray, offset: int) -> collections.OrderedDict:
  return collections.OrderedDict(image=images, label=labels + offset)


def _splits(name: str, tfds_data_dir: Optional[str], fashion_mnist_dir: Optional[str]) -> dict:
  """split -> (images [N, 28, 28, 1] uint8, labels [N]) of base `name`."""
  if name == 'mnist':
    return tfds_files.load(name, tfds_data_dir, 'mnist')
  return {split: (images[..., None], labels)
          for split, (images, labels) in fashion_mnist_files.load(fashion_mnist_dir).items()}


def create_task(tfds_data_dir: Optional[str], seed: int = 0, fashion_mnist_dir: Optional[str] = None
                ) -> task_lib.Task:
  """The task from MNIST prepared in `tfds_data_dir` and Fashion-MNIST's files in `fashion_mnist_dir` (None:
  Debian's); `seed` draws the client split."""
  train_data, client_sizes, test_data, test_sizes = [], [], [], []
  for base, name in enumerate(BASES):
    splits = _splits(name, tfds_data_dir, fashion_mnist_dir)
    (images, labels), (test_images, test_labels) = splits['train'], splits['test']
    offset = base * CLASSES_PER_BASE
    clients = {f'{name}_{i:04d}': _elements(images[idx], labels[idx], offset)
               for i, idx in enumerate(partition.iid_partition(len(labels), CLIENT_SIZE, seed + base))}
    train_data.append(tff.simulation.datasets.TestClientData(clients))
    client_sizes.append({client_id: len(data['label']) for client_id, data in clients.items()})
    test_data.append(tf.data.Dataset.from_tensor_slices(_elements(test_images, test_labels, offset)))
    test_sizes.append(len(test_labels))
  return task_lib.Task(
      name='mnist', train_data=train_data, client_sizes=client_sizes, test_data=test_data, test_sizes=test_sizes,
      batch_fn=batch_fn, model_fn=lambda num_branches: emnist_cnn.create_model(num_branches, NUM_CLASSES),
      num_classes=NUM_CLASSES, input_range=(0.0, 1.0), raw_label_key='label',
      representation=representation.conv_representation((28, 28, 1), NUM_CLASSES))


def create(settings: Settings, files: task_lib.DataFiles, seed: int) -> task_lib.Task:
  """The task for `--task=mnist` (the contract: `tasks.task`)."""
  del settings  # It has none.
  return create_task(files.tfds_data_dir, seed)
