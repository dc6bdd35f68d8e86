"""EMNIST with a digit (day) mode and a character (night) mode (Section 4, Table 1).

Data: TFF's EMNIST-62 (`tff.simulation.datasets.emnist.load_data(only_digits=False, cache_dir)`, the file
`<cache_dir>/emnist_all.sqlite`, splits `all_train` and `all_test`); elements {'pixels': [28, 28] float32 in
[0, 1], 'label': int32 in 0-61}.

- day: each writer's digit examples (labels 0-9); night: each writer's character examples (labels 10-61). A writer
  with both is a client of both modes (disjoint examples); a writer with none of a mode is not a client of it. On
  the full file this gives Table 1's 3,383 day clients (341,873 examples) and 3,400 night clients (329,712).
- test: the whole `all_test` split (77,483 examples), with its digit and character subsets as the per-mode test
  sets (held in memory after the first evaluation).
- model: the paper's two-conv LeNet (`models.emnist_cnn`), 128-d feature, 62-way branches; the FedEvolve paper's methods
  (FedEvolve, FedEvp) use its 4-block CNN and 128-64-C head (`models.representation.conv_representation`).
- preprocessing: x = pixels[..., None] (TFF's pixels are already in [0, 1]; no augmentation), y = label.
"""

import collections

import tensorflow as tf
import tensorflow_federated as tff

from models import emnist_cnn
from models import representation
from tasks import task as task_lib
from tasks import tff_files
from utils import settings as settings_lib

FILENAME = 'emnist_all.sqlite'
NUM_DIGITS = 10

# Table 2; T = 256 as for most of the paper's results (Section 4).
DEFAULTS = {
    'server_learning_rate': 10**-2.5,
    'server_adam_epsilon': 1e-4,
    'client_learning_rate': 10**-1.5,
    'clients_per_round': 10,
    'client_batch_size': 20,
    'total_rounds': 2049,
    'period': 256,
}

NAME = 'emnist'
RAW_INPUT_SPACE = True
READS_FILES = True
UNSUPPORTED = {}
Settings = settings_lib.NoSettings


def _label_mode(serialized: tf.Tensor) -> tf.Tensor:
  """0 for a digit, 1 for a character, from serialized examples [N]."""
  labels = tf.io.parse_example(serialized, {'label': tf.io.FixedLenFeature((), tf.int64)})['label']
  return tf.cast(labels >= NUM_DIGITS, tf.int64)


def _mode_filter(mode: int):
  if mode == 0:
    return lambda dataset: dataset.filter(lambda element: element['label'] < NUM_DIGITS)
  return lambda dataset: dataset.filter(lambda element: element['label'] >= NUM_DIGITS)


def batch_fn(batch: collections.OrderedDict) -> collections.OrderedDict:
  return collections.OrderedDict(x=tf.expand_dims(batch['pixels'], -1), y=batch['label'])


def create_task(cache_dir: str, seed: int = 0) -> task_lib.Task:
  """The EMNIST task from `<cache_dir>/emnist_all.sqlite` (`seed` is unused: the populations are the writers)."""
  del seed  # The populations are fixed by the file.
  path = tff_files.require_database(cache_dir, FILENAME, 'emnist')
  train, test = tff.simulation.datasets.emnist.load_data(only_digits=False, cache_dir=cache_dir or
                                                         tff_files.default_cache_dir())
  train_counts = tff_files.mode_counts(path, 'all_train', _label_mode, 2, cache_key='digit_vs_character')
  test_counts = tff_files.mode_counts(path, 'all_test', _label_mode, 2, cache_key='digit_vs_character')
  all_test = test.create_tf_dataset_from_all_clients()
  train_data, client_sizes, test_data, test_sizes = [], [], [], []
  for mode in range(2):
    train_data.append(tff_files.traced_client_data(train.preprocess(_mode_filter(mode))))
    client_sizes.append({client: counts[mode] for client, counts in train_counts.items() if counts[mode] > 0})
    test_data.append(_mode_filter(mode)(all_test).cache())
    test_sizes.append(sum(counts[mode] for counts in test_counts.values()))
  return task_lib.Task(name='emnist', train_data=train_data, client_sizes=client_sizes, test_data=test_data,
                       test_sizes=test_sizes, batch_fn=batch_fn, model_fn=emnist_cnn.create_model,
                       num_classes=emnist_cnn.NUM_CLASSES, input_range=(0.0, 1.0),
                       raw_label_key='label',
                       representation=representation.conv_representation((28, 28, 1), emnist_cnn.NUM_CLASSES))


def create(settings: Settings, files: task_lib.DataFiles, seed: int) -> task_lib.Task:
  """The task for `--task=emnist` (the contract: `tasks.task`)."""
  del settings  # It has none.
  return create_task(files.cache_dir, seed)
