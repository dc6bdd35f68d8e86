"""`digits`: real handwriting offline, scikit-learn's 8 x 8 digits, day as written and night mirrored (20 classes).

EMNIST cannot be downloaded here, and the paper's claims should also be checked on real handwriting, not only on
the `synthetic` generator. The one real handwriting bundled with an installed package is scikit-learn's digits
(`sklearn.datasets.load_digits`: 1,797 handwritten digits, 8 x 8 images of counts 0-16, the test part of UCI's
optdigits; no writer ids). This task builds from it a day/night task with EMNIST's structure (Section 4 of the
Diurnal-or-Nocturnal paper: digits by day, characters by night, disjoint labels, some classes confusable across
modes as 0/O and 1/l):

- the examples are split at random (seeded) into two halves, one per mode;
- day: the digits as written, labels 0-9; night: the other half mirrored left to right, labels 10-19 (digit j
  mirrored is class 10 + j). Most mirrored digits are new glyphs, but near-symmetric ones (0, 8, 1) look like their
  day class, so the mode of a single example is not always visible: measured with a centrally trained 64-32 MLP
  on a 70/30 split (scikit-learn, seed 0), 20-way accuracy 0.906 against 0.98 / 0.97 for one network per mode told
  the mode, and the mode read off the predicted class right for 95% of examples (wrong for 15% of 0s, 13% of 8s,
  7% of 1s, at most 5% for the others). Our choice; flipping upside down gives a similar task, a 90-degree
  rotation one whose mode every example shows (mode error 0);
- per mode, `test_fraction` (30%) of the examples are the test set, the rest dealt into clients of `client_size`
  (20) with Dirichlet(`label_concentration` = 1) class mixes (`tasks.partition.dirichlet_partition`): about 31
  clients per mode, non-IID as EMNIST's writers are.

`DigitsConfig(one_base=True)` puts every digit as written in one base population (labels 0-9, no night mode):
the `digits_written` task (`tasks.digits_written`).

Preprocessing: x = image / 16 in [0, 1], [8, 8, 1]; y = label. Model: a small CNN, conv 3x3 (16) - max-pool 2 -
conv 3x3 (32) - max-pool 2 - dense 64 (ReLU, the 64-d clustering features), and 20-way linear branches.
Default hyperparameters (`DEFAULTS`) are the synthetic task's, with batches of 10 (two local steps per client);
they are ours, not Table 2's.
"""

import collections
import dataclasses
import functools

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff
from sklearn import datasets

from models import multi_branch
from tasks import partition
from tasks import synthetic
from tasks import task as task_lib
from utils import settings as settings_lib

CLASSES_PER_MODE = 10
NUM_CLASSES = 2 * CLASSES_PER_MODE
IMAGE_SIZE = 8
MAX_INTENSITY = 16.0
FEATURE_DIM = 64

DEFAULTS = dict(synthetic.DEFAULTS, client_batch_size=10)

NAME = 'digits'
RAW_INPUT_SPACE = True
READS_FILES = False
UNSUPPORTED = {}
Settings = settings_lib.NoSettings


@dataclasses.dataclass(frozen=True)
class DigitsConfig:
  client_size: int = 20
  label_concentration: float = 1.0  # Dirichlet concentration of each client's class mix; inf: IID clients.
  test_fraction: float = 0.3
  one_base: bool = False  # Every digit as written in one base (labels 0-9), instead of day and mirrored night.


def mode_examples(images: np.ndarray, labels: np.ndarray, mode: int) -> collections.OrderedDict:
  """Raw elements of `mode` from images [N, 8, 8] (counts 0-16) and digit labels [N]: night mirrors left-right."""
  pixels = images[:, :, ::-1] if mode == 1 else images
  return collections.OrderedDict(pixels=pixels.astype(np.float32),
                                 label=(labels + mode * CLASSES_PER_MODE).astype(np.int32))


def batch_fn(batch: collections.OrderedDict) -> collections.OrderedDict:
  return collections.OrderedDict(x=tf.expand_dims(batch['pixels'], -1) / MAX_INTENSITY, y=batch['label'])


def create_model(num_branches: int, num_classes: int = NUM_CLASSES) -> tf.keras.Model:
  extractor = tf.keras.Sequential([
      tf.keras.Input(shape=(IMAGE_SIZE, IMAGE_SIZE, 1)),
      tf.keras.layers.Conv2D(16, 3, padding='same', activation='relu'),
      tf.keras.layers.MaxPooling2D(2),
      tf.keras.layers.Conv2D(32, 3, padding='same', activation='relu'),
      tf.keras.layers.MaxPooling2D(2),
      tf.keras.layers.Flatten(),
      tf.keras.layers.Dense(FEATURE_DIM, activation='relu'),
  ], name='extractor')
  return multi_branch.build_multi_branch_model(extractor, num_branches, num_classes, name='digits_cnn')


def create_task(seed: int = 0, config: DigitsConfig = DigitsConfig()) -> task_lib.Task:
  """The task from scikit-learn's bundled digits; `seed` draws the mode halves, test sets and clients."""
  digits = datasets.load_digits()
  rng = np.random.default_rng([seed, 8])
  order = rng.permutation(len(digits.target))
  names = ('written',) if config.one_base else ('day', 'night')
  halves = np.array_split(order, len(names))
  train_data, client_sizes, test_data, test_sizes = [], [], [], []
  for mode, (name, indices) in enumerate(zip(names, halves)):
    num_test = int(round(config.test_fraction * len(indices)))
    test, train = indices[:num_test], indices[num_test:]
    examples = mode_examples(digits.images[train], digits.target[train], mode)
    clients = {f'{name}_{i:04d}': collections.OrderedDict((key, value[idx]) for key, value in examples.items())
               for i, idx in enumerate(partition.dirichlet_partition(
                   examples['label'], config.client_size, config.label_concentration, seed + mode))}
    train_data.append(tff.simulation.datasets.TestClientData(clients))
    client_sizes.append({client_id: config.client_size for client_id in clients})
    test_data.append(tf.data.Dataset.from_tensor_slices(mode_examples(digits.images[test], digits.target[test],
                                                                      mode)))
    test_sizes.append(len(test))
  num_classes = CLASSES_PER_MODE * len(names)
  return task_lib.Task(name='digits_written' if config.one_base else 'digits', train_data=train_data,
                       client_sizes=client_sizes, test_data=test_data, test_sizes=test_sizes, batch_fn=batch_fn,
                       model_fn=functools.partial(create_model, num_classes=num_classes), num_classes=num_classes,
                       input_range=(0.0, 1.0), raw_label_key='label', mode_names=names)


def create(settings: Settings, files: task_lib.DataFiles, seed: int) -> task_lib.Task:
  """The task for `--task=digits` (the contract: `tasks.task`)."""
  del settings  # It has none.
  return create_task(seed)
