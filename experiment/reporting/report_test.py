"""The report: its numbers equal a recomputation from the runs' CSVs, the best method is marked, every plot the
page shows exists, and a directory without runs is one line."""

import csv
import dataclasses
import json
import os
import tempfile

from absl.testing import absltest
import numpy as np

from experiment.reporting import report_plots
from experiment.reporting import report_tables
from experiment.reporting import report_writer
from experiment.reporting import run_results

_PNG = b'\x89PNG\r\n\x1a\n'


def _write_run(root: str, name: str, config: dict, rows: list[dict], windows=None) -> None:
  """A run directory as run_experiment leaves it: config.json, metrics.csv and summary.json (final_metrics: the last
  evaluated row and the mean over the last two evaluations)."""
  os.makedirs(os.path.join(root, name))
  with open(os.path.join(root, name, 'config.json'), 'w') as f:
    json.dump(config, f)
  columns = sorted({key for row in rows for key in row})
  with open(os.path.join(root, name, 'metrics.csv'), 'w', newline='') as f:
    writer = csv.DictWriter(f, columns)
    writer.writeheader()
    writer.writerows(rows)
  evaluated = [row for row in rows if 'test_accuracy' in row]
  final = dict(evaluated[-1], **{f'{key}_last_period_mean': np.mean([r[key] for r in evaluated[-2:]])
                                 for key in evaluated[-1] if key in ('test_accuracy',) or key.startswith('mixed_q')})
  summary = {'final_metrics': final}
  if windows is not None:
    summary['window_metrics'] = windows
  with open(os.path.join(root, name, 'summary.json'), 'w') as f:
    json.dump(summary, f)


def _rows(rng, rounds: int, level: float, routing: bool) -> list[dict]:
  """Methods that route are given a temporal prior of q(t) (FedTKM's `prior`, an input) and learn the share of the
  day cluster (`q_bar`)."""
  rows = []
  for r in range(1, rounds + 1):
    row = {'round': r, 'q': 0.5 + 0.5 * np.cos(2 * np.pi * r / 4), 'train_accuracy': rng.uniform()}
    if routing:
      row['prior'] = row['q']
      row['q_bar'] = row['q'] + 0.1 * rng.uniform()
    if r % 2 == 0:
      row.update(test_accuracy=level + 0.05 * rng.uniform(), test_day_accuracy=level + 0.1 * rng.uniform(),
                 test_night_accuracy=level - 0.1 * rng.uniform(),
                 **{f'mixed_q{q:g}_accuracy': level - 0.1 * q * (1 - q) * rng.uniform() for q in (0, 0.5, 1)})
      if routing:
        row['routing_accuracy'] = rng.uniform(0.5, 1.0)
    rows.append(row)
  return rows


def _table(path: str) -> dict[tuple[str, str], dict]:
  with open(path) as f:
    return {(row['algorithm'], row['shift_p']): row for row in csv.DictReader(f)}


class ReportTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):  # One root and its report for every test (writing the report is the slow part).
    super().setUpClass()
    cls.root = tempfile.mkdtemp()
    rng = np.random.default_rng(0)
    # Two methods x two values of p x three seeds; FedTKM routes and is better at p = 1; one run is still going.
    for method, level in (('vanilla', 0.6), ('fedtkm', 0.7)):
      for p in (1.0, 4.0):
        for seed in range(3):
          # FedTKM's runs at p = 4 take another server step: that comparison is not on one footing. Its own
          # parameter (num_branches) differs in both and marks neither.
          config = {'algorithm': method, 'shift_p': p, 'seed': seed, 'task': 'synthetic',
                    'server_optimizer': 'sgd' if (method, p) == ('fedtkm', 4.0) else 'adam',
                    'num_branches': 2 if method == 'fedtkm' else 1}
          level_p = level if p == 1.0 else 0.65
          windows = [{'window': 1, 'drop': 0.1 * (seed + 1), 'max_accuracy': 0.8}] if method == 'fedtkm' else None
          _write_run(cls.root, f'{method}_p{p:g}_s{seed}', config, _rows(rng, 8, level_p, method == 'fedtkm'),
                     windows)
    os.makedirs(os.path.join(cls.root, 'running'))
    with open(os.path.join(cls.root, 'running', 'config.json'), 'w') as f:
      json.dump({'algorithm': 'vanilla', 'shift_p': 1.0, 'seed': 9, 'task': 'synthetic', 'server_optimizer': 'adam',
                 'num_branches': 1}, f)
    with open(os.path.join(cls.root, 'running', 'metrics.csv'), 'w') as f:
      f.write('round,test_accuracy\n2,0.1\n')
    cls.output = os.path.join(cls.root, 'report')
    cls.files = report_writer.write(cls.root, cls.output)

  def _recomputed(self, method: str, p: float, column: str) -> list[float]:
    """`column` of the last evaluation of each seed's metrics.csv."""
    values = []
    for seed in range(3):
      with open(os.path.join(self.root, f'{method}_p{p:g}_s{seed}', 'metrics.csv')) as f:
        evaluated = [row for row in csv.DictReader(f) if row['test_accuracy']]
      values.append(float(evaluated[-1][column]))
    return values

  def test_tables_equal_a_recomputation_from_the_csvs(self):
    table = _table(os.path.join(self.output, 'tables.csv'))
    self.assertLen(table, 4)  # The running run is not in the tables.
    for (method, p), row in table.items():
      self.assertEqual(row['seeds'], '3')
      values = self._recomputed(method, float(p), 'test_accuracy')
      self.assertAlmostEqual(float(row['test_accuracy_mean']), np.mean(values), places=5)
      self.assertAlmostEqual(float(row['test_accuracy_se']), np.std(values, ddof=1) / np.sqrt(3), places=5)
    routing = self._recomputed('fedtkm', 1.0, 'routing_accuracy')
    self.assertAlmostEqual(float(table[('fedtkm', '1.0')]['routing_accuracy_mean']), np.mean(routing), places=5)
    self.assertEqual(table[('vanilla', '1.0')]['routing_accuracy_mean'], '')
    # Window drops 0.1, 0.2, 0.3 over the seeds.
    self.assertAlmostEqual(float(table[('fedtkm', '4.0')]['window_drop_mean']), 0.2, places=5)
    windows = _table(os.path.join(self.output, 'per_window.csv'))  # Each window's figures, here window 1's.
    self.assertAlmostEqual(float(windows[('fedtkm', '4.0')]['window_1_drop_mean']), 0.2, places=5)
    self.assertAlmostEqual(float(windows[('fedtkm', '4.0')]['window_1_drop_se']), 0.1 / np.sqrt(3), places=5)
    self.assertEqual(windows[('vanilla', '4.0')]['window_1_drop_mean'], '')
    self.assertNotIn('window_1_recovery_rounds_mean', windows[('fedtkm', '4.0')])  # No window recovered.
    domains = _table(os.path.join(self.output, 'per_domain.csv'))
    self.assertAlmostEqual(float(domains[('vanilla', '4.0')]['test_night_accuracy_mean']),
                           np.mean(self._recomputed('vanilla', 4.0, 'test_night_accuracy')), places=5)

  def test_the_best_method_of_each_comparison_is_marked(self):
    table = _table(os.path.join(self.output, 'tables.csv'))
    for p in ('1.0', '4.0'):
      means = {m: float(table[(m, p)]['test_accuracy_mean']) for m in ('vanilla', 'fedtkm')}
      best = max(means, key=means.get)
      self.assertEqual({m: table[(m, p)]['test_accuracy_best'] for m in means},
                       {m: '1' if m == best else '0' for m in means})
    self.assertEqual(table[('fedtkm', '1.0')]['test_accuracy_best'], '1')  # 0.7 against 0.6.
    with open(os.path.join(self.output, 'tables.md')) as f:
      fedtkm_p1 = next(line for line in f if line.startswith('| fedtkm | 1.0 |'))
    self.assertIn('**', fedtkm_p1)

  def test_the_page_shows_every_plot_and_table(self):
    with open(os.path.join(self.output, 'index.html')) as f:
      page = f.read()
    plots = [name for name in self.files if name.endswith('.png')]
    # Per value of p: accuracy, per-mode, routing, learned share, per-domain and mixed-batch plots; and accuracy
    # against p.
    self.assertCountEqual(plots, [f'{kind}_{i}.png' for i in (0, 1) for kind in
                                  ('accuracy', 'modes', 'routing', 'learned', 'domains', 'mixed')] +
                          ['swept_shift_p.png'])
    for name in plots:
      self.assertIn(f'<img src="{name}"', page)
      self.assertIn(name[:-len('.png')] + '.svg', self.files)
      with open(os.path.join(self.output, name[:-len('.png')] + '.svg')) as f:
        self.assertIn('<svg', f.read(1000))
      with open(os.path.join(self.output, name), 'rb') as f:
        content = f.read()
      self.assertTrue(content.startswith(_PNG), name)
      self.assertGreater(len(content), 10_000, name)
    # The metrics per value of p, a row per method; per-domain accuracy per value of p, a row per domain; per value of
    # p the windows' drop and max (no window recovered), a row per window.
    self.assertEqual(page.count('<table>'), 2 + 2 + 2 * 2)
    self.assertIn('<h2>Metrics</h2>\n<p class="footing">shift_p=4.0: not on one footing: server_optimizer adam / sgd</p>'
                  '<h3>shift_p=1.0</h3>\n<table>\n<tr><th>algorithm</th><th>seeds</th>'
                  '<th>test accuracy, mean over the last period (fraction)</th>'
                  '<th>test accuracy, last evaluation (fraction)</th>'
                  '<th>batches of both modes, share 0 of mode 1 (day), mean over the last period (fraction)</th>', page)
    with open(os.path.join(self.output, 'per_window.md')) as f:
      windows = f.read()
    self.assertIn('shift_p=4.0: accuracy drop at the shift (fraction)\n\n| window | fedtkm | vanilla |\n|---|---|---|\n'
                  '| 1 | 0.200 +- 0.058 |  |',
                  windows)
    self.assertIn('<h3>shift_p=4.0</h3>\n<table>\n<tr><th>domain</th><th>fedtkm</th><th>vanilla</th></tr>', page)
    self.assertIn('13 runs', page)
    # What was run: the flags that differ and those shared, and a link to every run's directory.
    self.assertIn('<summary>Flags that differ between the runs (4)</summary><table class="flags"><tr><th>algorithm'
                  '</th><td>fedtkm, vanilla</td></tr><tr><th>num_branches</th><td>1, 2</td></tr><tr><th>server_optimizer'
                  '</th><td>adam, sgd</td></tr><tr><th>shift_p</th><td>1.0, 4.0</td></tr></table>', page)
    self.assertIn('<summary>Flags every run shares (1)</summary><table class="flags"><tr><th>task</th><td>synthetic'
                  '</td></tr></table>', page)
    self.assertIn('<a href="../fedtkm_p1_s0/">fedtkm_p1_s0</a>', page)
    self.assertIn('<a href="tables.csv">tables.csv</a>', page)

  def test_a_comparison_whose_runs_differ_in_a_shared_flag_is_marked_not_on_one_footing(self):
    note = 'shift_p=4.0: not on one footing: server_optimizer adam / sgd'
    with open(os.path.join(self.output, 'tables.md')) as f:
      markdown = f.read()
    with open(os.path.join(self.output, 'per_window.md')) as f:
      per_window = f.read()
    with open(os.path.join(self.output, 'index.html')) as f:
      page = f.read()
    for text in (markdown, per_window):
      self.assertIn(f'**{note}**', text)
      self.assertNotIn('shift_p=1.0: not on one footing', text)
      self.assertNotIn('num_branches', text)  # A method's own parameter is not its footing.
    self.assertIn(f'<p class="footing">{note}</p>', page)
    self.assertIn('<figcaption>test accuracy — shift_p=4.0 (not on one footing: server_optimizer adam / sgd) (', page)
    self.assertIn('<figcaption>test accuracy — shift_p=1.0 (', page)

  def test_the_page_splits_the_metrics_by_comparison_with_only_their_columns(self):
    cells = lambda **means: {name: report_tables.Cell([mean]) for name, mean in means.items()}
    table = report_tables.Table(['algorithm', 'scenario'], [
        (('a', 'windows'), 1, cells(test_accuracy=0.5, window_drop=0.1)),
        (('b', 'windows'), 1, cells(test_accuracy=0.6, window_drop=0.3)),
        (('a', 'mixture'), 1, cells(test_accuracy=0.7, share_correlation=0.9)),
        (('b', 'mixture'), 1, cells(test_accuracy=0.4))],
        [('test_accuracy', False), ('window_drop', True), ('share_correlation', False)])
    parts = report_tables.comparison_tables(table)
    self.assertEqual([title for title, _ in parts], ['scenario=windows', 'scenario=mixture'])
    windows, mixture = (part for _, part in parts)
    self.assertEqual([name for name, _ in windows.columns], ['test_accuracy', 'window_drop'])
    self.assertEqual([name for name, _ in mixture.columns], ['test_accuracy', 'share_correlation'])
    self.assertEqual(windows.best, {(1, 'test_accuracy'), (0, 'window_drop')})  # A lower drop is better.
    self.assertEqual(mixture.best, {(0, 'test_accuracy')})  # One method has a correlation: nothing to compare.

  def test_one_run_also_while_it_runs(self):
    # plot_run's report: the running run has no summary, so no table, but its curve so far.
    output = self.create_tempdir().full_path
    files = report_writer.write(self.root, output, only='running')
    self.assertEqual(files, ['accuracy_0.png', 'accuracy_0.svg', 'index.html'])
    files = report_writer.write(self.root, output, only='fedtkm_p1_s0')
    self.assertIn('tables.csv', files)
    self.assertIn('routing_0.png', files)
    self.assertIn('train_0.png', files)  # A run's own page has its training curves.
    with open(os.path.join(output, 'index.html')) as f:
      self.assertIn('<h1>Run: fedtkm_p1_s0</h1>', f.read())

  def test_chosen_columns_in_percent_and_an_unknown_column_is_one_line(self):
    output = self.create_tempdir().full_path
    report_writer.write(self.root, output, columns=['routing_accuracy', 'test_accuracy'], percent=True)
    with open(os.path.join(output, 'tables.csv')) as f:
      header = next(csv.reader(f))
    self.assertEqual(header[3:], ['routing_accuracy_mean', 'routing_accuracy_se', 'routing_accuracy_best',
                                  'test_accuracy_mean', 'test_accuracy_se', 'test_accuracy_best'])
    table = _table(os.path.join(output, 'tables.csv'))
    self.assertAlmostEqual(float(table[('vanilla', '4.0')]['test_accuracy_mean']),
                           100 * np.mean(self._recomputed('vanilla', 4.0, 'test_accuracy')), places=3)
    with open(os.path.join(output, 'tables.md')) as f:
      self.assertRegex(f.read(), r'\| vanilla \| 4.0 \| 3 \|  \| (\*\*)?\d\d\.\d\d \+- \d+\.\d\d(\*\*)? \|')
    windows = _table(os.path.join(output, 'per_window.csv'))  # Drops in percent too: 10, 20, 30.
    self.assertAlmostEqual(float(windows[('fedtkm', '4.0')]['window_1_drop_mean']), 20.0, places=3)
    with self.assertRaisesRegex(report_writer.ReportError,
                                r'^no finished run reports test_acc \(close: test_accuracy\b.*\)\.$'):
      report_writer.write(self.root, output, columns=['test_acc'])

  def test_headers_are_labels_with_units_and_percent_scales_every_share_and_no_index(self):
    runs = [run_results.RunResult(f'r{seed}', {'algorithm': 'fedtkm', 'seed': seed}, [], {'final_metrics': {
        'test_accuracy': 0.5 + 0.1 * seed, 'train_routing_accuracy_run_matched': 0.9, 'routing_ari': 0.4}})
            for seed in range(2)]
    table = report_tables.build(runs, percent=True)
    header = table.markdown().splitlines()[0]
    self.assertEqual(header, '| algorithm | seeds | test accuracy, last evaluation (%) | test routing ARI | training '
                             'routing accuracy, modes matched to branches over the run (%) |')
    cells = table.rows[0][2]
    self.assertAlmostEqual(cells['test_accuracy'].mean, 55.0)
    self.assertAlmostEqual(cells['train_routing_accuracy_run_matched'].mean, 90.0)  # A share: in percent too.
    self.assertAlmostEqual(cells['routing_ari'].mean, 0.4)  # An index: never scaled.
    self.assertIn('(fraction)', report_tables.build(runs).markdown().splitlines()[0])

  def test_per_domain_results_use_the_main_tables_window_and_name_it(self):
    root, output = self.create_tempdir().full_path, self.create_tempdir().full_path
    for seed, (day, night) in enumerate(((0.8, 0.5), (0.9, 0.7))):
      run_dir = os.path.join(root, f's{seed}')
      os.makedirs(run_dir)
      with open(os.path.join(run_dir, 'config.json'), 'w') as f:
        json.dump({'algorithm': 'vanilla', 'seed': seed}, f)
      with open(os.path.join(run_dir, 'metrics.csv'), 'w') as f:
        f.write('round,test_accuracy,test_day_accuracy,test_night_accuracy\n4,0.1,0.1,0.1\n')  # The last evaluation.
      with open(os.path.join(run_dir, 'summary.json'), 'w') as f:
        json.dump({'final_metrics': {'test_accuracy': 0.1, 'test_day_accuracy': 0.1, 'test_night_accuracy': 0.1,
                                     'test_day_accuracy_last_period_mean': day,
                                     'test_night_accuracy_last_period_mean': night}}, f)
    report_writer.write(root, output)
    with open(os.path.join(output, 'per_domain.csv')) as f:
      row = next(csv.DictReader(f))
    self.assertAlmostEqual(float(row['test_night_accuracy_last_period_mean_mean']), 0.6)
    self.assertAlmostEqual(float(row['test_night_accuracy_last_period_mean_se']), 0.1)
    with open(os.path.join(output, 'index.html')) as f:
      self.assertIn('<h2>Per-domain accuracy, mean over the last period</h2>', f.read())
    # A scenario whose headline metric is read at the last evaluation gets its per-domain table there too.
    runs = run_results.load(root)
    runs = [dataclasses.replace(run, summary=dict(run.summary, headline_metric='personalized_accuracy'))
            for run in runs]
    table = report_tables.build(runs, per_domain=True)
    self.assertEqual([name for name, _ in table.columns], ['test_day_accuracy', 'test_night_accuracy'])

  def test_the_scenarios_headline_metric_comes_first(self):
    final = {'test_accuracy': 0.5, 'test_accuracy_last_period_mean': 0.4, 'test_mixture_accuracy': 0.6,
             'personalized_accuracy': 0.7}
    for first in ('test_mixture_accuracy', 'test_accuracy_last_period_mean', 'personalized_accuracy'):
      runs = [run_results.RunResult('r', {'algorithm': 'fedavg'}, [],
                                    {'final_metrics': final, 'headline_metric': first})]
      self.assertEqual(report_tables.build(runs).columns[0][0], first)
    # Runs of two headlines: none comes first, the default order stands.
    runs = [run_results.RunResult(f'r{i}', {'algorithm': 'fedavg', 'seed': i}, [],
                                  {'final_metrics': final, 'headline_metric': first})
            for i, first in enumerate(('test_mixture_accuracy', 'personalized_accuracy'))]
    self.assertEqual(report_tables.build(runs).columns[0][0], report_tables.MAIN_COLUMNS[0][0])

  def test_numeric_settings_are_ordered_by_value(self):
    runs = [run_results.RunResult(f'r{step}', {'algorithm': 'fedavg', 'rotation_step': step}, [],
                                  {'final_metrics': {'test_accuracy': 0.5}}) for step in (15.0, 0.0, 10.0, 5.0)]
    table = report_tables.build(runs)
    self.assertEqual([values[table.keys.index('rotation_step')] for values, _, _ in table.rows], [0.0, 5.0, 10.0, 15.0])

  def test_references_are_marked_and_never_best(self):
    # No-Dist-Shift scores highest but is a reference; FedEM with the test labels likewise.
    configs = [{'algorithm': 'nds'}, {'algorithm': 'vanilla', 'no_shift': True},
               {'algorithm': 'fedem', 'oracle_test_labels': True}, {'algorithm': 'vanilla'}, {'algorithm': 'fedtkm'}]
    finals = [0.99, 0.98, 0.97, 0.6, 0.7]
    runs = [run_results.RunResult(f'r{i}', config, [], {'final_metrics': {'test_accuracy': value}})
            for i, (config, value) in enumerate(zip(configs, finals))]
    table = report_tables.build(runs)
    names = [values[0] for values, _, _ in table.rows]
    self.assertCountEqual(names, ['nds (reference: no shift)', 'vanilla (reference: no shift)',
                                  'fedem (oracle: test labels)', 'vanilla', 'fedtkm'])
    self.assertEqual(table.best, {(names.index('fedtkm'), 'test_accuracy')})

  def test_the_privacy_budget_describes_runs_and_is_never_best(self):
    # Two methods at z = 0 (epsilon inf) and z = 1 (epsilon 93.1), two seeds each: the accuracy is compared, the
    # epsilon (the same for both methods of a comparison) is not, and an infinite epsilon has no error to print.
    runs = []
    for method, accuracy in (('vanilla', 0.6), ('fedtkm', 0.7)):
      for z, epsilon in ((0.0, float('inf')), (1.0, 93.1)):
        for seed in (0, 1):
          runs.append(run_results.RunResult(
              f'{method}_z{z}_s{seed}', {'algorithm': method, 'dp_noise_multiplier': z, 'seed': seed}, [],
              {'final_metrics': {'test_accuracy': accuracy + 0.01 * seed},
               'privacy': {'epsilon': epsilon, 'noise_multiplier': z}}))
    table = report_tables.build(runs)
    self.assertEqual({name for _, name in table.best}, {'test_accuracy'})
    self.assertLen(table.best, 2)  # FedTKM in each comparison.
    texts = {(values, cells['dp_epsilon'].text()) for values, _, cells in table.rows}
    self.assertEqual({text for _, text in texts}, {'inf', '93.100 +- 0.000'})
    self.assertNotIn('nan', table.csv())

  def test_no_runs_is_one_line(self):
    with self.assertRaisesRegex(report_writer.ReportError, r'^no runs under .* \(a run directory has config.json'):
      report_writer.write(self.create_tempdir().full_path, self.output)


class LearnedShiftTest(absltest.TestCase):

  def _run(self, rows: list[dict]) -> run_results.RunResult:
    return run_results.RunResult('r', {}, rows, None)

  def test_the_prior_against_q_and_the_share_that_tracks_domain_0(self):
    # The prior is what the method is given: the learned line is q_bar, never the prior.
    prior_rows = [{'round': 1, 'q': 0.0, 'prior': 0.0, 'q_bar': 0.1}, {'round': 2, 'q': 1.0, 'prior': 1.0,
                                                                     'q_bar': 0.8}]
    self.assertEqual(report_plots.learned_columns(self._run(prior_rows))[:2], ('q_bar', 'q'))
    self.assertIsNone(report_plots.learned_columns(self._run([{'round': 1, 'q': 0.0, 'prior': 0.0}])))
    # FedTEM's assigned share against the realised day share.
    fedtem_rows = [{'round': 1, 'day_fraction': 0.4, 'assigned_mode_one_share': 0.5}]
    self.assertEqual(report_plots.learned_columns(self._run(fedtem_rows))[:2],
                     ('assigned_mode_one_share', 'day_fraction'))
    # Components are unlabelled: here component 1 follows domain 0's share, component 0 its complement.
    shares = [0.2, 0.6, 0.9, 0.5]
    counts = {'train_routing_count_0_1': 5.0, 'train_routing_count_0_0': 1.0, 'train_routing_count_1_0': 4.0,
              'train_routing_count_1_1': 0.0}  # The run's training routing matches domain 0 to component 1.
    share_rows = [{'round': t, 'scheduled_share_0': a, 'learned_share_0': 1 - a + 0.01 * t, 'learned_share_1': a,
                   **counts} for t, a in enumerate(shares, 1)]
    self.assertEqual(report_plots.learned_columns(self._run(share_rows))[:2], ('learned_share_1', 'scheduled_share_0'))
    # FedGMM: its global mixture summed over learners, against the round's component shares.
    fedgmm_rows = [{'round': t, 'domain_share_0': a, 'global_pi_0_0': 0.5 * (1 - a), 'global_pi_0_1': 0.5 * (1 - a),
                    'global_pi_1_0': a, 'global_pi_1_1': 0.0, **counts} for t, a in enumerate(shares, 1)]
    self.assertEqual(report_plots.learned_columns(self._run(fedgmm_rows))[:2], ('learned_share_1', 'domain_share_0'))

  def test_no_estimate_without_a_prior_or_a_scheduled_share(self):
    self.assertIsNone(report_plots.learned_columns(self._run([{'round': 1, 'q': 0.5, 'prior': float('nan')}])))
    self.assertIsNone(report_plots.learned_columns(self._run([{'round': 1, 'learned_share_0': 0.5}])))
    self.assertIsNone(report_plots.learned_columns(self._run([])))


class SettingsTest(absltest.TestCase):

  def _runs(self, configs: list[dict], finals: list[dict]) -> list[run_results.RunResult]:
    return [run_results.RunResult(f'r{i}', config, [], {'final_metrics': final})
            for i, (config, final) in enumerate(zip(configs, finals))]

  def test_runs_that_decided_with_test_labels_are_marked_oracle(self):
    # FedEM with and without the flag, CFL run before the flag existed (it read the labels), FedAvg with the flag
    # (no decision reads a label).
    configs = [{'algorithm': 'fedem', 'oracle_test_labels': True}, {'algorithm': 'fedem', 'oracle_test_labels': False},
               {'algorithm': 'cfl'}, {'algorithm': 'vanilla', 'oracle_test_labels': True}]
    table = report_tables.build(self._runs(configs, [{'test_accuracy': 0.5}] * 4))
    methods = sorted(values[table.keys.index('algorithm')] for values, _, _ in table.rows)
    self.assertEqual(methods, ['cfl (oracle: test labels)', 'fedem', 'fedem (oracle: test labels)', 'vanilla'])
    only_oracle = report_tables.build(self._runs(configs[:1], [{'test_accuracy': 0.5}]))
    self.assertEqual(only_oracle.rows[0][0], ('fedem (oracle: test labels)',))
    self.assertIn('oracle: test labels', only_oracle.markdown())

  def test_runs_that_scored_by_the_true_domain_are_marked_oracle(self):
    # ShiftEx with and without --oracle_test_domains, FedDrift run before the flag existed (it read the domains).
    configs = [{'algorithm': 'shiftex', 'oracle_test_domains': True}, {'algorithm': 'shiftex',
                                                                        'oracle_test_domains': False},
               {'algorithm': 'feddrift', 'oracle_test_labels': False}, {'algorithm': 'vanilla_single'}]
    table = report_tables.build(self._runs(configs, [{'test_accuracy': 0.5}] * 4))
    methods = sorted(values[table.keys.index('algorithm')] for values, _, _ in table.rows)
    self.assertEqual(methods, ['feddrift (oracle: test domains)', 'shiftex', 'shiftex (oracle: test domains)',
                               'vanilla_single'])

  def test_runs_whose_method_assigned_by_the_true_domain_are_marked_oracle(self):
    configs = [{'algorithm': 'shiftex', 'oracle_test_domains': False, 'shiftex_oracle_assignment': True},
               {'algorithm': 'shiftex', 'oracle_test_domains': False, 'shiftex_oracle_assignment': False}]
    methods = sorted(run_results.method_name(run) for run in self._runs(configs, [{}] * 2))
    self.assertEqual(methods, ['shiftex', 'shiftex (oracle: true domains in training)'])
    self.assertTrue(run_results.is_reference_name(methods[1]))

  def test_footing_differences_are_the_shared_flags_that_differ(self):
    configs = [{'algorithm': 'vanilla_single', 'server_optimizer': 'adam', 'client_epochs': 10, 'seed': 0,
                'corruptions': ['blur', 'fog'], 'num_branches': 1, 'setup': ''},
               {'algorithm': 'shiftex', 'server_optimizer': 'sgd', 'client_epochs': 5, 'seed': 1,
                'corruptions': ['blur', 'fog'], 'num_branches': 4, 'setup': 'shiftex_digits_windowed',
                'shiftex_threshold': 0.1}]
    runs = self._runs(configs, [{}] * 2)
    # Epochs by value (5 before 10); the seed, a method's own flags and the setup's name are not footing.
    self.assertEqual(run_results.footing_differences(runs), {'client_epochs': ['5', '10'],
                                                             'server_optimizer': ['adam', 'sgd']})
    self.assertEqual(run_results.footing_note(runs),
                     'not on one footing: client_epochs 5 / 10; server_optimizer adam / sgd')
    configs[1].update(server_optimizer='adam', client_epochs=10)
    self.assertIsNone(run_results.footing_note(self._runs(configs, [{}] * 2)))

  def test_a_flag_the_others_determine_is_left_out(self):
    # A grid sweeps task, method and seed and sets num_domains and rotation_step per task; lr is swept.
    configs = [{'algorithm': a, 'task': t, 'num_domains': {'circle': 30, 'mnist': 12}[t],
                'rotation_step': {'circle': 6.2, 'mnist': 15}[t], 'lr': lr, 'seed': seed}
               for a in ('fedavg', 'fedevp') for t in ('circle', 'mnist') for lr in (0.1, 0.2) for seed in (0, 1)]
    runs = self._runs(configs, [{}] * len(configs))
    self.assertEqual(run_results.setting_keys(runs), ['algorithm', 'lr', 'task'])
    # Without the task flag recorded, one of the two flags that determine each other names the setting.
    for config in configs:
      del config['task']
    self.assertEqual(run_results.setting_keys(self._runs(configs, [{}] * len(configs))),
                     ['algorithm', 'lr', 'rotation_step'])

  def test_a_method_that_does_not_personalize_has_its_held_out_accuracy_as_server_view(self):
    fedavg, fedrep, local = self._runs(
        [{'algorithm': m} for m in ('fedavg', 'fedrep', 'local')],
        [{'test_accuracy': 0.9, 'target_accuracy': 0.8},
         {'test_accuracy': 0.9, 'target_accuracy': 0.8, 'target_server_accuracy': 0.7},
         {'target_accuracy': 0.6}])  # Local has no global model.
    self.assertEqual(report_tables.run_metrics(fedavg)['target_server_accuracy'], 0.8)
    self.assertEqual(report_tables.run_metrics(fedrep)['target_server_accuracy'], 0.7)
    self.assertNotIn('target_server_accuracy', report_tables.run_metrics(local))

  def test_training_accuracy_is_averaged_over_the_last_ten_rounds(self):
    accuracies = np.random.default_rng(0).uniform(size=13)
    rows = [{'round': r + 1, 'train_accuracy': a} for r, a in enumerate(accuracies)]
    rows[-1]['test_accuracy'] = 0.5  # The last round also evaluates.
    run = run_results.RunResult('r', {}, rows, {'final_metrics': {'train_accuracy': accuracies[-1]}})
    self.assertAlmostEqual(report_tables.run_metrics(run)['train_accuracy_last_10_rounds_mean'],
                           float(np.mean(accuracies[3:])), places=12)
    short = run_results.RunResult('r', {}, rows[:9], {'final_metrics': {}})  # Fewer rounds than the window.
    self.assertNotIn('train_accuracy_last_10_rounds_mean', report_tables.run_metrics(short))


if __name__ == '__main__':
  absltest.main()
