import json
import os
import subprocess
import textwrap

from absl.testing import absltest
import numpy as np
from scipy import stats

from experiment.core import grid as grid_lib
from experiment.core import matrix_runner
from experiment.reporting import results_data
from experiment.reporting import results_pages
from experiment.reporting import staleness

_GRID = '''
name = "{algorithm}_s{seed}"
[sweep]
algorithm = ["m", "b"]
seed = [0, 1, 2, 3, 4]
[report]
columns = ["test_accuracy"]
'''
_CLAIMS = '''
page = "docs/results/p.md"
[[claim]]
text = "m beats b"
where = "Table 1"
paper = "+5 points"
grid = "g"
figure = "test_accuracy"
method = "m"
against = ["b"]
direction = "higher"
'''
_PAGE = '''# P

Prose.

<!-- generated: table g -->
<!-- end generated -->

More prose.

<!-- generated: claims -->
<!-- end generated -->
'''
_M = [0.81, 0.84, 0.80, 0.83, 0.86]
_B = [0.70, 0.75, 0.71, 0.72, 0.74]


def _write(path: str, text: str) -> None:
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, 'w') as f:
    f.write(textwrap.dedent(text))


def _run_directory(root: str, name: str, config: dict, accuracy: float, provenance: bool = True) -> None:
  _write(os.path.join(root, name, 'config.json'), json.dumps(dict(config, total_rounds=1)))
  _write(os.path.join(root, name, 'metrics.csv'), f'round,test_accuracy\n1,{accuracy}\n')
  _write(os.path.join(root, name, 'summary.json'), json.dumps({'final_metrics': {'test_accuracy': accuracy}}))
  if provenance:
    _write(matrix_runner.provenance_path(root, name), json.dumps({'commit': 'c0ffee', 'command': 'matrix g'}))


class ResultsPagesTest(absltest.TestCase):

  def setUp(self):
    super().setUp()
    self.repository = self.create_tempdir().full_path
    _write(os.path.join(self.repository, 'experiment', 'grids', 'g.toml'), _GRID)
    _write(os.path.join(self.repository, 'experiment', 'claims', 'p.toml'), _CLAIMS)
    _write(os.path.join(self.repository, 'docs', 'results', 'p.md'), _PAGE)
    self.root = self.create_tempdir().full_path
    for seed in range(5):
      _run_directory(self.root, f'm_s{seed}', {'algorithm': 'm', 'seed': seed}, _M[seed])
      _run_directory(self.root, f'b_s{seed}', {'algorithm': 'b', 'seed': seed}, _B[seed])
    self.grid = grid_lib.load(os.path.join(self.repository, 'experiment', 'grids', 'g.toml'))

  def _collect(self):
    rows = results_data.collect(self.grid, self.root, ['test_accuracy'])
    _write(results_data.path(self.repository, 'g'), results_data.to_csv(rows))
    return rows

  def _page(self):
    with open(os.path.join(self.repository, 'docs', 'results', 'p.md')) as f:
      return f.read()

  def test_collect_writes_a_row_per_finished_run_with_its_provenance(self):
    _write(os.path.join(self.root, 'm_s5', 'config.json'), json.dumps({'algorithm': 'm', 'seed': 5}))  # Not a run.
    rows = self._collect()
    self.assertLen(rows, 10)
    self.assertEqual(rows[0], {'run': 'm_s0', 'algorithm': 'm', 'seed': '0', 'reported_as': 'm',
                               'test_accuracy': '0.81', 'commit': 'c0ffee', 'command': 'matrix g'})
    self.assertEqual(results_data.read(results_data.path(self.repository, 'g')), rows)

  def test_a_run_that_read_test_labels_is_marked_in_the_table(self):
    for seed in range(5):  # FedEM with --oracle_test_labels, as the report marks it.
      _run_directory(self.root, f'm_s{seed}', {'algorithm': 'fedem', 'seed': seed, 'oracle_test_labels': True},
                     _M[seed])
    rows = self._collect()
    self.assertEqual({row['reported_as'] for row in rows}, {'fedem (oracle: test labels)', 'b'})
    self.assertIn('| fedem (oracle: test labels) | 5 |', results_pages.grid_table('g', self.grid, rows))

  def test_a_finished_run_without_provenance_is_refused(self):
    _run_directory(self.root, 'b_s4', {'algorithm': 'b', 'seed': 4}, 0.7, provenance=False)
    os.remove(matrix_runner.provenance_path(self.root, 'b_s4'))
    with self.assertRaisesRegex(results_data.DataError, r'1 finished runs have no provenance record \(b_s4\)'):
      results_data.collect(self.grid, self.root, ['test_accuracy'])

  def test_regenerated_page_holds_the_data_and_the_verdict_and_check_finds_a_hand_edit(self):
    self._collect()
    page, = results_pages.pages(self.repository)
    generated = results_pages.regenerate_page(self.repository, page)
    m, b = np.array(_M), np.array(_B)
    low, high = stats.t.interval(0.95, 4, loc=np.mean(m - b), scale=stats.sem(m - b))
    self.assertIn(f'| m | 5 | {m.mean():.3f} +- {stats.sem(m):.3f} |', generated)
    self.assertIn(f'| m beats b (Table 1) | +5 points | - | `test_accuracy` | b | 5 | {np.mean(m - b):+.3f} +- '
                  f'{stats.sem(m - b):.3f} | [{low:+.3f}, {high:+.3f}] | reproduced |', generated)
    self.assertTrue(generated.startswith('# P\n\nProse.\n') and 'More prose.' in generated)
    self.assertEqual(results_pages.regenerate_page(self.repository, page, generated), generated)
    self.assertLen(results_pages.stale_pages(self.repository), 1)  # The committed page has empty regions.
    _write(os.path.join(self.repository, 'docs', 'results', 'p.md'), generated)
    self.assertEqual(results_pages.stale_pages(self.repository), [])
    _write(os.path.join(self.repository, 'docs', 'results', 'p.md'), generated.replace('| reproduced |',
                                                                                       '| inconclusive |'))
    (path, line), = results_pages.stale_pages(self.repository)
    self.assertEqual(path, 'docs/results/p.md')
    self.assertIn('| inconclusive |', line)

  def test_a_grid_without_data_has_no_rows_and_its_claims_no_seeds(self):
    page, = results_pages.pages(self.repository)
    generated = results_pages.regenerate_page(self.repository, page)
    self.assertIn('The data file of grid g holds no runs: `bash tools/run_table.sh g ROOT`', generated)
    self.assertIn('| m beats b (Table 1) | +5 points | - | `test_accuracy` | b | 0 | - | - | inconclusive (0 seeds) |',
                  generated)

  def test_an_unknown_region_is_refused(self):
    page, = results_pages.pages(self.repository)
    self._collect()
    with self.assertRaisesRegex(results_pages.PageError, "no generated region is called 'table h'"):
      results_pages.regenerate_page(self.repository, page, _PAGE.replace('table g', 'table h'))


class StalenessTest(absltest.TestCase):

  def _git(self, *arguments):
    return subprocess.run(['git', '-C', self.repository, *arguments], check=True, capture_output=True,
                          text=True).stdout.strip()

  def test_a_change_to_a_file_the_method_imports_flags_its_rows_and_a_change_elsewhere_does_not(self):
    self.repository = self.create_tempdir().full_path
    _write(os.path.join(self.repository, 'algorithms', 'methods', 'm.py'), 'from algorithms.core import helper\n')
    _write(os.path.join(self.repository, 'algorithms', 'core', 'helper.py'), 'import utils.deep\nX = 1\n')
    _write(os.path.join(self.repository, 'utils', 'deep.py'), 'Y = 1\n')
    _write(os.path.join(self.repository, 'utils', 'other.py'), 'Z = 1\n')
    self.assertEqual(staleness.import_closure(self.repository, 'algorithms/methods/m.py'),
                     {'algorithms/methods/m.py', 'algorithms/core/helper.py', 'utils/deep.py'})
    self._git('init', '-q')
    self._git('-c', 'user.name=t', '-c', 'user.email=t@t', 'add', '.')
    self._git('-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '-qm', 'one')
    data_commit = self._git('rev-parse', 'HEAD')
    files = staleness.import_closure(self.repository, 'algorithms/methods/m.py')
    _write(os.path.join(self.repository, 'utils', 'other.py'), 'Z = 2\n')
    self._git('-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '-qam', 'elsewhere')
    self.assertEqual(staleness.changed_since(self.repository, data_commit, files), ())
    _write(os.path.join(self.repository, 'utils', 'deep.py'), 'Y = 2\n')
    self._git('-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '-qam', 'deep')
    self.assertEqual(staleness.changed_since(self.repository, data_commit, files), ('utils/deep.py',))
    self.assertEqual(staleness.changed_since(self.repository, data_commit + '+changes', files),
                     ('ran from a tree with uncommitted changes',))
    self.assertEqual(staleness.changed_since(self.repository, 'unrecorded', files),
                     ('commit unrecorded is not in this repository',))


if __name__ == '__main__':
  absltest.main()
