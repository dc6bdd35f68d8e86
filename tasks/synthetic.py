"""`synthetic`: a two-mode federated classification task generated in-process from a seed (no download).

Built to show, at a small scale, the mechanisms the paper shows on EMNIST (digits vs characters):

- Shared structure. Every example is rendered from a latent code z by one fixed random two-layer network
  R(z) = tanh(z A_1) A_2 (latent 16-d, input 64-d), so a feature extractor that learns to invert R helps both modes.
- Label subsets. Day clients hold classes 0-9, night clients classes 10-19 (20-way output).
- Confusable classes. Night class 10 + j has prototype rho * mu_j + sqrt(1 - rho^2) * nu_j, close to day class j
  (rho = `night_prototype_correlation` = 0.95), as 0/O or 1/l are in EMNIST.
- Different input distributions. Each mode adds its own small style offset s_m to every input, plus a per-client
  jitter c_i.
- Mode evidence that grows with the number of examples. With the defaults, a network trained centrally on all data
  tells the mode of a single example 98.4% of the time and reaches 96.4% test accuracy, against 97.6% for the
  same network told the mode; pooled over 16 examples the mode is always identified. The learned features carry
  the mode clearly enough for FedTEM's feature-space GMM to find it: with `style_scale` 0.05 (a single example's
  mode right 80% of the time, single-model accuracy 80%) the GMM did not lock onto the modes in 96-128 rounds, with
  0.1 neither; with 0.15 and 0.2 it did (training routing accuracy 1.0 after about 40 rounds).
- Non-IID clients of unequal sizes. A client's labels follow Dirichlet(`label_concentration`) over its mode's
  classes; its size is log-normal (median `median_client_size`, clipped to [10, 400]).

  x = R(mu_y + noise_scale * e) + s_m + c_i + input_noise * e',   e ~ N(0, I_16), e' ~ N(0, I_64).

The figures above were measured with a centralized Adam-trained copy of the model (8 epochs, ~36k examples).
Test data: `test_examples_per_mode` examples per mode, uniform over the mode's classes, from 50 fresh clients.
The model is an MLP extractor (64 -> 64 -> 32, ReLU) with 20-way linear branches; the features are 32-d.
Default hyperparameters (`DEFAULTS`) are chosen for this task, not taken from Table 2.
"""

import collections
import dataclasses
import functools
from typing import Optional

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from models import multi_branch
from tasks import task as task_lib
from utils import settings as settings_lib

CLASSES_PER_MODE = 10
NUM_CLASSES = 2 * CLASSES_PER_MODE
LATENT_DIM = 16
INPUT_DIM = 64
FEATURE_DIM = 32

DEFAULTS = {
    'server_learning_rate': 0.01,
    'server_adam_epsilon': 1e-4,
    'client_learning_rate': 0.05,
    'clients_per_round': 10,
    'client_batch_size': 20,
    'total_rounds': 256,
    'period': 32,
}

NAME = 'synthetic'
RAW_INPUT_SPACE = True
READS_FILES = False
UNSUPPORTED = {}


@dataclasses.dataclass(frozen=True)
class Settings:
  """The settings `--synthetic_<field>` change (the generator's others are fixed, `SyntheticConfig`)."""
  style_scale: Optional[float] = settings_lib.setting(
      None, 'scale of each mode\'s input offset s_m, how far apart its two bases are. Default: the generator\'s, 0.15.')

  def validate(self) -> None:
    if self.style_scale is not None and not self.style_scale > 0:
      raise ValueError(f'--synthetic_style_scale must be > 0; got {self.style_scale}.')


@dataclasses.dataclass(frozen=True)
class SyntheticConfig:
  """Generator parameters (see the module docstring)."""
  num_day_clients: int = 300
  num_night_clients: int = 360
  median_client_size: float = 60.0
  label_concentration: float = 1.0
  night_prototype_correlation: float = 0.95
  prototype_scale: float = 1.0
  noise_scale: float = 0.8
  style_scale: float = 0.15
  client_style_jitter: float = 0.1
  input_noise: float = 0.3
  test_examples_per_mode: int = 2000


def _render_fn(rng: np.random.Generator):
  first = rng.normal(size=(LATENT_DIM, 48)) / np.sqrt(LATENT_DIM)
  second = rng.normal(size=(48, INPUT_DIM)) / np.sqrt(48)
  return lambda z: np.tanh(z @ first) @ second


class _Generator:
  """Draws examples of either mode; all randomness comes from one seeded numpy Generator."""

  def __init__(self, config: SyntheticConfig, seed: int):
    self.config = config
    self.rng = np.random.default_rng(seed)
    self.render = _render_fn(self.rng)
    day = self.rng.normal(size=(CLASSES_PER_MODE, LATENT_DIM)) * config.prototype_scale
    fresh = self.rng.normal(size=(CLASSES_PER_MODE, LATENT_DIM)) * config.prototype_scale
    rho = config.night_prototype_correlation
    self.prototypes = np.concatenate([day, rho * day + np.sqrt(1.0 - rho**2) * fresh])
    self.styles = self.rng.normal(size=(2, INPUT_DIM)) * config.style_scale

  def examples(self, mode: int, labels: np.ndarray) -> collections.OrderedDict:
    c = self.config
    z = self.prototypes[labels] + c.noise_scale * self.rng.normal(size=(len(labels), LATENT_DIM))
    client_style = self.styles[mode] + c.client_style_jitter * self.rng.normal(size=INPUT_DIM)
    x = self.render(z) + client_style + c.input_noise * self.rng.normal(size=(len(labels), INPUT_DIM))
    return collections.OrderedDict(x=x.astype(np.float32), y=labels.astype(np.int32))

  def client(self, mode: int) -> collections.OrderedDict:
    c = self.config
    size = int(np.clip(np.exp(self.rng.normal(np.log(c.median_client_size), 0.6)), 10, 400))
    class_probabilities = self.rng.dirichlet([c.label_concentration] * CLASSES_PER_MODE)
    labels = self.rng.choice(CLASSES_PER_MODE, size=size, p=class_probabilities) + mode * CLASSES_PER_MODE
    return self.examples(mode, labels)

  def test_set(self, mode: int) -> collections.OrderedDict:
    n = self.config.test_examples_per_mode
    labels = np.arange(n) % CLASSES_PER_MODE + mode * CLASSES_PER_MODE
    chunks = [self.examples(mode, chunk) for chunk in np.array_split(labels, 50)]  # 50 fresh test clients.
    return collections.OrderedDict((key, np.concatenate([chunk[key] for chunk in chunks])) for key in ('x', 'y'))


def create_model(num_branches: int) -> tf.keras.Model:
  extractor = tf.keras.Sequential([
      tf.keras.Input(shape=(INPUT_DIM,)),
      tf.keras.layers.Dense(64, activation='relu'),
      tf.keras.layers.Dense(FEATURE_DIM, activation='relu'),
  ], name='extractor')
  return multi_branch.build_multi_branch_model(extractor, num_branches, NUM_CLASSES, name='synthetic')


@functools.lru_cache(maxsize=2)
def _populations(seed: int, config: SyntheticConfig) -> tuple[tuple[dict, collections.OrderedDict], ...]:
  """Per mode (day, night): ({client_id: OrderedDict(x, y)}, the test set), read-only numpy arrays. Kept for the
  process's next task of the same seed and config (a test process builds many runs' tasks)."""
  generator = _Generator(config, seed)
  populations = []
  for mode, (name, count) in enumerate((('day', config.num_day_clients), ('night', config.num_night_clients))):
    clients = {f'{name}_{i:04d}': generator.client(mode) for i in range(count)}
    populations.append((clients, generator.test_set(mode)))
  for array in (a for clients, test in populations for data in (*clients.values(), test) for a in data.values()):
    array.flags.writeable = False
  return tuple(populations)


def create_task(seed: int = 0, config: SyntheticConfig = SyntheticConfig()) -> task_lib.Task:
  """Generates the populations and test sets from `seed`."""
  train_data, client_sizes, test_data, test_sizes = [], [], [], []
  for clients, test in _populations(seed, config):
    train_data.append(tff.simulation.datasets.TestClientData(clients))
    client_sizes.append({client_id: len(data['y']) for client_id, data in clients.items()})
    test_data.append(tf.data.Dataset.from_tensor_slices(test))
    test_sizes.append(len(test['y']))
  return task_lib.Task(
      name='synthetic', train_data=train_data, client_sizes=client_sizes, test_data=test_data,
      test_sizes=test_sizes, batch_fn=lambda batch: batch, model_fn=create_model, num_classes=NUM_CLASSES)


def create(settings: Settings, files: task_lib.DataFiles, seed: int) -> task_lib.Task:
  """The task for `--task=synthetic` (the contract: `tasks.task`); generated, it reads no files."""
  del files  # Generated in-process.
  if settings.style_scale is None:
    return create_task(seed)
  return create_task(seed, dataclasses.replace(SyntheticConfig(), style_scale=settings.style_scale))
