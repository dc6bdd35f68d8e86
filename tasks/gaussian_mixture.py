"""`gaussian_mixture` and `gaussian_toy_1d`: the FedGMM paper's synthetic data, embedded (no download).

The FedGMM paper, Section 4.1: M components P^(m)(x) = N(x; mu_m, I_d), each with its own labelling
function, the side of a hyperplane through its mean:

  x ~ N(mu_m, sigma^2 I_d),   y = F^(m)(x) = 1{(x - mu_m)^T v_m > 0}.

Each component is one base population of the task, and a client of the `dirichlet_mixture` scenario draws its
examples from the components with its own weights pi_c ~ Dir(0.4) (`periodic_shift.dirichlet_mixture`). One model
cannot fit the M labelling functions at once (they disagree where the components overlap and point different
ways), which is what a mixture of learners is for.

- `gaussian_mixture` (Table 1, "Synthetic"): d = 32, M = 3, 300 clients of 3000 examples each (Table 1's
  ~1,000,000 examples in all; the paper says "about 3000", we give every client exactly 3000). The paper says mu_m
  and v_m are "specified beforehand" without their values: we draw mu_m, v_m ~ U(-1, 1)^d from the task seed (the
  official code's draw for both) with sigma = 1 (the paper's I_d; the code's I / sqrt(d) differs, and we follow the
  paper, as our reading of it advises).
- `gaussian_toy_1d` (Figure 1): N(x; -2, 1.5) with y = 1{x < -2} and N(x; 2, 1.5) with y = 1{x < 2}, i.e.
  mu = -2, 2 and v = -1, -1. Whether 1.5 is a variance or a standard deviation is unstated; we read it as the
  standard deviation. 40 clients of 500 examples (the figure has no federation; any count shows it).

Novelty data (Table 4's detection task): `test_examples_per_component` examples of a component no client holds,
x ~ N(mu_new, sigma^2 I_d) with mu_new ~ U(-1, 1)^d from the seed (the toy: beyond both components, at
2 max|mu| + 2 sigma), labelled 0 (never scored for accuracy).

Base population m has clients `client_0000`, ... with the same ids in every component, so scenario client c takes
its component-m examples from client c of base m. Examples are generated lazily from (seed, component, client) with
stateless random ops, so the 2.7 million examples of the full task are never held in memory at once. Test data:
`test_examples_per_component` fresh examples per component.

The model is the paper's "linear sigmoid function": the features are x itself (an identity extractor) and each
branch a 2-way linear softmax layer (logistic regression, over-parameterized by a constant). Clustering methods see
x as their features, so their feature-space GMMs are models of the components themselves.
"""

import collections
import dataclasses
from typing import Optional

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from models import multi_branch
from tasks import task as task_lib
from utils import settings as settings_lib

NUM_CLASSES = 2

DEFAULTS = {
    'server_learning_rate': 0.03,
    'server_adam_epsilon': 1e-4,
    'client_learning_rate': 0.1,
    'clients_per_round': 30,
    'client_batch_size': 128,
    'total_rounds': 200,
    'period': 32,
    'dirichlet_components': 'bases',
}

NAME = 'gaussian_mixture'
RAW_INPUT_SPACE = True
READS_FILES = False
UNSUPPORTED = {'periodic': task_lib.NOT_DAY_NIGHT}
Settings = settings_lib.NoSettings


@dataclasses.dataclass(frozen=True)
class MixtureConfig:
  """The generator's parameters (module docstring); `means` / `normals` [M, d] fixed, or None to draw them."""
  dim: int = 32
  num_components: int = 3
  num_clients: int = 300
  client_size: int = 3000
  std: float = 1.0
  test_examples_per_component: int = 2000
  means: Optional[tuple[tuple[float, ...], ...]] = None
  normals: Optional[tuple[tuple[float, ...], ...]] = None


TOY_1D = MixtureConfig(dim=1, num_components=2, num_clients=40, client_size=500, std=1.5, means=((-2.0,), (2.0,)),
                       normals=((-1.0,), (-1.0,)))


def labels(x: np.ndarray, mean: np.ndarray, normal: np.ndarray) -> np.ndarray:
  """F^(m)(x) = 1{(x - mu_m)^T v_m > 0} for x [N, d] (Wu et al., 2023, Section 4.1); int32 [N]."""
  return ((x - mean) @ normal > 0).astype(np.int32)


def parameters(config: MixtureConfig, seed: int) -> tuple[np.ndarray, np.ndarray]:
  """(means, normals), each [M, d] float32: the config's, or drawn U(-1, 1) from `seed`."""
  if config.means is not None:
    return np.asarray(config.means, np.float32), np.asarray(config.normals, np.float32)
  rng = np.random.default_rng([seed, 40])
  shape = (config.num_components, config.dim)
  return rng.uniform(-1, 1, shape).astype(np.float32), rng.uniform(-1, 1, shape).astype(np.float32)


def _component_clients(config: MixtureConfig, mean: np.ndarray, normal: np.ndarray, stream: int,
                       client_ids: list[str]) -> tff.simulation.datasets.ClientData:
  """The clients of one component: client i's examples drawn from the stateless stream (stream, i).

  The draw is one traced function: called eagerly (every round's clients), a client's dataset costs about five
  eager tensors where the same ops run eagerly made about thirty, and TensorFlow 2.14 under Python 3.11 leaks memory
  for every eager tensor it makes (`utils.eager_constants`)."""

  @tf.function(input_signature=[tf.TensorSpec([], tf.int64)], autograph=False)
  def draw(index):
    noise = tf.random.stateless_normal([config.client_size, config.dim],
                                       seed=tf.stack([tf.constant(stream, tf.int64), index]))
    x = mean + config.std * noise
    y = tf.cast(tf.linalg.matvec(x - mean, normal) > 0, tf.int32)
    return collections.OrderedDict(x=x, y=y)

  def dataset_fn(client_id):
    if isinstance(client_id, str):  # From Python (every round's clients): ragged string ops take ~6 ms eagerly.
      index = int(client_id.split('_')[-1])
    else:  # A string tensor (ClientData's serializable path).
      index = tf.strings.to_number(tf.strings.split(client_id, '_')[-1], tf.int64)
    return tf.data.Dataset.from_tensor_slices(draw(index))

  return tff.simulation.datasets.ClientData.from_clients_and_tf_fn(client_ids, dataset_fn)


def create_model(dim: int, num_branches: int) -> tf.keras.Model:
  extractor = tf.keras.Sequential([tf.keras.Input(shape=(dim,)), tf.keras.layers.Identity()], name='extractor')
  return multi_branch.build_multi_branch_model(extractor, num_branches, NUM_CLASSES, name='linear_sigmoid')


def create_task(seed: int = 0, config: MixtureConfig = MixtureConfig(), name: str = 'gaussian_mixture'
                ) -> task_lib.Task:
  means, normals = parameters(config, seed)
  client_ids = [f'client_{i:04d}' for i in range(config.num_clients)]
  rng = np.random.default_rng([seed, 41])
  train_data, test_data, test_sizes = [], [], []
  for m in range(config.num_components):
    train_data.append(_component_clients(config, means[m], normals[m], seed * 1000 + m, client_ids))
    x = means[m] + config.std * rng.normal(size=(config.test_examples_per_component, config.dim))
    x = x.astype(np.float32)
    test_data.append(tf.data.Dataset.from_tensor_slices(
        collections.OrderedDict(x=x, y=labels(x, means[m], normals[m]))))
    test_sizes.append(config.test_examples_per_component)
  novel_mean = np.random.default_rng([seed, 42]).uniform(-1, 1, config.dim).astype(np.float32)
  if config.means is not None:  # Fixed components (the toy): the novel one lies beyond them.
    novel_mean = 2.0 * np.abs(means).max(axis=0) + 2.0 * config.std
  novel_x = (novel_mean + config.std * rng.normal(size=(config.test_examples_per_component, config.dim))).astype(
      np.float32)
  novel = tf.data.Dataset.from_tensor_slices(collections.OrderedDict(
      x=novel_x, y=np.zeros(len(novel_x), np.int32)))
  return task_lib.Task(
      name=name, train_data=train_data,
      client_sizes=[{client_id: config.client_size for client_id in client_ids}] * config.num_components,
      test_data=test_data, test_sizes=test_sizes, batch_fn=lambda batch: batch,
      model_fn=lambda num_branches: create_model(config.dim, num_branches), num_classes=NUM_CLASSES,
      mode_names=tuple(f'component{m + 1}' for m in range(config.num_components)), novelty_data=novel)


def create(settings: Settings, files: task_lib.DataFiles, seed: int) -> task_lib.Task:
  """The task for `--task=gaussian_mixture` (the contract: `tasks.task`)."""
  del settings  # It has none.
  return create_task(seed)
