"""`circle`: the FedEvolve paper's Circle data, embedded: domains of 2-D Gaussians along a half circle.

The seed: 30 domains, 30,000 points (about 1,000 per domain), one 2-D Gaussian per domain with the same variance,
means uniformly spaced on a half circle; a binary task whose labelling rule the paper does not give (its source,
ref. [52], was cut from the text). Our reading, documented here:

- domain m (m = 0..29) has mean R (cos theta_m, sin theta_m) with theta_m = m * 180 / 29 degrees, R = 1, and
  standard deviation `std` = 0.25 per coordinate;
- label y = 1{||x|| > R}: outside the circle through the means. Every domain then has balanced labels, and the
  decision boundary near domain m is the circle's tangent there, whose direction turns with m: the evolution a
  method must follow.

Domain m is domain 0 rotated by theta_m about the origin (the label rule is rotation invariant), so the task has
one base population, the points of domain 0, and the `evolving_domains` scenario makes the other domains with its
rotations (`--num_domains=30 --rotation_step=6.2069`, i.e. 180 / 29; on 2-D inputs the rotation plane is R^2
itself, turning either way by the scenario's seed). Clients: 600 base clients of 50 points, so 20 clients x 29
source domains take 29,000 points, the paper's scale.

Model: a 5-layer MLP as the paper describes (3 representation layers + 2 classifier layers; widths not given, 32
here): the extractor is the three representation layers and a first classifier layer (Dense 32, ReLU), each branch
the last, linear layer. FedEvolve and FedEvp split the same network into 3 representation and 2 classifier layers
(`models.representation.mlp_representation`).
"""

import collections
import dataclasses

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from models import multi_branch
from models import representation
from tasks import task as task_lib
from utils import settings as settings_lib

NUM_CLASSES = 2
RADIUS = 1.0
HIDDEN_UNITS = 32

DEFAULTS = {
    'server_learning_rate': 0.01,
    'server_adam_epsilon': 1e-4,
    'client_learning_rate': 0.05,
    'clients_per_round': 10,
    'client_batch_size': 16,
    'total_rounds': 200,
    'period': 32,
}

NAME = 'circle'
RAW_INPUT_SPACE = True
READS_FILES = False
UNSUPPORTED = {'periodic': task_lib.ONE_BASE, 'mixture_drift': task_lib.ONE_BASE}
Settings = settings_lib.NoSettings


@dataclasses.dataclass(frozen=True)
class CircleConfig:
  num_clients: int = 600
  client_size: int = 50
  std: float = 0.25
  test_examples: int = 1000


def examples(num_examples: int, std: float, rng: np.random.Generator) -> collections.OrderedDict:
  """Points of domain 0 (mean (R, 0)) with labels 1{||x|| > R}."""
  x = (np.array([RADIUS, 0.0]) + std * rng.normal(size=(num_examples, 2))).astype(np.float32)
  return collections.OrderedDict(x=x, y=(np.linalg.norm(x, axis=1) > RADIUS).astype(np.int32))


def create_model(num_branches: int) -> tf.keras.Model:
  extractor = tf.keras.Sequential([tf.keras.Input(shape=(2,))] + [
      tf.keras.layers.Dense(HIDDEN_UNITS, activation='relu') for _ in range(4)], name='extractor')
  return multi_branch.build_multi_branch_model(extractor, num_branches, NUM_CLASSES, name='circle_mlp')


def create_task(seed: int = 0, config: CircleConfig = CircleConfig()) -> task_lib.Task:
  rng = np.random.default_rng([seed, 50])
  clients = {f'circle_{i:04d}': examples(config.client_size, config.std, rng) for i in range(config.num_clients)}
  test = examples(config.test_examples, config.std, rng)
  return task_lib.Task(
      name='circle', train_data=[tff.simulation.datasets.TestClientData(clients)],
      client_sizes=[{client_id: config.client_size for client_id in clients}],
      test_data=[tf.data.Dataset.from_tensor_slices(test)], test_sizes=[config.test_examples],
      batch_fn=lambda batch: batch, model_fn=create_model, num_classes=NUM_CLASSES, mode_names=('circle',),
      representation=representation.mlp_representation(2, NUM_CLASSES, HIDDEN_UNITS))


def create(settings: Settings, files: task_lib.DataFiles, seed: int) -> task_lib.Task:
  """The task for `--task=circle` (the contract: `tasks.task`)."""
  del settings  # It has none.
  return create_task(seed)
