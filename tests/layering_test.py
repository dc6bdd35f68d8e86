"""Tests the layering rule by reading every module's imports: imports only point down
(binaries -> `experiment/` -> `algorithms/` -> `tasks/` -> `periodic_shift/`, `models/` -> `utils/`), and no two
modules import each other, directly or through others. Test files (`*_test.py`) beside their modules are not part of
the layers: a test may build what it needs from any of them (a scenario's test builds a task)."""

import ast
import os

from absl.testing import absltest

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# A folder's rank; a module may import modules of its own folder or of a lower rank only.
_RANKS = {'experiment': 4, 'algorithms': 3, 'tasks': 2, 'periodic_shift': 1, 'models': 1, 'utils': 0}


def _module_graph() -> dict[str, set[str]]:
  """Every module of the layered folders present -> the modules of those folders it imports."""
  graph = {}
  for folder in _RANKS:
    for directory, _, files in os.walk(os.path.join(_ROOT, folder)):
      for name in files:
        if name.endswith('.py') and not name.endswith('_test.py'):
          path = os.path.join(directory, name)
          module = os.path.relpath(path, _ROOT)[:-3].replace(os.sep, '.')
          graph[module] = _imports(path)
  return graph


def _imports(path: str) -> set[str]:
  """The layered modules `path` imports (`from a.b import c` is module a.b.c when that is a file, else a.b)."""
  imported = set()
  with open(path) as f:
    tree = ast.parse(f.read())
  for node in ast.walk(tree):
    if isinstance(node, ast.ImportFrom) and node.module and node.module.split('.')[0] in _RANKS:
      for alias in node.names:
        candidate = f'{node.module}.{alias.name}'
        is_module = os.path.exists(os.path.join(_ROOT, *candidate.split('.')) + '.py')
        imported.add(candidate if is_module else node.module)
    elif isinstance(node, ast.Import):
      imported.update(alias.name for alias in node.names if alias.name.split('.')[0] in _RANKS)
  return imported


class LayeringTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.graph = _module_graph()

  def test_the_layered_folders_are_all_read(self):
    folders = {module.split('.')[0] for module in self.graph}
    self.assertEqual(folders, set(_RANKS))
    self.assertIn('experiment.core.assembly', self.graph)

  def test_imports_point_only_down(self):
    upward = [f'{module} imports {target}' for module, targets in self.graph.items() for target in targets
              if _RANKS[target.split('.')[0]] > _RANKS[module.split('.')[0]]
              or (_RANKS[target.split('.')[0]] == _RANKS[module.split('.')[0]]
                  and target.split('.')[0] != module.split('.')[0])]
    self.assertEmpty(upward)

  def test_algorithms_do_not_import_scenarios(self):
    self.assertEmpty([module for module, targets in self.graph.items()
                      if module.startswith('algorithms.') and any(t.startswith('periodic_shift') for t in targets)])

  def test_no_cycles(self):
    # Depth-first search; a back edge to a module on the current path is a cycle.
    state, cycles = {}, []

    def visit(module, path):
      state[module] = 'open'
      for target in sorted(self.graph.get(module, ())):
        if state.get(target) == 'open':
          cycles.append(' -> '.join(path[path.index(target):] + [target]))
        elif target not in state:
          visit(target, path + [target])
      state[module] = 'done'

    for module in sorted(self.graph):
      if module not in state:
        visit(module, [module])
    self.assertEmpty(cycles)

  def test_the_check_sees_an_upward_import_and_a_cycle(self):
    # The rules above on a made-up graph: a task importing an algorithm, and two modules importing each other.
    graph = {'tasks.a': {'algorithms.b'}, 'algorithms.b': {'tasks.a'}}
    self.assertGreater(_RANKS['algorithms'], _RANKS['tasks'])
    saved, self.graph = self.graph, graph
    try:
      with self.assertRaises(AssertionError):
        self.test_imports_point_only_down()
      with self.assertRaises(AssertionError):
        self.test_no_cycles()
    finally:
      self.graph = saved


if __name__ == '__main__':
  absltest.main()
