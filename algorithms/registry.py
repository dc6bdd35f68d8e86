"""Methods by name (`--algorithm`): one entry per name, a method module and its traits.

A method module (`algorithms.core.method`) owns its `NAME`, its `Config` (its settings, the binary's
`--<method>_<setting>` flags) and its `build_algorithm`, which returns the `Algorithm` the training loop runs. An
`Entry` adds what the binary checks before anything is built: whether the method chooses between branches (`routes`:
it needs `--num_branches >= 2`), clusters raw inputs (`needs_raw_inputs`: undefined on token ids), runs the
single-branch network (`single_branch`, Appendix A.8) or trains without the shift (`no_shift`, No-Dist-Shift: the
name is an alias of `--no_shift`). `vanilla_single`, `nds` and `nds_single` are Vanilla's entries with these traits.
Methods that choose a branch without a temporal prior report routing accuracy under the best matching of modes to
branches.

Layout: `algorithms/core` holds the building blocks methods compose (the learning-process composition, local
training, objectives, client state, routing, evaluation) and never imports a method; `algorithms/methods` has one
module per method, importing only `algorithms/core` (FedProx and FedAvg+ are Vanilla's process with one change and
import it); this registry is the only module that imports every method. A new method is its module and one line in
`METHODS`.

Every setting of a method module declares where its default comes from, in the module's `SETTING_SOURCES` (field
name -> source): `paper: <section, equation or table>`, `suite choice: <why>` where the paper states no value, or
`departure: <the paper's value and the measurement that keeps another>`. This module refuses to load when a
setting has none (or a source names a field that is not a setting), so a new setting cannot arrive without one;
docs/running.md's table of method settings is made from them, and a run prints the departures it runs with.
"""

import dataclasses
import types

from algorithms.core import evaluation
from algorithms.core import method
from algorithms.methods import cfl
from algorithms.methods import fedavg_plus
from algorithms.methods import feddrift
from algorithms.methods import fedem
from algorithms.methods import fedevolve
from algorithms.methods import fedevp
from algorithms.methods import fedgmm
from algorithms.methods import fedprox
from algorithms.methods import fedrep
from algorithms.methods import fedtem
from algorithms.methods import fedtkm
from algorithms.methods import local
from algorithms.methods import min_loss
from algorithms.methods import pfedem
from algorithms.methods import scsgd
from algorithms.methods import shiftex
from algorithms.methods import tshot_kmeans
from algorithms.methods import vanilla
from tasks import registry as tasks
from tasks import task as task_lib
from utils import settings as settings_lib


Hyperparameters = method.Hyperparameters
Algorithm = method.Algorithm


@dataclasses.dataclass(frozen=True)
class Entry:
  """A method as `--algorithm` names it: its module (`NAME`, `Config`, `build_algorithm`) and its traits."""
  module: types.ModuleType
  routes: bool = False  # Chooses between branches: needs --num_branches >= 2.
  needs_raw_inputs: bool = False  # Clusters raw inputs: undefined on tasks without a raw input space.
  single_branch: bool = False  # The single-branch network, whatever --num_branches says.
  no_shift: bool = False  # Trains under the scenario without its shift (No-Dist-Shift).


METHODS = {
    'vanilla': Entry(vanilla),
    'nds': Entry(vanilla, no_shift=True),
    'vanilla_single': Entry(vanilla, single_branch=True),
    'nds_single': Entry(vanilla, single_branch=True, no_shift=True),
    'tshot_kmeans': Entry(tshot_kmeans, routes=True, needs_raw_inputs=True),
    'min_loss': Entry(min_loss, routes=True),
    'scsgd': Entry(scsgd, routes=True),
    'fedem': Entry(fedem, routes=True),
    'fedtem': Entry(fedtem, routes=True),
    'fedtkm': Entry(fedtkm, routes=True),
    'pfedem': Entry(pfedem, routes=True),
    'cfl': Entry(cfl, routes=True),
    'fedgmm': Entry(fedgmm),
    'fedprox': Entry(fedprox),
    'fedavg_plus': Entry(fedavg_plus),
    'local': Entry(local),
    'fedevolve': Entry(fedevolve),
    'fedevp': Entry(fedevp),
    'fedrep': Entry(fedrep),
    'shiftex': Entry(shiftex, routes=True),
    'feddrift': Entry(feddrift, routes=True),
}
ALGORITHMS = tuple(METHODS)
# Every method module once, in registry order: the modules whose settings are flags.
MODULES = tuple({entry.module.NAME: entry.module for entry in METHODS.values()}.values())
SOURCE_KINDS = ('paper', 'suite choice', 'departure')
DEPARTURE = 'departure'


def source_kind(source: str) -> str:
  """The kind (`SOURCE_KINDS`) of a setting's source; '' when it is none of them or gives no reason."""
  kind, _, why = source.partition(': ')
  return kind if kind in SOURCE_KINDS and why.strip() else ''


def check_setting_sources(module) -> None:
  """Raises ValueError (one line, naming the module and the field) when a setting of `module.Config` has no source
  of a known kind in `module.SETTING_SOURCES`, or a source names no setting."""
  declared = [field.name for field in settings_lib.declared(module.Config)]
  sources = getattr(module, 'SETTING_SOURCES', {})
  for name in declared:
    if not source_kind(sources.get(name, '')):
      kinds = ', '.join(f'"{kind}: <why>"' for kind in SOURCE_KINDS)
      raise ValueError(f'{module.__name__}: setting {name} needs a source in SETTING_SOURCES ({kinds}); got '
                       f'{sources.get(name)!r}.')
  unknown = sorted(set(sources) - set(declared))
  if unknown:
    raise ValueError(f'{module.__name__}: SETTING_SOURCES names {", ".join(unknown)}, which are not settings.')


for _module in MODULES:
  check_setting_sources(_module)


def setting_sources(name: str) -> dict[str, str]:
  """Flag name -> the source of its default, for every setting of method `name`."""
  module = METHODS[name].module
  return {flag: module.SETTING_SOURCES[field.name] for flag, field in method.settings(module.NAME,
                                                                                       module.Config).items()}


def setting_defaults(name: str) -> dict:
  """Flag name -> default, for every setting of method `name`."""
  module = METHODS[name].module
  return {flag: field.default for flag, field in method.settings(module.NAME, module.Config).items()}


def departures(name: str, values: dict) -> dict[str, str]:
  """Flag name -> source, for the settings of method `name` whose default departs from its paper and that `values`
  (flag name -> the run's value) leave at that default."""
  defaults = setting_defaults(name)
  return {flag: source for flag, source in setting_sources(name).items()
          if source_kind(source) == DEPARTURE and values.get(flag, defaults[flag]) == defaults[flag]}


def flags() -> list[settings_lib.Flag]:
  """The flag of every setting of every method module's Config (`--<method>_<setting>`); a flag two methods declare
  (FedTEM's and FedTKM's `--prior`) is one flag."""
  specs = {}
  for module in MODULES:
    for name, field in method.settings(module.NAME, module.Config).items():
      spec = settings_lib.flag_of(module.Config, field, name)
      assert specs.setdefault(name, spec).default == spec.default, f'--{name} has two defaults.'
  return list(specs.values())


def check_set_flags(name: str, values) -> None:
  """Raises ValueError (one line) when a method flag in `values` (flag name -> value, the flags a user set) is not a
  setting of method `name` and differs from its default: the run would ignore it silently, and its record would not
  show that it did. A flag at its default is let through, so that a grid may sweep one method's setting (FedTKM's
  leak) over every method it compares."""
  own = method.settings(METHODS[name].module.NAME, METHODS[name].module.Config)
  defaults = {flag.name: tuple(flag.default) if isinstance(flag.default, list) else flag.default for flag in flags()}
  for flag, value in values.items():
    if flag not in own and value != defaults[flag]:
      owners = [module.NAME for module in MODULES if flag in method.settings(module.NAME, module.Config)]
      raise ValueError(f'--{flag} is a setting of {" and ".join(owners)}; the method is {name}.')


def validate(name: str, task_name: str = None, num_branches: int = 2) -> None:
  """Raises ValueError for an unknown method, or one that cannot run on the task (its module's `RAW_INPUT_SPACE`) or
  with the branches."""
  if name not in METHODS:
    raise ValueError(f'--algorithm must be one of {", ".join(ALGORITHMS)}; got {name!r}.')
  if METHODS[name].needs_raw_inputs and task_name is not None and not tasks.module(task_name).RAW_INPUT_SPACE:
    raise ValueError(f'{name} is not defined for {task_name}: it clusters raw inputs, and this task\'s are token ids, '
                     'where k-means has no meaning.')
  if METHODS[name].routes and num_branches < 2:
    raise ValueError(f'{name} chooses between branches and needs --num_branches >= 2; got {num_branches}.')


def defaults(name: str) -> dict:
  """The training settings method `name`'s paper uses (its module's `DEFAULTS.values`), flag name -> value."""
  return dict(METHODS[name].module.DEFAULTS.values)


def seeded_build(name: str) -> bool:
  """Whether method `name`'s build reads the run's seed (its module's `SEEDED_BUILD`)."""
  return METHODS[name].module.SEEDED_BUILD


def is_shift_free(name: str) -> bool:
  """Whether method `name` is an alias of training without the shift (`nds`, `nds_single`: `--no_shift`)."""
  return METHODS[name].no_shift


def num_branches(name: str, requested: int) -> int:
  """The network's branches for method `name`: 1 for the single-branch baselines, else `requested` (also for a name
  `validate` refuses)."""
  return 1 if name in METHODS and METHODS[name].single_branch else requested


def build(name: str, task: task_lib.Task, element_spec, hparams: Hyperparameters, evaluator: evaluation.Evaluator,
          config=None) -> Algorithm:
  """Builds the method `name` for `task`; `element_spec` is the spec of a preprocessed client batch; `config` is
  the method's own `Config` (default settings when None)."""
  validate(name)
  entry = METHODS[name]
  hparams = dataclasses.replace(hparams, num_branches=num_branches(name, hparams.num_branches))
  return entry.module.build_algorithm(task, element_spec, hparams, evaluator, config or entry.module.Config())
