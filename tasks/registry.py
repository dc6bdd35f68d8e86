"""The tasks by name (`--task`), one module each; a module owns its default hyperparameters, the scenarios it cannot
run, its settings (flags `--<task>_<setting>`) and its build (the contract: `tasks.task`). A new task is its module
and one line in `MODULES`.
"""

from typing import Iterator, Mapping

from periodic_shift import scenarios
from tasks import cifar
from tasks import circle
from tasks import digits
from tasks import digits_written
from tasks import emnist
from tasks import emnist_fashion
from tasks import fashion_mnist
from tasks import gaussian_mixture
from tasks import gaussian_toy_1d
from tasks import mnist
from tasks import stackoverflow
from tasks import synthetic
from tasks import task as task_lib
from utils import settings as settings_lib

MODULES = (synthetic, emnist, cifar, stackoverflow, emnist_fashion, digits, digits_written, mnist, fashion_mnist,
           gaussian_mixture, gaussian_toy_1d, circle)
TASKS = tuple(module.NAME for module in MODULES)
_BY_NAME = {module.NAME: module for module in MODULES}


def module(name: str):
  """The module of task `name`; raises ValueError (one line) for an unknown name."""
  if name not in _BY_NAME:
    raise ValueError(f'--task must be one of {", ".join(TASKS)}; got {name!r}.')
  return _BY_NAME[name]


def declared_settings() -> Iterator[tuple[str, str, type, object]]:
  """(flag name, task name, its Settings class, field) for every setting of every task, in registry order."""
  for task_module in MODULES:
    for field in settings_lib.declared(task_module.Settings):
      yield field.metadata['flag'] or f'{task_module.NAME}_{field.name}', task_module.NAME, task_module.Settings, field


def flags() -> list[settings_lib.Flag]:
  """The flag of every task setting, `--<task>_<setting>`."""
  return [settings_lib.flag_of(settings_class, field, flag, f'Task {name}: ')
          for flag, name, settings_class, field in declared_settings()]


def settings_from(name: str, values: Mapping[str, object]):
  """Task `name`'s Settings from `values` (flag name -> value, the flags a user set; None keeps the default).
  Raises ValueError (one line) for a set flag of another task."""
  chosen = {}
  for flag, owner, _, field in declared_settings():
    if values.get(flag) is None:
      continue
    if owner != name:
      raise ValueError(f'--{flag} is a setting of task {owner}; the task is {name}.')
    chosen[field.name] = values[flag]
  return module(name).Settings(**chosen)


def settings_record(name: str, settings) -> tuple[dict, dict]:
  """(flag name -> value, flag name -> default) of task `name`'s `settings`, as config.json records them."""
  values, defaults = {}, {}
  for flag, owner, _, field in declared_settings():
    if owner == name:
      values[flag], defaults[flag] = getattr(settings, field.name), field.default
  return values, defaults


def validate(name: str, settings=None) -> None:
  """Raises ValueError (one line, naming the flag) for an unknown task or a bad setting."""
  task_module = module(name)
  (settings or task_module.Settings()).validate()


def validate_scenario(name: str, scenario: str) -> None:
  """Raises ValueError (one line) when task `name` cannot run `scenario`."""
  unsupported = module(name).UNSUPPORTED
  if scenario in unsupported:
    supported = [s for s in scenarios.SCENARIOS if s not in unsupported]
    raise ValueError(f'task {name} cannot run scenario {scenario}: {unsupported[scenario]} (it runs '
                     f'{", ".join(supported)}).')


def defaults(name: str) -> dict:
  """Default hyperparameters of task `name`, flag name -> value."""
  return dict(module(name).DEFAULTS)


def create(name: str, settings=None, files: task_lib.DataFiles = task_lib.DataFiles(),
           seed: int = 0) -> task_lib.Task:
  """Task `name` with its `settings` (None: its defaults), reading its files from `files`."""
  settings = settings or module(name).Settings()
  settings.validate()
  return module(name).create(settings, files, seed)
