"""Tasks by name, with their default hyperparameters (Table 2 for the paper's tasks)."""

from typing import Callable, NamedTuple, Optional

from tasks import cifar
from tasks import emnist
from tasks import gaussian_mixture
from tasks import mnist
from tasks import stackoverflow
from tasks import synthetic
from tasks import task as task_lib


class _Entry(NamedTuple):
  create: Callable[[Optional[str], Optional[str], int], task_lib.Task]  # (cache_dir, tfds_data_dir, seed) -> Task
  defaults: dict


_TASKS = {
    'synthetic': _Entry(lambda cache_dir, tfds_data_dir, seed: synthetic.create_task(seed=seed), synthetic.DEFAULTS),
    'emnist': _Entry(lambda cache_dir, tfds_data_dir, seed: emnist.create_task(cache_dir, seed), emnist.DEFAULTS),
    'cifar': _Entry(lambda cache_dir, tfds_data_dir, seed: cifar.create_task(cache_dir, seed, tfds_data_dir),
                    cifar.DEFAULTS),
    'stackoverflow': _Entry(lambda cache_dir, tfds_data_dir, seed: stackoverflow.create_task(cache_dir, seed),
                            stackoverflow.DEFAULTS),
    'mnist': _Entry(lambda cache_dir, tfds_data_dir, seed: mnist.create_task(tfds_data_dir, seed), mnist.DEFAULTS),
    'gaussian_mixture': _Entry(lambda cache_dir, tfds_data_dir, seed: gaussian_mixture.create_task(seed=seed),
                               gaussian_mixture.DEFAULTS),
    'gaussian_toy_1d': _Entry(
        lambda cache_dir, tfds_data_dir, seed: gaussian_mixture.create_task(seed, gaussian_mixture.TOY_1D,
                                                                            'gaussian_toy_1d'),
        dict(gaussian_mixture.DEFAULTS, clients_per_round=10, client_batch_size=32, total_rounds=100)),
}
TASKS = tuple(_TASKS)


def validate(name: str) -> None:
  if name not in _TASKS:
    raise ValueError(f'task must be one of {", ".join(TASKS)}; got {name!r}.')


def defaults(name: str) -> dict:
  """Default hyperparameters of task `name`, flag name -> value."""
  validate(name)
  return dict(_TASKS[name].defaults)


def create(name: str, cache_dir: Optional[str], seed: int, tfds_data_dir: Optional[str] = None) -> task_lib.Task:
  """Task `name`, reading TFF's files from `cache_dir` and tensorflow-datasets' from `tfds_data_dir`."""
  validate(name)
  return _TASKS[name].create(cache_dir, tfds_data_dir, seed)
