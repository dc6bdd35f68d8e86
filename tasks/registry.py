"""Tasks by name, with their default hyperparameters (Table 2 for the paper's tasks)."""

import dataclasses
from typing import Callable, NamedTuple, Optional

from periodic_shift import scenarios
from tasks import cifar
from tasks import circle
from tasks import digits
from tasks import emnist
from tasks import emnist_fashion
from tasks import gaussian_mixture
from tasks import mnist
from tasks import stackoverflow
from tasks import synthetic
from tasks import task as task_lib


class _Entry(NamedTuple):
  create: Callable[[Optional[str], Optional[str], int], task_lib.Task]  # (cache_dir, tfds_data_dir, seed) -> Task
  defaults: dict
  unsupported: dict[str, str] = {}  # Scenario -> why the task cannot run it.


_ONE_BASE = 'it has one base population; the scenario needs two or more'
_THREE_BASES = 'it has three bases; the day/night shift has two'
_NOT_DAY_NIGHT = 'its bases are mixture components, not a day and a night mode'
_TEXT_ONLY = ('its inputs are word sequences and its modes questions and answers, for which the other scenarios\' '
              'transforms and mixtures are not defined')


_TASKS = {
    'synthetic': _Entry(lambda cache_dir, tfds_data_dir, seed: synthetic.create_task(seed=seed), synthetic.DEFAULTS),
    'emnist': _Entry(lambda cache_dir, tfds_data_dir, seed: emnist.create_task(cache_dir, seed), emnist.DEFAULTS),
    'cifar': _Entry(lambda cache_dir, tfds_data_dir, seed: cifar.create_task(cache_dir, seed, tfds_data_dir),
                    cifar.DEFAULTS),
    'stackoverflow': _Entry(lambda cache_dir, tfds_data_dir, seed: stackoverflow.create_task(cache_dir, seed),
                            stackoverflow.DEFAULTS,
                            {name: _TEXT_ONLY for name in scenarios.SCENARIOS if name != 'periodic'}),
    'emnist_fashion': _Entry(emnist_fashion.create_task, emnist_fashion.DEFAULTS, {'periodic': _THREE_BASES}),
    'digits': _Entry(lambda cache_dir, tfds_data_dir, seed: digits.create_task(seed=seed), digits.DEFAULTS),
    'digits_written': _Entry(
        lambda cache_dir, tfds_data_dir, seed: digits.create_task(
            seed, digits.DigitsConfig(one_base=True, label_concentration=float('inf'))),
        digits.DEFAULTS, {'periodic': _ONE_BASE, 'mixture_drift': _ONE_BASE}),
    'mnist': _Entry(lambda cache_dir, tfds_data_dir, seed: mnist.create_task(tfds_data_dir, seed), mnist.DEFAULTS),
    'gaussian_mixture': _Entry(lambda cache_dir, tfds_data_dir, seed: gaussian_mixture.create_task(seed=seed),
                               gaussian_mixture.DEFAULTS, {'periodic': _NOT_DAY_NIGHT}),
    'gaussian_toy_1d': _Entry(
        lambda cache_dir, tfds_data_dir, seed: gaussian_mixture.create_task(seed, gaussian_mixture.TOY_1D,
                                                                            'gaussian_toy_1d'),
        dict(gaussian_mixture.DEFAULTS, clients_per_round=10, client_batch_size=32, total_rounds=100),
        {'periodic': _NOT_DAY_NIGHT}),
    'circle': _Entry(lambda cache_dir, tfds_data_dir, seed: circle.create_task(seed=seed), circle.DEFAULTS,
                     {'periodic': _ONE_BASE, 'mixture_drift': _ONE_BASE}),
}
TASKS = tuple(_TASKS)


def validate(name: str) -> None:
  if name not in _TASKS:
    raise ValueError(f'task must be one of {", ".join(TASKS)}; got {name!r}.')


def validate_scenario(name: str, scenario: str) -> None:
  """Raises ValueError (one line) when task `name` cannot run `scenario`."""
  validate(name)
  reason = _TASKS[name].unsupported.get(scenario)
  if reason is not None:
    supported = [s for s in scenarios.SCENARIOS if s not in _TASKS[name].unsupported]
    raise ValueError(f'task {name} cannot run scenario {scenario}: {reason} (it runs {", ".join(supported)}).')


def defaults(name: str) -> dict:
  """Default hyperparameters of task `name`, flag name -> value."""
  validate(name)
  return dict(_TASKS[name].defaults)


def validate_style_scale(name: str, style_scale: Optional[float]) -> None:
  """Raises ValueError (one line) for a synthetic style scale that is set for another task or not > 0."""
  if style_scale is None:
    return
  if name != 'synthetic':
    raise ValueError(f'--synthetic_style_scale sets the synthetic task\'s mode offsets; the task is {name}.')
  if not style_scale > 0:
    raise ValueError(f'--synthetic_style_scale must be > 0; got {style_scale}.')


def create(name: str, cache_dir: Optional[str], seed: int, tfds_data_dir: Optional[str] = None,
           style_scale: Optional[float] = None) -> task_lib.Task:
  """Task `name`, reading TFF's files from `cache_dir` and tensorflow-datasets' from `tfds_data_dir`; for
  `synthetic`, `style_scale` (None: its default) scales each mode's input offset s_m, how far apart its two bases
  are (`tasks/synthetic.py`)."""
  validate(name)
  validate_style_scale(name, style_scale)
  if style_scale is not None:
    return synthetic.create_task(seed, dataclasses.replace(synthetic.SyntheticConfig(), style_scale=style_scale))
  return _TASKS[name].create(cache_dir, tfds_data_dir, seed)
