"""Settings a plug-in module declares as fields of its frozen dataclass, each with its default and help text, which the
binary turns into flags: a method's `Config` (`algorithms.core.method`), a scenario's `Settings`
(`periodic_shift.scenario`) and a task's `Settings` (`tasks.task`).

    @dataclasses.dataclass(frozen=True)
    class Settings:
      window_rounds: int = settings.setting(32, 'rounds per window.')
      num_clients: Optional[int] = settings.setting(None, 'the population (None: every client).')

`flag_type` reads a field's flag type from its annotation (`Optional[int]` is an int flag, `tuple[str, ...]` a list
flag), so a setting whose default is None still has a typed flag.

One rule holds for every float setting, whoever declares it: it is a finite number (`check_finite`, which
`experiment.core.assembly.resolve` applies to every settings object before anything else is checked or built). NaN
passes every comparison a range check makes (`nan < 0` is false), and inf passes `> 0`, so per-flag range checks alone
let them through to a failure many rounds later, or to a wrong result. A setting whose meaning includes infinity
(a Dirichlet concentration of inf: no skew) declares `infinite_ok`; NaN is never a value.
"""

import dataclasses
import math
import typing
from typing import Mapping, NamedTuple, Optional


def setting(default, help_text: str, flag: Optional[str] = None, infinite_ok: bool = False):
  """A dataclass field that is a flag, with its help text; `flag` names the flag when the module's naming rule (a
  method's `<method>_<field>`, a scenario's `<field>`, a task's `<task>_<field>`) does not; `infinite_ok` lets a float
  setting be +-inf (never NaN)."""
  return dataclasses.field(default=default, metadata={'help': help_text, 'flag': flag, 'infinite_ok': infinite_ok})


def check_finite(settings, flag_names: Optional[Mapping[str, str]] = None) -> None:
  """Raises ValueError (one line, naming the flag: `flag_names[field]`, else the field's `flag`, else its name) for
  the first float setting of `settings` that is NaN, or infinite without `infinite_ok`."""
  for field in declared(type(settings)):
    value = getattr(settings, field.name)
    if not isinstance(value, float) or math.isfinite(value):
      continue
    if math.isinf(value) and field.metadata.get('infinite_ok'):
      continue
    name = (flag_names or {}).get(field.name) or field.metadata.get('flag') or field.name
    allowed = 'a number (inf allowed)' if field.metadata.get('infinite_ok') else 'a finite number'
    raise ValueError(f'--{name} must be {allowed}; got {value}.')


@dataclasses.dataclass(frozen=True)
class NoSettings:
  """The settings of a plug-in without settings of its own (Vanilla, most tasks)."""

  def validate(self) -> None:
    pass


def declared(settings_class) -> list[dataclasses.Field]:
  """The fields of `settings_class` declared with `setting`, in declaration order."""
  return [field for field in dataclasses.fields(settings_class) if 'help' in field.metadata]


def flag_type(settings_class, field: dataclasses.Field) -> type:
  """bool, int, float, str or list: the flag type of `field` from its annotation (Optional unwrapped; a tuple is a
  list flag)."""
  annotation = typing.get_type_hints(settings_class)[field.name]
  if typing.get_origin(annotation) is typing.Union:
    annotation = next(arg for arg in typing.get_args(annotation) if arg is not type(None))
  if typing.get_origin(annotation) is tuple:
    return list
  if annotation not in (bool, int, float, str):
    raise TypeError(f'{settings_class.__qualname__}.{field.name}: a setting is a bool, int, float, str or tuple of '
                    f'str; got {annotation}.')
  return annotation


class Flag(NamedTuple):
  """A flag of the binary a setting becomes: its name, type (`flag_type`), default and help text."""
  name: str
  kind: type
  default: object
  help: str


def flag_of(settings_class, field: dataclasses.Field, name: Optional[str] = None, help_prefix: str = '') -> Flag:
  """The flag of `field` of `settings_class`, named `name` (default: the field's name)."""
  return Flag(name or field.name, flag_type(settings_class, field), field.default,
              help_prefix + field.metadata['help'])
