"""Which results rows the code may have moved since they ran: a data file's row records its `method_code`, a
fingerprint of the code its method ran (the method's module and every repository module it imports, directly or not,
as of the commit the run came from), and the row is stale when the tree's code for that method has another.

The fingerprint reads each file's syntax tree without its docstrings and without its module's `SETTING_SOURCES` (where
each setting's default comes from, `algorithms.registry`; comments and layout are not in the tree either), so
rewording a docstring, citing a default's source or wrapping a line flags nothing, while any change to what runs flags the rows of every method
that imports it, however deep. It is computed from file contents, not from git history, so the check runs anywhere
the sources are (a Bazel test's runfiles, a shallow clone): `tests/results_check_test.py` fails on a stale row, and
`python -m experiment.results --stale` names the grids and methods to rerun.
"""

import ast
import functools
import os
import subprocess
from typing import Callable, Optional, Sequence
import uuid

from experiment.reporting import results_data
_DIRTY = '+changes'

# Reads a repository-relative path: its text, or None when there is no such file.
Reader = Callable[[str], Optional[str]]


def tree_reader(repository: str) -> Reader:
  def read(relative_path: str) -> Optional[str]:
    path = os.path.join(repository, relative_path)
    if not os.path.isfile(path):
      return None
    with open(path) as f:
      return f.read()
  return read


def commit_reader(repository: str, commit: str) -> Optional[Reader]:
  """The files as of `commit`, or None when `commit` cannot vouch for them (a tree with uncommitted changes, a commit
  this repository does not have)."""
  if commit.endswith(_DIRTY) or subprocess.run(['git', '-C', repository, 'cat-file', '-e', f'{commit}^{{commit}}'],
                                               capture_output=True).returncode:
    return None

  @functools.cache
  def read(relative_path: str) -> Optional[str]:
    shown = subprocess.run(['git', '-C', repository, 'show', f'{commit}:{relative_path}'], capture_output=True,
                           text=True)
    return None if shown.returncode else shown.stdout
  return read


def _module_file(read: Reader, module: str) -> Optional[tuple[str, str]]:
  candidate = os.path.join(*module.split('.'))
  for path in (candidate + '.py', os.path.join(candidate, '__init__.py')):
    text = read(path)
    if text is not None:
      return path, text
  return None


def _imported_modules(tree: ast.AST) -> list[str]:
  names = []
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      names += [alias.name for alias in node.names]
    elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
      names += [node.module] + [f'{node.module}.{alias.name}' for alias in node.names]
  return names


# A plug-in module's table of where each of its settings' defaults comes from (`algorithms.registry`): it documents
# the defaults and does not run.
SETTING_SOURCES = 'SETTING_SOURCES'


def _is_setting_sources(statement: ast.stmt) -> bool:
  targets = getattr(statement, 'targets', None) or [getattr(statement, 'target', None)]
  return isinstance(statement, (ast.Assign, ast.AnnAssign)) and [getattr(target, 'id', None) for target in targets] == [
      SETTING_SOURCES]


def _without_documentation(tree: ast.Module) -> ast.AST:
  """`tree` without its docstrings and without its module-level `SETTING_SOURCES`."""
  tree.body = [statement for statement in tree.body if not _is_setting_sources(statement)]
  for node in ast.walk(tree):
    if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
      first = node.body[0]
      if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        node.body = node.body[1:] or [ast.Pass()]
  return tree


def code_of(read: Reader, relative_path: str) -> dict[str, str]:
  """`relative_path` and every repository file it imports, directly or through others (read, not executed): each
  path -> its syntax tree without docstrings and `SETTING_SOURCES`, dumped."""
  code, pending = {}, [relative_path]
  while pending:
    current = pending.pop()
    if current in code:
      continue
    text = read(current)
    if text is None:
      continue
    tree = ast.parse(text)
    code[current] = ast.dump(_without_documentation(tree))
    for name in _imported_modules(tree):
      found = _module_file(read, name)
      if found and found[0] not in code:
        pending.append(found[0])
  return code


def code_fingerprint(read: Reader, relative_path: str) -> str:
  """A fingerprint of `code_of(read, relative_path)`: 16 hexadecimal digits of a name-based (SHA-1) UUID of every
  path and its code, '' when the file is not there."""
  code = code_of(read, relative_path)
  if not code:
    return ''
  return uuid.uuid5(uuid.NAMESPACE_URL, ''.join(f'{path}\0{code[path]}\0' for path in sorted(code))).hex[:16]


def _methods():
  # Imported here: the registry imports TensorFlow (through the methods), which fingerprinting files does not need.
  from algorithms import registry  # pylint: disable=g-import-not-at-top
  return registry.METHODS


def method_path(repository: str, name: str) -> str:
  """Method `name`'s module, relative to `repository`."""
  return os.path.relpath(_methods()[name].module.__file__, repository)


def method_code(repository: str, read: Reader, name: str) -> str:
  """The fingerprint of the code method `name` runs, read through `read` ('' for a method or module not there)."""
  return code_fingerprint(read, method_path(repository, name)) if name in _methods() else ''


def stale_rows(rows: Sequence[dict], code_now: Callable[[str], str]) -> list[dict]:
  """The rows whose method's code now (`code_now(algorithm)`, e.g. `method_code` of the tree) differs from what they
  ran, or whose code is unrecorded."""
  current = {name: code_now(name) for name in {row['algorithm'] for row in rows}}
  return [row for row in rows
          if not row.get(results_data.METHOD_CODE) or row[results_data.METHOD_CODE] != current[row['algorithm']]]


def tree_method_code(repository: str) -> Callable[[str], str]:
  """`method_code` of the files under `repository`, per method name."""
  read = tree_reader(repository)
  return lambda name: method_code(repository, read, name)
