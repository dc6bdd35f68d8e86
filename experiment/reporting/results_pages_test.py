import dataclasses
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
from experiment.reporting import results_outputs
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
def _method_code(commit: str, algorithm: str) -> str:
  return f'{commit}:{algorithm}'


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


def _page_repository(repository: str, page: str) -> None:
  """Writes the grid g, the claims on page p and the page itself under `repository`."""
  _write(os.path.join(repository, 'experiment', 'grids', 'g.toml'), _GRID)
  _write(os.path.join(repository, 'experiment', 'claims', 'p.toml'), _CLAIMS)
  _write(os.path.join(repository, 'docs', 'results', 'p.md'), page)


class ResultsPagesTest(absltest.TestCase):

  def setUp(self):
    super().setUp()
    self.repository = self.create_tempdir().full_path
    _page_repository(self.repository, _PAGE)
    self.root = self.create_tempdir().full_path
    for seed in range(5):
      _run_directory(self.root, f'm_s{seed}', {'algorithm': 'm', 'seed': seed}, _M[seed])
      _run_directory(self.root, f'b_s{seed}', {'algorithm': 'b', 'seed': seed}, _B[seed])
    self.grid = grid_lib.load(os.path.join(self.repository, 'experiment', 'grids', 'g.toml'))

  def _collect(self):
    rows = results_data.collect(self.grid, self.root, ['test_accuracy'], _method_code)
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
                               'test_accuracy': '0.81', 'commit': 'c0ffee', 'method_code': 'c0ffee:m',
                               'command': 'matrix g'})
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
      results_data.collect(self.grid, self.root, ['test_accuracy'], _method_code)

  def test_a_run_from_code_no_commit_shows_is_refused(self):
    with self.assertRaisesRegex(results_data.DataError, r'10 finished runs ran from code this repository cannot show '
                                r'\(m_s0 \(c0ffee\), m_s1 \(c0ffee\), m_s2'):
      results_data.collect(self.grid, self.root, ['test_accuracy'], lambda commit, algorithm: None)

  def test_collecting_a_part_of_the_grid_replaces_its_rows_and_keeps_the_others(self):
    rows = self._collect()
    part = self.create_tempdir().full_path
    _run_directory(part, 'b_s3', {'algorithm': 'b', 'seed': 3}, 0.5)
    _run_directory(part, 'm_s9', {'algorithm': 'm', 'seed': 9}, 0.5)  # Outside the grid.
    collected = results_data.collect(self.grid, part, ['test_accuracy'], _method_code)
    merged = results_data.merge(self.grid, rows, collected)
    self.assertEqual([row['run'] for row in merged], [row['run'] for row in rows])
    self.assertEqual([row['test_accuracy'] for row in merged if row['run'] == 'b_s3'], ['0.5'])
    self.assertEqual([row for row in merged if row['run'] != 'b_s3'], [row for row in rows if row['run'] != 'b_s3'])
    self.assertEqual(results_data.merge(self.grid, rows[:3], collected), [*rows[:3], *collected])
    with self.assertRaisesRegex(results_data.DataError, 'the data file has the columns run, algorithm, seed, '
                                'reported_as, test_accuracy, commit, method_code, command, the runs collected'):
      results_data.merge(self.grid, rows, results_data.collect(self.grid, part, ['loss'], _method_code))

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

  def test_a_grid_no_claim_reads_has_its_table_too(self):
    page, = results_pages.pages(self.repository)
    rows = self._collect()
    _write(os.path.join(self.repository, 'experiment', 'grids', 'h.toml'), _GRID)
    _write(results_data.path(self.repository, 'h'), results_data.to_csv([r for r in rows if r['algorithm'] == 'b']))
    generated = results_pages.regenerate_page(self.repository, page, _PAGE.replace('table g', 'table h'))
    b = np.array(_B)
    self.assertIn(f'| b | 5 | {b.mean():.3f} +- {stats.sem(b):.3f} |\n<!-- end generated -->', generated)

  def test_the_seeds_region_shows_each_run_in_its_seeds_column_and_leaves_out_settings_without_the_figure(self):
    page, = results_pages.pages(self.repository)
    rows = self._collect()
    for row in rows:  # b does not report the figure; m's seed 3 did not run.
      if row['algorithm'] == 'b':
        row['test_accuracy'] = ''
      if row['run'] == 'm_s4':  # A hair below zero is written as zero.
        row['test_accuracy'] = '-0.00001'
    rows = [row for row in rows if row['run'] != 'm_s3']
    _write(results_data.path(self.repository, 'g'), results_data.to_csv(rows))
    generated = results_pages.regenerate_page(self.repository, page,
                                              _PAGE.replace('table g', 'seeds g test_accuracy'))
    self.assertIn('| algorithm | seed 0 | seed 1 | seed 2 | seed 4 |\n|---|---|---|---|---|\n'
                  f'| m | {_M[0]:.3f} | {_M[1]:.3f} | {_M[2]:.3f} | 0.000 |\n<!-- end generated -->', generated)
    with self.assertRaisesRegex(results_pages.PageError, "grid g does not report 'train_accuracy'"):
      results_pages.regenerate_page(self.repository, page, _PAGE.replace('table g', 'seeds g train_accuracy'))

  def test_a_claims_rows_departures_are_those_its_methods_runs_left_at_their_defaults(self):
    grid = grid_lib.Grid(sweep=(('algorithm', ('fedtem', 'fedtkm', 'vanilla')), ('seed', ('0',))),
                         flags=(('center_decay', '0.0'),), name='{algorithm}_s{seed}')
    rows = [{'run': f'{name}_s0', 'algorithm': name} for name in ('fedtem', 'fedtkm', 'vanilla')]
    # FedTEM's decay stays 0.7 (Eq. 10 is 0); the grid sets FedTKM's to Eq. 12's 0; Vanilla has no settings.
    self.assertEqual(results_pages.departures_in_effect(grid, rows, {'fedtem', 'fedtkm', 'vanilla'}),
                     ['fedtem: statistics_decay=0.7'])
    self.assertEqual(results_pages.departures_in_effect(grid, rows, {'fedtkm', 'vanilla'}), [])
    self.assertEqual(results_pages.departures_in_effect(grid, rows[:1], {'fedtkm'}), [])
    self._collect()
    page, = results_pages.pages(self.repository)
    self.assertIn('| verdict | departures in effect |', results_pages.regenerate_page(self.repository, page))

  def test_an_unknown_region_is_refused(self):
    page, = results_pages.pages(self.repository)
    self._collect()
    with self.assertRaisesRegex(results_pages.PageError, "no generated region is called 'table h'"):
      results_pages.regenerate_page(self.repository, page, _PAGE.replace('table g', 'table h'))


class StalenessTest(absltest.TestCase):

  def setUp(self):
    super().setUp()
    self.repository = self.create_tempdir().full_path
    _write(os.path.join(self.repository, 'algorithms', 'methods', 'm.py'),
           '"""M."""\nfrom algorithms.core import helper\n')
    _write(os.path.join(self.repository, 'algorithms', 'core', 'helper.py'),
           'import utils.deep\n\ndef f(x):\n  """Doubles."""\n  return 2 * x\n')
    _write(os.path.join(self.repository, 'utils', 'deep.py'), 'Y = 1\n')
    _write(os.path.join(self.repository, 'utils', 'other.py'), 'Z = 1\n')
    self.read = staleness.tree_reader(self.repository)

  def _fingerprint(self):
    return staleness.code_fingerprint(self.read, 'algorithms/methods/m.py')

  def _git(self, *arguments):
    return subprocess.run(['git', '-C', self.repository, '-c', 'user.name=t', '-c', 'user.email=t@t', *arguments],
                          check=True, capture_output=True, text=True).stdout.strip()

  def test_the_code_of_a_method_is_its_module_and_every_file_it_imports(self):
    self.assertEqual(set(staleness.code_of(self.read, 'algorithms/methods/m.py')),
                     {'algorithms/methods/m.py', 'algorithms/core/helper.py', 'utils/deep.py'})
    self.assertRegex(self._fingerprint(), r'^[0-9a-f]{16}$')
    self.assertEqual(staleness.code_fingerprint(self.read, 'algorithms/methods/absent.py'), '')

  def test_a_change_two_imports_down_moves_the_fingerprint_and_docstrings_comments_or_layout_do_not(self):
    before = self._fingerprint()
    _write(os.path.join(self.repository, 'utils', 'other.py'), 'Z = 2\n')
    _write(os.path.join(self.repository, 'algorithms', 'core', 'helper.py'),
           'import utils.deep  # A comment.\n\n\ndef f(x):\n  """Doubles its argument,\n  reworded."""\n'
           '  return (2 *\n          x)\n')
    self.assertEqual(self._fingerprint(), before)
    _write(os.path.join(self.repository, 'utils', 'deep.py'), 'Y = 2\n')
    self.assertNotEqual(self._fingerprint(), before)

  def test_a_modules_setting_sources_are_documentation_and_its_defaults_are_code(self):
    def fingerprint_with(text):
      _write(os.path.join(self.repository, 'utils', 'deep.py'), text)
      return self._fingerprint()
    bare = fingerprint_with("Y = setting(0.7, 'a decay.')\n")
    self.assertEqual(fingerprint_with("Y = setting(0.7, 'a decay.')\nSETTING_SOURCES = {'y': 'paper: Eq. 10'}\n"),
                     bare)
    self.assertEqual(fingerprint_with("SETTING_SOURCES: dict = {'y': 'departure: 0 fails'}\n"
                                      "Y = setting(0.7, 'a decay.')\n"), bare)
    self.assertNotEqual(fingerprint_with("Y = setting(0.0, 'a decay.')\nSETTING_SOURCES = {}\n"), bare)
    self.assertNotEqual(fingerprint_with("Y = setting(0.7, 'a decay.')\nOTHER_SOURCES = {}\n"), bare)

  def test_a_commit_shows_the_code_it_had_and_an_uncommitted_or_unknown_tree_shows_none(self):
    self._git('init', '-q')
    self._git('add', '.')
    self._git('commit', '-qm', 'one')
    commit = self._git('rev-parse', 'HEAD')
    ran = self._fingerprint()
    _write(os.path.join(self.repository, 'utils', 'deep.py'), 'Y = 2\n')
    self._git('commit', '-qam', 'deep')
    self.assertEqual(staleness.code_fingerprint(staleness.commit_reader(self.repository, commit),
                                           'algorithms/methods/m.py'), ran)
    self.assertNotEqual(self._fingerprint(), ran)
    self.assertIsNone(staleness.commit_reader(self.repository, commit + '+changes'))
    self.assertIsNone(staleness.commit_reader(self.repository, 'unrecorded'))

  def test_rows_whose_method_code_differs_or_is_unrecorded_are_stale(self):
    rows = [{'run': 'a', 'algorithm': 'm', 'method_code': 'x'}, {'run': 'b', 'algorithm': 'm', 'method_code': 'y'},
            {'run': 'c', 'algorithm': 'b', 'method_code': 'z'}, {'run': 'd', 'algorithm': 'b', 'method_code': ''}]
    code_now = {'m': 'x', 'b': 'z'}.get
    self.assertEqual([row['run'] for row in staleness.stale_rows(rows, code_now)], ['b', 'd'])


class OutputsTest(absltest.TestCase):
  """A printed table as data: produced from committed code, shown in its region, stale when its code changes."""

  def setUp(self):
    super().setUp()
    self.repository = self.create_tempdir().full_path
    _page_repository(self.repository, _PAGE + '\n<!-- generated: output squares -->\n<!-- end generated -->\n')
    _write(os.path.join(self.repository, 'experiment', 'results_outputs.toml'),
           '[squares]\nmodule = "tools.squares"\narguments = ["3"]\n')
    _write(os.path.join(self.repository, 'tools', 'squares.py'),
           'import sys\nfrom tools import power\nprint("Squares:")\nprint("| n | n^2 |")\n'
           'for n in range(1, int(sys.argv[1]) + 1):\n  print(f"| {n} | {power.power(n)} |")\n'
           'print()\nprint("| n | n^3 |")\nprint("| 2 | 8 |")\n')
    _write(os.path.join(self.repository, 'tools', 'power.py'), 'def power(n):\n  return n ** 2\n')
    os.makedirs(os.path.join(self.repository, 'docs', 'results', 'data'))
    self._git('init', '-q')
    self._git('add', '.')
    self._git('commit', '-qm', 'one')
    self.output = results_outputs.declared(self.repository)['squares']

  def _git(self, *arguments):
    return subprocess.run(['git', '-C', self.repository, '-c', 'user.name=t', '-c', 'user.email=t@t', *arguments],
                          check=True, capture_output=True, text=True).stdout.strip()

  def test_the_printed_table_is_stored_with_its_provenance_and_shown_in_its_region(self):
    self.assertEqual(results_outputs.stale(self.repository), ['squares'])  # Not produced yet.
    produced = results_outputs.produce(self.repository, self.output)
    self.assertEqual(produced['table'], '| n | n^2 |\n| 1 | 1 |\n| 2 | 4 |\n| 3 | 9 |\n\n| n | n^3 |\n| 2 | 8 |\n')
    self.assertEqual(produced['command'], 'python -m tools.squares 3')
    self.assertEqual(produced['commit'], self._git('rev-parse', 'HEAD'))
    results_outputs.write(self.repository, 'squares', produced)
    self.assertEqual(results_data.read_output(self.repository, 'squares'), produced)
    self.assertEqual(results_outputs.stale(self.repository), [])
    page, = results_pages.pages(self.repository)
    generated = results_pages.regenerate_page(self.repository, page)
    self.assertIn('<!-- generated: output squares -->\n| n | n^2 |\n| 1 | 1 |\n| 2 | 4 |\n| 3 | 9 |\n\n'
                  '| n | n^3 |\n| 2 | 8 |\n<!-- end generated -->', generated)

  def test_the_declared_table_of_several_is_the_one_stored(self):
    squares = results_outputs.Output('squares', 'tools.squares', ('3',), table=1)
    self.assertEqual(results_outputs.produce(self.repository, squares)['table'].splitlines()[-1], '| 3 | 9 |')
    cubes = results_outputs.Output('cubes', 'tools.squares', ('3',), table=2)
    self.assertEqual(results_outputs.produce(self.repository, cubes)['table'], '| n | n^3 |\n| 2 | 8 |\n')
    with self.assertRaisesRegex(results_outputs.OutputError, '2 tables, table 3 declared'):
      results_outputs.produce(self.repository, dataclasses.replace(cubes, table=3))

  def test_a_change_to_code_the_program_imports_makes_it_stale_and_uncommitted_code_is_refused(self):
    results_outputs.write(self.repository, 'squares', results_outputs.produce(self.repository, self.output))
    _write(os.path.join(self.repository, 'tools', 'power.py'), 'def power(n):\n  return n * n * 1\n')
    self.assertEqual(results_outputs.stale(self.repository), ['squares'])
    with self.assertRaisesRegex(results_outputs.OutputError, 'uncommitted changes .*tools/power.py'):
      results_outputs.produce(self.repository, self.output)
    self._git('commit', '-qam', 'two')
    results_outputs.write(self.repository, 'squares', results_outputs.produce(self.repository, self.output))
    self.assertEqual(results_outputs.stale(self.repository), [])


if __name__ == '__main__':
  absltest.main()
