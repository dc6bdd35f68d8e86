"""Paper setups by name (`--setup`): every module listed here declares `SETUPS`, a tuple of `setup.Setup`.

Each setup is checked when this module loads: its name is unique, each flag it sets is a flag of run_experiment
that the methods of a comparison share (no `--<method>_*` flag: those are a method's own) with a value of that
flag's type, its task and scenario are registered and so is every method it lists. A failure names the module, the
setup and the flag in one line. A new setup is its declaration in one of these modules, or a new module and one
line in `MODULES`.
"""

from typing import Mapping

from algorithms import registry as algorithms
from experiment.core import assembly
from experiment.setups import diurnal_or_nocturnal
from experiment.setups import fedevolve
from experiment.setups import fedgmm
from experiment.setups import pfedem
from experiment.setups import setup as setup_lib
from experiment.setups import shiftex
from periodic_shift import scenarios
from tasks import registry as tasks
from utils import settings as settings_lib

MODULES = (diurnal_or_nocturnal, pfedem, fedevolve, fedgmm, shiftex)


def _shared_flags() -> dict[str, type]:
  """Flag name -> type of every flag of run_experiment but the methods' own."""
  kinds = {field.name: settings_lib.flag_type(group, field)
           for group in assembly.GROUPS.values() for field in settings_lib.declared(group)}
  kinds.update({flag.name: flag.kind for flag in tasks.flags() + scenarios.flags()})
  return kinds


def _of_kind(value, kind: type) -> bool:
  if kind is list or isinstance(value, tuple):
    return kind is list and isinstance(value, tuple)
  if kind is bool or isinstance(value, bool):
    return isinstance(value, bool) and kind is bool
  return isinstance(value, kind) or (kind is float and isinstance(value, int))


def _check(module, declared: setup_lib.Setup, kinds: Mapping[str, type]) -> None:
  where = f'{module.__name__}: setup {declared.name}'
  for flag, value in declared.flags.items():
    if flag not in kinds:
      raise ValueError(f'{where}: --{flag} is not a flag the methods of a comparison share.')
    if not _of_kind(value.value, kinds[flag]):
      raise ValueError(f'{where}: --{flag} takes a {kinds[flag].__name__}; got {value.value!r}.')
  values = declared.values()
  if values['task'] not in tasks.TASKS or values['scenario'] not in scenarios.SCENARIOS:
    raise ValueError(f'{where}: task {values["task"]!r} or scenario {values["scenario"]!r} is not registered.')
  unknown = [name for name in declared.methods if name not in algorithms.METHODS]
  if unknown:
    raise ValueError(f'{where}: methods {", ".join(unknown)} are not registered.')


def _load(modules) -> dict[str, setup_lib.Setup]:
  kinds, loaded = _shared_flags(), {}
  for module in modules:
    for declared in module.SETUPS:
      if declared.name in loaded:
        raise ValueError(f'{module.__name__}: setup {declared.name} is declared twice.')
      _check(module, declared, kinds)
      loaded[declared.name] = declared
  return loaded


SETUPS = _load(MODULES)


def get(name: str) -> setup_lib.Setup:
  """Setup `name`; ValueError (one line) naming the setups for an unknown one."""
  if name not in SETUPS:
    raise ValueError(f'--setup must be one of {", ".join(SETUPS)}; got {name!r}.')
  return SETUPS[name]


def unset_values(name: str, is_set) -> dict[str, setup_lib.FlagValue]:
  """The values setup `name` gives the flags `is_set(flag)` says the command line leaves unset."""
  return {flag: value for flag, value in get(name).values().items() if not is_set(flag)}
