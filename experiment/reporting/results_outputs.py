"""Tables of the results pages that a program prints rather than a grid makes (a check over random instances, a
benchmark): each is declared in `experiment/results_outputs.toml` (its module and flags), produced by
`python -m experiment.results --produce=NAME` and stored as data (`docs/results/data/<NAME>.json`: the table, the
command, the commit and a fingerprint of the module's code), and a page shows it in a region
`<!-- generated: output NAME -->`.

The module runs from the repository as `python -m MODULE FLAGS`; its tables are the runs of consecutive output lines
that start with `|`. The region shows them all, a blank line between, or the one the declaration's `table` names.
It must run from committed code (the commit vouches for the table), and the suite fails when the code it imports
changes (`staleness`), as for a grid's rows.
"""

import dataclasses
import json
import os
import subprocess
import sys
import tomllib

from experiment.reporting import results_data
from experiment.reporting import staleness

DECLARATIONS = os.path.join('experiment', 'results_outputs.toml')


class OutputError(ValueError):
  """An output that cannot be declared or produced; its message says why."""


@dataclasses.dataclass(frozen=True)
class Output:
  name: str
  module: str  # Dotted, run with `python -m`.
  arguments: tuple[str, ...]
  table: int = 0  # Which of the tables it prints, from 1; 0: all of them.

  def command(self) -> str:
    return ' '.join(['python -m', self.module, *self.arguments])

  def module_path(self) -> str:
    return os.path.join(*self.module.split('.')) + '.py'


def declared(repository: str) -> dict[str, Output]:
  with open(os.path.join(repository, DECLARATIONS), 'rb') as f:
    table = tomllib.load(f)
  outputs = {}
  for name, entry in table.items():
    unknown = set(entry) - {'module', 'arguments', 'table'}
    table = entry.get('table', 0)
    if unknown or 'module' not in entry or not isinstance(table, int) or table < 0:
      raise OutputError(f'{DECLARATIONS}: [{name}] needs `module` and may have `arguments` and `table` (an integer, '
                        f'from 1); unknown: {", ".join(sorted(unknown)) or "-"}, table: {table!r}.')
    outputs[name] = Output(name, entry['module'], tuple(entry.get('arguments', ())), table)
  return outputs


def _git(repository: str, *arguments: str) -> str:
  return subprocess.run(['git', '-C', repository, *arguments], check=True, capture_output=True, text=True).stdout


def _tables(printed: str) -> list[str]:
  """The runs of consecutive lines starting with `|`, each a table ending in a newline."""
  tables, lines = [], []
  for line in printed.splitlines() + ['']:
    if line.startswith('|'):
      lines.append(line)
    elif lines:
      tables.append('\n'.join(lines) + '\n')
      lines = []
  return tables


def produce(repository: str, output: Output) -> dict:
  """Runs the output's module and returns what `results_data.read_output` gives once written (module docstring)."""
  code = staleness.code_of(staleness.tree_reader(repository), output.module_path())
  if not code:
    raise OutputError(f'{output.name}: no module {output.module_path()} in {repository}.')
  changed = _git(repository, 'status', '--porcelain', '--', *sorted(code)).strip()
  if changed:
    raise OutputError(f'{output.name}: its code has uncommitted changes ({changed.splitlines()[0].strip()}, ...): '
                      'commit them, so the commit vouches for the table.')
  # Taken before it runs: the code it runs is this commit's.
  commit = _git(repository, 'rev-parse', 'HEAD').strip()
  fingerprint = staleness.code_fingerprint(staleness.tree_reader(repository), output.module_path())
  ran = subprocess.run([sys.executable, '-m', output.module, *output.arguments], cwd=repository, capture_output=True,
                       text=True, env=dict(os.environ, PYTHONPATH=repository))
  tables = _tables(ran.stdout)
  if ran.returncode or not tables or len(tables) < output.table:
    raise OutputError(f'{output.name}: `{output.command()}` exited {ran.returncode} with {len(tables)} tables, '
                      f'table {output.table or "any"} declared: {ran.stderr.strip()[-500:]}')
  shown = '\n'.join(tables) if output.table == 0 else tables[output.table - 1]
  return {'table': shown, 'command': output.command(), 'commit': commit, 'code': fingerprint}


def write(repository: str, name: str, produced: dict) -> None:
  with open(results_data.output_path(repository, name), 'w') as f:
    json.dump(produced, f, indent=1)
    f.write('\n')


def stale(repository: str) -> list[str]:
  """The declared outputs not produced yet, or produced by other code than the tree's."""
  read_tree = staleness.tree_reader(repository)
  return [name for name, output in declared(repository).items()
          if (stored := results_data.read_output(repository, name)) is None
          or stored['code'] != staleness.code_fingerprint(read_tree, output.module_path())]
