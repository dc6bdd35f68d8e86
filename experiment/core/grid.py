"""A grid of experiment runs: which `run_experiment` flags each run of a matrix gets, and its directory name.

A grid is a small TOML file (`experiment/grids/*.toml`), or the same given by flags (`experiment/matrix.py`):

    name = "{task}_{algorithm}_s{seed}"   # optional; default: the swept settings, "task=synthetic,seed=0,..."

    [sweep]                               # every combination of these flags' values is one run
    task = ["synthetic", "circle"]
    algorithm = ["vanilla_single", "fedevp"]
    seed = [0, 1, 2]

    [flags]                               # given to every run
    total_rounds = 64

    [when.task.circle]                    # given to the runs whose `task` is `circle` (a swept flag)
    client_learning_rate = 0.1

    [[exclude]]                           # runs to leave out: every listed flag has one of the listed values
    algorithm = "nds"
    shift_p = [0.25, 4]

    [cases]                               # optional: named sets of flags, each crossed with the sweep as the
    default = {}                          # swept setting `case` (first, outermost; "{case}" in the name; not a
    pool_4 = { num_branches = 5 }         # flag: the binary gets the case's flags), for one-at-a-time ablations

    [report]                              # optional: the main table of the report the matrix writes at its end
    columns = ["target_server_accuracy", "target_accuracy"]   # its metrics, in order (`experiment.reporting.report_tables`)
    percent = true                        # accuracies in percent

Runs are ordered as the sweep's product, the first swept flag outermost. A flag's value is written as the binary
reads it: booleans as true/false, floats without a trailing ".0" (`inf` is the string "inf"). Flags set later win:
`[flags]`, then the case's, then `[when]` tables in file order, then the command line's overrides.
"""

import dataclasses
import itertools
import re
import tomllib
from typing import Mapping, Optional, Sequence

_KEYS = frozenset({'name', 'sweep', 'flags', 'when', 'exclude', 'report', 'cases'})
CASE = 'case'  # The swept setting of a grid's [cases], which names a case rather than a flag.
_REPORT_KEYS = frozenset({'columns', 'percent'})
_FLAG_NAME = re.compile(r'[a-z][a-z0-9_]*')


class GridError(ValueError):
  """A grid that cannot be run; its message is one line."""


@dataclasses.dataclass(frozen=True)
class Run:
  """One run: its directory name under the matrix root, the swept settings that name it, and every flag."""
  name: str
  settings: tuple[tuple[str, str], ...]
  flags: tuple[tuple[str, str], ...]

  def arguments(self) -> list[str]:
    """`--flag=value` for every flag, in order."""
    return [f'--{flag}={value}' for flag, value in self.flags]


@dataclasses.dataclass(frozen=True)
class Grid:
  sweep: tuple[tuple[str, tuple[str, ...]], ...]
  flags: tuple[tuple[str, str], ...] = ()
  when: tuple[tuple[str, str, tuple[tuple[str, str], ...]], ...] = ()
  exclude: tuple[tuple[tuple[str, frozenset[str]], ...], ...] = ()
  name: Optional[str] = None
  overrides: tuple[tuple[str, str], ...] = ()
  report_columns: tuple[str, ...] = ()
  report_percent: bool = False
  cases: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = ()

  def runs(self) -> list[Run]:
    """Every run of the grid, in sweep order, without the excluded ones."""
    keys = [key for key, _ in self.sweep]
    runs = []
    for values in itertools.product(*(values for _, values in self.sweep)):
      settings = tuple(zip(keys, values))
      chosen = dict(settings)
      if any(all(chosen.get(flag) in allowed for flag, allowed in rule) for rule in self.exclude):
        continue
      flags = {key: value for key, value in settings if key != CASE or not self.cases}
      flags.update(self.flags)
      flags.update(dict(self.cases).get(chosen.get(CASE), ()))
      for flag, value, extra in self.when:
        if chosen.get(flag) == value:
          flags.update(extra)
      flags.update(self.overrides)
      runs.append(Run(self._name(settings), settings, tuple(flags.items())))
    names = [run.name for run in runs]
    if len(set(names)) != len(names):
      duplicate = next(name for name in names if names.count(name) > 1)
      raise GridError(f'two runs of the grid are named {duplicate!r}: the name template must use every swept flag.')
    return runs

  def _name(self, settings) -> str:
    if self.name is None:
      return ','.join(f'{key}={value}' for key, value in settings)
    try:
      return self.name.format(**dict(settings))
    except KeyError as error:
      raise GridError(f'the name template {self.name!r} uses {error.args[0]!r}, which is not a swept flag.') from None


def flag_value(value) -> str:
  """`value` as the binary's flag parser reads it."""
  if isinstance(value, bool):
    return 'true' if value else 'false'
  if isinstance(value, float):  # Every digit the TOML gave (`:g` would keep six), without a trailing ".0".
    return repr(value).removesuffix('.0') if value == value and abs(value) != float('inf') else str(value)
  if isinstance(value, (str, int)):
    return str(value)
  raise GridError(f'flag values must be strings, numbers or booleans; got {value!r}.')


def _values(flag: str, values) -> tuple[str, ...]:
  values = values if isinstance(values, list) else [values]
  if not values:
    raise GridError(f'sweep {flag!r} has no values.')
  return tuple(flag_value(v) for v in values)


def _flag_table(table: Mapping, where: str) -> tuple[tuple[str, str], ...]:
  if not isinstance(table, dict):
    raise GridError(f'{where} must be a table of flag = value.')
  for flag in table:
    _check_flag(flag, where)
  return tuple((flag, flag_value(value)) for flag, value in table.items())


def _check_flag(flag: str, where: str) -> None:
  if not _FLAG_NAME.fullmatch(flag):
    raise GridError(f'{where}: {flag!r} is not a flag name (write it without dashes).')


def from_spec(spec: Mapping, overrides: Sequence[tuple[str, str]] = (),
              sweeps: Sequence[tuple[str, Sequence[str]]] = ()) -> Grid:
  """The grid of a parsed TOML `spec`, with `sweeps` (flag, values) added to (or replacing) its sweep and
  `overrides` (flag, value) given to every run."""
  unknown = sorted(set(spec) - _KEYS)
  if unknown:
    raise GridError(f'unknown grid keys {", ".join(unknown)}; a grid has {", ".join(sorted(_KEYS))}.')
  sweep = dict(spec.get('sweep', {}))
  cases = _cases(spec.get('cases', {}), sweep)
  if cases:
    sweep = {CASE: list(dict(cases)), **sweep}
  for flag, values in sweeps:
    if flag == CASE and cases and set(values) - set(dict(cases)):
      raise GridError(f'--sweep {CASE}: the grid\'s cases are {", ".join(dict(cases))}; got {", ".join(values)}.')
    sweep[flag] = list(values)
  for flag in sweep:
    _check_flag(flag, 'sweep')
  swept = {flag: _values(flag, values) for flag, values in sweep.items()}
  if not swept:
    raise GridError('the grid sweeps no flag: give [sweep] in the grid file or --sweep.')
  when = []
  for flag, cases in spec.get('when', {}).items():
    if flag not in swept:
      raise GridError(f'[when.{flag}] depends on {flag!r}, which is not swept.')
    for value, extra in cases.items():
      when.append((flag, value, _flag_table(extra, f'[when.{flag}.{value}]')))
  exclude = []
  for rule in spec.get('exclude', []):
    for flag in rule:
      if flag not in swept:
        raise GridError(f'[[exclude]] names {flag!r}, which is not swept.')
    exclude.append(tuple((flag, frozenset(_values(flag, values))) for flag, values in rule.items()))
  flags = dict(_flag_table(spec.get('flags', {}), '[flags]'))
  for flag, _ in sweeps:
    if flag in flags:  # [flags] would win over the sweep in every run, silently.
      raise GridError(f'--sweep {flag}: the grid fixes it in [flags]; use --set={flag}=... to change it for every '
                      'run.')
  for flag, _ in overrides:
    _check_flag(flag, '--set')
    if flag in swept:
      raise GridError(f'--set {flag} fixes a swept flag; use --sweep={flag}=... to change its values.')
  for flag in ('root_output_dir', 'experiment_name'):
    if flag in flags or flag in swept or flag in dict(overrides):
      raise GridError(f'{flag} is the matrix\'s to set (--root and the run names).')
  columns, percent = _report(spec.get('report', {}))
  return Grid(tuple(swept.items()), tuple(flags.items()), tuple(when), tuple(exclude), spec.get('name'),
              tuple(overrides), columns, percent, cases)


def _cases(table, sweep: Mapping) -> tuple[tuple[str, tuple[tuple[str, str], ...]], ...]:
  """The [cases] table's cases: (name, its flags), in file order."""
  if not isinstance(table, dict):
    raise GridError('[cases] must be a table of name = { flag = value, ... }.')
  if table and CASE in sweep:
    raise GridError(f'a grid with [cases] sweeps them as {CASE!r}; [sweep] cannot have {CASE!r} too.')
  for name, flags in table.items():
    for flag in flags if isinstance(flags, dict) else ():
      if flag in sweep:
        raise GridError(f'[cases.{name}] sets {flag!r}, which the grid sweeps.')
  return tuple((name, _flag_table(flags, f'[cases.{name}]')) for name, flags in table.items())


def _report(table) -> tuple[tuple[str, ...], bool]:
  """The [report] table's columns and percent."""
  if not isinstance(table, dict) or set(table) - _REPORT_KEYS:
    raise GridError(f'[report] takes {" and ".join(sorted(_REPORT_KEYS))}.')
  columns = table.get('columns', [])
  percent = table.get('percent', False)
  if not isinstance(columns, list) or not all(isinstance(c, str) for c in columns) or not isinstance(percent, bool):
    raise GridError('[report] columns is a list of metric names and percent true or false.')
  return tuple(columns), percent


def load(path: Optional[str], overrides: Sequence[tuple[str, str]] = (),
         sweeps: Sequence[tuple[str, Sequence[str]]] = ()) -> Grid:
  """The grid of the TOML file at `path` (None: an empty spec) with the command line's sweeps and overrides."""
  spec = {}
  if path is not None:
    try:
      with open(path, 'rb') as f:
        spec = tomllib.load(f)
    except OSError as error:
      raise GridError(f'cannot read the grid {path}: {error.strerror}.') from None
    except tomllib.TOMLDecodeError as error:
      raise GridError(f'{path} is not valid TOML: {error}.') from None
  return from_spec(spec, overrides, sweeps)
