"""`fashion_mnist`: Fashion-MNIST's real images (Debian's `dataset-fashion-mnist`, `tasks.fashion_mnist_files`), one
base population of 10 classes, IID clients.

The ShiftEx paper (Bhope et al., 2025) runs its FashionMNIST benchmark on 200 parties with LeNet-5; this task deals
the training images into `NUM_CLIENTS` = 200 clients uniformly at random (300 each from Debian's 60,000; 240 from a
validation split's 48,000; an IID split seeded by `--seed`), so the heterogeneity is the scenario's to set (windowed label skew and covariate shifts,
`evolving_domains` rotations, `dirichlet_mixture` components). One base: the two-mode scenarios (`periodic`,
`mixture_drift`) need a task with two bases.

Preprocessing: x = image / 255 in [0, 1], [28, 28, 1]; y = label. Model: the EMNIST LeNet (`models.emnist_cnn`) with
10-way branches; the FedEvolve paper's methods use its CNN (`models.representation.conv_representation`). Default
hyperparameters: EMNIST's (Table 2 of the Diurnal-or-Nocturnal paper); a comparison takes its rates from a setup.
"""

import collections
import dataclasses
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
from utils import settings as settings_lib

NUM_CLIENTS = 200
NUM_CLASSES = fashion_mnist_files.NUM_CLASSES
DEFAULTS = dict(emnist.DEFAULTS)

NAME = 'fashion_mnist'
RAW_INPUT_SPACE = True
READS_FILES = True
UNSUPPORTED = {'periodic': task_lib.ONE_BASE, 'mixture_drift': task_lib.ONE_BASE}


@dataclasses.dataclass(frozen=True)
class Settings:
  """Where the files are (`--fashion_mnist_dir`)."""
  dir: Optional[str] = settings_lib.setting(
      None, 'Directory of Fashion-MNIST\'s four IDX files; default Debian\'s /usr/share/datasets/fashion-mnist '
      '(`apt-get install dataset-fashion-mnist`), see tasks/fashion_mnist_files.py.')

  def validate(self) -> None:
    pass  # A directory is checked when its files are read, in one line naming the file.


def batch_fn(batch: collections.OrderedDict) -> collections.OrderedDict:
  return collections.OrderedDict(x=tf.cast(batch['image'], tf.float32) / 255.0, y=tf.cast(batch['label'], tf.int32))


def _elements(images: np.ndarray, labels: np.ndarray) -> collections.OrderedDict:
  return collections.OrderedDict(image=images[..., None], label=labels)


def create_task(fashion_mnist_dir, seed: int = 0) -> task_lib.Task:
  """The task from the IDX files in `fashion_mnist_dir` (None: Debian's); `seed` draws the client split."""
  splits = fashion_mnist_files.load(fashion_mnist_dir)
  (images, labels), (test_images, test_labels) = splits['train'], splits['test']
  clients = {f'fashion_{i:04d}': _elements(images[idx], labels[idx])
             for i, idx in enumerate(partition.iid_partition(len(labels), len(labels) // NUM_CLIENTS, seed))}
  return task_lib.Task(
      name=NAME, train_data=[tff.simulation.datasets.TestClientData(clients)],
      client_sizes=[{client_id: len(data['label']) for client_id, data in clients.items()}],
      test_data=[tf.data.Dataset.from_tensor_slices(_elements(test_images, test_labels))],
      test_sizes=[len(test_labels)], batch_fn=batch_fn,
      model_fn=lambda num_branches: emnist_cnn.create_model(num_branches, NUM_CLASSES), num_classes=NUM_CLASSES,
      mode_names=('fashion',), input_range=(0.0, 1.0), raw_label_key='label',
      representation=representation.conv_representation((28, 28, 1), NUM_CLASSES))


def create(settings: Settings, files: task_lib.DataFiles, seed: int) -> task_lib.Task:
  """The task for `--task=fashion_mnist` (the contract: `tasks.task`)."""
  del files  # Its files are Debian's, or in `settings.dir`.
  return create_task(settings.dir, seed)
