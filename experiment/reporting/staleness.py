"""Which claims' data may be moved by code changed since they ran: a grid's row is stale when a commit after the
one it ran from changed a file that a method of a claim on that grid imports (the method's module and every
repository module it imports, directly or not), or when it ran from a tree with uncommitted changes or from a commit
this repository does not have.

`python -m experiment.results --stale` lists them with the grids to rerun; a change to a method thus flags exactly
the claims it may move, and a change elsewhere (docs, the report, another method) flags none.
"""

import ast
import dataclasses
import os
import subprocess
from typing import Sequence

from algorithms import registry
from experiment.reporting import claims as claims_lib
from experiment.reporting import results_data

_DIRTY = '+changes'


@dataclasses.dataclass(frozen=True)
class StaleGrid:
  grid: str
  commit: str  # The rows' commit.
  rows: int
  changed: tuple[str, ...]  # Files of the claims' methods changed since (or the reason, for an unusable commit).


def _module_file(repository: str, module: str):
  candidate = os.path.join(repository, *module.split('.'))
  for path in (candidate + '.py', os.path.join(candidate, '__init__.py')):
    if os.path.exists(path):
      return os.path.relpath(path, repository)
  return None


def import_closure(repository: str, relative_path: str) -> set[str]:
  """`relative_path` and every repository file it imports, directly or through others (read, not executed)."""
  seen, pending = set(), [relative_path]
  while pending:
    current = pending.pop()
    if current in seen:
      continue
    seen.add(current)
    with open(os.path.join(repository, current)) as f:
      tree = ast.parse(f.read())
    for node in ast.walk(tree):
      names = []
      if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
      elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
        names = [node.module] + [f'{node.module}.{alias.name}' for alias in node.names]
      for name in names:
        found = _module_file(repository, name)
        if found and found not in seen:
          pending.append(found)
  return seen


def method_files(repository: str, methods: Sequence[str]) -> set[str]:
  files = set()
  for name in methods:
    files |= import_closure(repository, os.path.relpath(registry.METHODS[name].module.__file__, repository))
  return files


def _git(repository: str, *arguments: str) -> subprocess.CompletedProcess:
  return subprocess.run(['git', '-C', repository, *arguments], capture_output=True, text=True)


def changed_since(repository: str, commit: str, files: Sequence[str]) -> tuple[str, ...]:
  """The `files` changed by a commit after `commit` (to HEAD), or the reason `commit` cannot vouch for them."""
  if commit.endswith(_DIRTY):
    return ('ran from a tree with uncommitted changes',)
  if _git(repository, 'cat-file', '-e', f'{commit}^{{commit}}').returncode:
    return (f'commit {commit} is not in this repository',)
  changed = _git(repository, 'diff', '--name-only', commit, 'HEAD', '--', *sorted(files)).stdout.split()
  return tuple(sorted(changed))


def stale_grids(repository: str, page_claims: Sequence[claims_lib.Claim]) -> list[StaleGrid]:
  """Each grid of `page_claims` whose rows of some commit are stale (module docstring)."""
  methods: dict[str, set[str]] = {}
  for claim in page_claims:
    methods.setdefault(claim.grid, set()).update({claim.method, *claim.against})
  stale = []
  for grid, names in sorted(methods.items()):
    if not os.path.exists(results_data.path(repository, grid)):
      continue  # No rows, nothing to be stale.
    rows = results_data.read(results_data.path(repository, grid))
    files = method_files(repository, sorted(names))
    for commit in sorted({row[results_data.COMMIT] for row in rows}):
      changed = changed_since(repository, commit, sorted(files))
      if changed:
        stale.append(StaleGrid(grid, commit, sum(row[results_data.COMMIT] == commit for row in rows), changed))
  return stale
