"""A paper's experiment as one declared object: the footing every method of a comparison shares.

A `Setup` names the data (task, scenario and their settings), the server step and its rate, the client rate, epochs
and batch, the clients and their participation, the rounds, and the methods the paper compares there, each value
with where it comes from: the paper's line (`paper(...)`), the committed tuning record that chose it where the paper
is silent (`tuned(...)`), or `suite_choice(...)` with the reason where the paper is silent or its value cannot run
here. `--setup=NAME` gives every flag it declares that the command line does not set
(`experiment.setups.registry.unset_values`), for any `--algorithm`; an explicit flag still wins. With a setup, no
method's paper defaults (`algorithms.core.method.Defaults`) enter the training settings: what the setup leaves out
comes from the server optimizer, the task or the suite, for every method alike, so methods run under one setup are
on one footing by construction. A method's own parameters (its `--<method>_*` flags, `--num_branches`) are not a
setup's: each method keeps its own.

config.json's `value_sources` credits each value equal to the setup's to `setup NAME: <its source>`.
"""

import dataclasses
from typing import Mapping, Union

FlagValue = Union[bool, int, float, str, tuple[str, ...]]  # A tuple: a list flag's items.
# Flags that are a method's own parameters or a run's identity, never a setup's.
NOT_SHARED = frozenset({'algorithm', 'num_branches', 'seed', 'setup', 'experiment_name', 'root_output_dir'})


def paper(where: str) -> str:
  """The source of a value a paper states: `where` names the paper's section, table or equation."""
  return f'paper: {where}'


def suite_choice(why: str) -> str:
  """The source of a value the paper does not state (or one that cannot run here), with the reason."""
  return f'suite choice: {why}'


def tuned(record: str) -> str:
  """The source of a value a declared tuning protocol chose where the paper is silent: `record` names the committed
  grid and data (docs/results/data/) it comes from."""
  return f'tuned: {record}'


@dataclasses.dataclass(frozen=True)
class Value:
  """A flag's value in a setup and where it comes from (`paper`, `tuned` or `suite_choice`)."""
  value: FlagValue
  source: str

  def __post_init__(self):
    if isinstance(self.value, float) and not abs(self.value) < float('inf'):
      raise ValueError(f'a setup value must be finite; got {self.value!r}.')
    listed = isinstance(self.value, tuple) and all(isinstance(item, str) for item in self.value)
    if not (listed or isinstance(self.value, (bool, int, float, str))):
      raise ValueError(f'a setup value is a bool, int, float, str or tuple of str; got {self.value!r}.')
    if (not self.source.startswith(('paper: ', 'suite choice: ', 'tuned: ')) or
        not self.source.split(': ', 1)[1].strip()):
      raise ValueError(f'a setup value\'s source is paper(...), suite_choice(...) with its reason or tuned(...) with '
                       f'its record; got {self.source!r}.')


@dataclasses.dataclass(frozen=True)
class Setup:
  """One experiment of a paper: `name` (what `--setup` selects), the paper (title, authors, year), the experiment in
  one line, the flags it sets, and the methods the paper compares under it."""
  name: str
  paper: str
  experiment: str
  flags: Mapping[str, Value]
  methods: tuple[str, ...]

  def __post_init__(self):
    where = f'setup {self.name!r}'
    if not self.name.isidentifier() or not self.paper or not self.experiment:
      raise ValueError(f'{where}: a setup needs an identifier name, its paper and its experiment.')
    if not {'task', 'scenario'} <= set(self.flags):
      raise ValueError(f'{where}: a setup names its task and its scenario.')
    if NOT_SHARED & set(self.flags):
      raise ValueError(f'{where}: {", ".join(sorted(NOT_SHARED & set(self.flags)))} are not shared by the methods of '
                       'a comparison, so no setup sets them.')
    if not self.methods or not all(isinstance(name, str) for name in self.methods):
      raise ValueError(f'{where}: a setup lists the methods its paper compares under it.')
    for flag, value in self.flags.items():
      if not isinstance(value, Value):
        raise ValueError(f'{where}: --{flag} is a Value (its value and source); got {value!r}.')

  def source_of(self, flag: str) -> str:
    """`flag`'s source as config.json's `value_sources` records it."""
    return f'setup {self.name}: {self.flags[flag].source}'

  def values(self) -> dict[str, FlagValue]:
    return {flag: value.value for flag, value in self.flags.items()}
