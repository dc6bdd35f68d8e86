"""Every method on every scenario: each run reports what its scenario declares it must (`SMOKE_RUN.check`), and the
report of a group's runs holds what a recomputation from their metrics.csv gives (means, and standard errors where a
method has two seeds).

This is the suite's small version of the method x scenario matrix (docs/running.md, "Running a grid"): two-round runs on
the synthetic task with each scenario's `SMOKE_RUN.settings`, run by run_experiment's `main` in this process
(`tests.in_process_run`). The pairs are dealt to `_GROUPS` test cases per scenario by a hash of the pair, so a new
method or scenario is picked up from the registries and the cases stay even over the Bazel shards. A method may refuse
a scenario (exit 2, one line naming the method and the scenario it needs).

Several TFF workers: every method but the shift-free references (which run vanilla's computations) runs a second time
on two local `worker_binary` processes, in its home scenario (the registry's, rotated by the method's position, the
next that it does not refuse), and its rounds must equal the local run's (FedTEM's as its split round).
"""

import csv
import itertools
import json
import os
import zlib

from absl.testing import absltest
from absl.testing import parameterized
import numpy as np
from scipy import stats
from sklearn import metrics

from algorithms import registry as algorithms
from experiment.reporting import report_writer
from experiment.reporting import run_results
from periodic_shift import scenarios
from tests import in_process_run

_ALGORITHMS = algorithms.ALGORITHMS  # Every method of the registry: a new one runs here on every scenario.
_SEEDS = (0, 1)
_SEEDED_TWICE = 1  # Methods per scenario run with both seeds (in turn: one method of each scenario has two).
_GROUPS = 4  # Test cases per scenario, each with the pairs whose hash falls in it.
_SINGLE_BRANCH_PARAMETERS = 64 * 64 + 64 + 64 * 32 + 32 + 32 * 20 + 20


def _group(scenario: str, algorithm: str) -> int:
  return zlib.crc32(f'{scenario}/{algorithm}'.encode()) % _GROUPS


def _home_order(algorithm: str) -> list[str]:
  """The scenarios in which `algorithm` may have its run on two workers, first choice first: the registry's order,
  rotated by the method's position (the first of these it does not refuse is its home)."""
  start = _ALGORITHMS.index(algorithm) % len(scenarios.SCENARIOS)
  return list(scenarios.SCENARIOS[start:] + scenarios.SCENARIOS[:start])


def _final_metrics(rows: list[dict], period: int) -> dict[str, float]:
  """The report's per-run figures recomputed from metrics.csv: the last evaluated row (one with the centralized test
  accuracy or the held-out clients' own) and the mean of each test metric over the evaluations of the last `period`
  rounds."""
  held_out = ('test_accuracy', 'personalized_accuracy', 'unseen_accuracy', 'target_accuracy')
  evaluated = [row for row in rows if any(key in row for key in held_out)]
  last = evaluated[-1]
  final = dict(last)
  window = [row for row in evaluated if row['round'] > last['round'] - period]
  for key in (k for k in last if k.startswith('test_') or k in ('routing_accuracy', 'routing_accuracy_matched',
                                                                   'routing_ari')):
    final[f'{key}_last_period_mean'] = sum(row[key] for row in window) / len(window)
  if 'scheduled_share_0' in rows[0]:  # pFedEM's measures; one cycle over 4 rounds, so every evaluation counts.
    mixture = [row['test_mixture_accuracy'] for row in evaluated]
    final['test_mixture_accuracy_mean'] = np.mean(mixture)
    final['test_mixture_accuracy_std_last_cycles'] = np.std(mixture)
    final['balanced_mix_accuracy'] = (last['test_day_accuracy'] + last['test_night_accuracy']) / 2
  test_matching = _run_matching(evaluated, 'routing_count_')  # Test examples over every evaluation.
  if test_matching:
    final['routing_accuracy_run_matched'] = test_matching[1]
  matching = _run_matching(rows, 'train_routing_count_')
  if matching:
    matching, final['train_routing_accuracy_run_matched'] = matching
    base_0 = [f'learned_share_{branch}' for mode, branch in matching if mode == 0]
    if 'scheduled_share_0' in rows[0] and base_0 and base_0[0] in rows[0]:
      # The share of the component matched to base 0, signed. Two rounds: a correlation of two points is +-1, and
      # so is every random walk's: the noise floor is 1.
      final['share_correlation'] = stats.pearsonr([row[base_0[0]] for row in rows],
                                                  [row['scheduled_share_0'] for row in rows])[0]
      final['share_correlation_floor'] = 1.0
  if 'test_accuracy' in final:  # A global model that does not personalize is its own server view.
    for name in ('personalized', 'unseen', 'target'):
      if f'{name}_accuracy' in final and f'{name}_server_accuracy' not in final:
        final[f'{name}_server_accuracy'] = final[f'{name}_accuracy']
  return final


def _run_matching(rows: list[dict], prefix: str):
  """(matching, accuracy): the one matching of modes to branches for the whole run, the injection with the most
  counts in `rows`' `<prefix><mode>_<branch>` columns, and the share of the counts it matches; None without counts
  (a run whose routing counted no client, T-shot k-means collecting its centers, has no score)."""
  counts = {tuple(int(i) for i in key[len(prefix):].split('_')): key for key in rows[0] if key.startswith(prefix)}
  total = lambda pairs: sum(row.get(counts[pair], 0.0) for row in rows for pair in pairs)
  if not counts or not total(counts):
    return None
  modes, branches = max(m for m, _ in counts) + 1, max(b for _, b in counts) + 1
  injections = ([tuple(zip(range(modes), p)) for p in itertools.permutations(range(branches), modes)]
                if modes <= branches else
                [tuple(zip(p, range(branches))) for p in itertools.permutations(range(modes), branches)])
  matching = max(injections, key=total)
  return matching, total(matching) / total(counts)


def _detection_measures(rows: list[dict], regimes) -> dict[str, float]:
  """The detector's rates (ShiftEx: its census checks' totals) and, for a scenario whose domains have regimes
  (`Scenario.domain_regimes`), the ARI of the training parties' models against the true regimes in round 2, by
  scikit-learn from the counts."""
  measures = {}
  total = lambda key: sum(row.get(key, 0.0) for row in rows)
  if total('true_shifts'):
    measures['detection_rate'] = total('detected_shifts') / total('true_shifts')
  if total('stable_checks'):
    measures['false_alarm_rate'] = total('false_alarms') / total('stable_checks')
  if regimes is None:
    return measures
  true, found = [], []
  for key, count in rows[1].items():
    if key.startswith('train_routing_count_'):
      domain, branch = (int(i) for i in key.split('_')[-2:])
      true += [regimes[domain]] * int(count)
      found += [branch] * int(count)
  if true:
    measures['regime_ari'] = metrics.adjusted_rand_score(true, found)
  return measures


def _seeds(scenario: str, algorithm: str) -> tuple[int, ...]:
  """Seed 0 for every method; seed 1 too for `_SEEDED_TWICE` of them, different ones in each scenario."""
  turn = scenarios.SCENARIOS.index(scenario) * _SEEDED_TWICE
  return _SEEDS if (_ALGORITHMS.index(algorithm) - turn) % len(_ALGORITHMS) < _SEEDED_TWICE else _SEEDS[:1]


def _read_csv(path: str) -> list[dict]:
  with open(path) as f:
    return list(csv.DictReader(f))


class MethodScenarioMatrixTest(parameterized.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    in_process_run.start_worker()
    cls._workers = None

  @classmethod
  def tearDownClass(cls):
    if cls._workers is not None:
      in_process_run.stop_workers(cls._workers[0])
    super().tearDownClass()

  def _two_workers(self) -> list[str]:
    if self._workers is None:
      type(self)._workers = in_process_run.start_local_workers(2)
    return self._workers[1]

  @parameterized.parameters(*itertools.product(scenarios.SCENARIOS, range(_GROUPS)))
  def test_every_method_and_the_report(self, scenario, group):
    root = self.create_tempdir().full_path
    ran = []
    for algorithm in (a for a in _ALGORITHMS if _group(scenario, a) == group):
      for seed in _seeds(scenario, algorithm):
        with self.subTest(algorithm=algorithm, seed=seed):
          run_dir = os.path.join(root, f'{algorithm}_s{seed}')
          status, stderr = in_process_run.run([*in_process_run.smoke_args(scenario, seed), f'--algorithm={algorithm}',
                                               f'--root_output_dir={root}', f'--experiment_name={algorithm}_s{seed}'])
          if status == 2:
            self._check_refusal(algorithm, stderr)
          else:
            self.assertEqual(status, 0, stderr[-3000:])
            self._check_scenario_metrics(scenario, algorithm, run_dir)
            ran.append(algorithm)
      if not algorithm.startswith('nds') and _home_order(algorithm)[0] == scenario:
        self._check_on_two_workers(algorithm, root if algorithm in ran else None)
    if ran:
      self._check_report(root, scenario)

  def _check_refusal(self, algorithm: str, stderr: str):
    lines = stderr.strip().splitlines()
    self.assertRegex(lines[-1], rf'^run_experiment: error: {algorithm} .* needs .*--scenario=')
    self.assertEqual([line for line in lines if 'error: ' in line], lines[-1:])

  def _check_on_two_workers(self, algorithm: str, root):
    """`algorithm`'s run on two workers in its home scenario equals its local run (made here for a home that is not
    the scenario of this case, when the method refused that one)."""
    for scenario in _home_order(algorithm):
      local_root = root if root is not None and scenario == _home_order(algorithm)[0] else None
      if local_root is None:
        local_root = self.create_tempdir().full_path
        status, stderr = in_process_run.run([*in_process_run.smoke_args(scenario, _SEEDS[0]),
                                             f'--algorithm={algorithm}',
                                             f'--root_output_dir={local_root}',
                                             f'--experiment_name={algorithm}_s{_SEEDS[0]}'])
        if status == 2:
          continue
        self.assertEqual(status, 0, stderr[-3000:])
      remote_root = self.create_tempdir().full_path  # Not in `root`: the report reads every run there.
      status, stderr = in_process_run.run([*in_process_run.smoke_args(scenario, _SEEDS[0]), f'--algorithm={algorithm}',
                                           f'--root_output_dir={remote_root}', '--experiment_name=two_workers',
                                           f'--workers={",".join(self._two_workers())}'])
      self.assertEqual(status, 0, stderr[-3000:])
      in_process_run.assert_same_rounds(
          self, in_process_run.metrics_rows(os.path.join(local_root, f'{algorithm}_s{_SEEDS[0]}')),
          in_process_run.metrics_rows(os.path.join(remote_root, 'two_workers')), f'{algorithm} on two workers')
      return
    self.fail(f'{algorithm} refuses every scenario')

  def _check_scenario_metrics(self, scenario: str, algorithm: str, run_dir: str):
    rows = [{k: float(v) for k, v in row.items() if v} for row in in_process_run.metrics_rows(run_dir)]
    self.assertLen(rows, 2)
    with open(os.path.join(run_dir, 'summary.json')) as f:
      summary = json.load(f)
    self.assertEqual(summary['headline_metric'], scenarios.module(scenario).HEADLINE_METRIC)
    if algorithm.endswith('_single'):
      self.assertEqual(summary['parameters']['total'], _SINGLE_BRANCH_PARAMETERS)
    if any(key.startswith('train_routing_count_') for key in rows[1]):  # A method that routes clients to branches.
      for column in ('train_routing_accuracy', 'routing_accuracy'):
        self.assertBetween(rows[1][column], 0.0, 1.0)
    shift_free = algorithms.is_shift_free(algorithm)
    self.assertEqual(scenarios.module(scenario).SMOKE_RUN.check(rows, summary, shift_free), [])

  def _check_report(self, root: str, scenario: str):
    """tables.csv, per_domain.csv and per_window.csv against a recomputation from each run's metrics.csv: per method
    the mean and standard error over its seeds (|a - b| / 2 for two, 0 for one), and the best mean of each column
    marked."""
    output = os.path.join(root, 'report')
    files = report_writer.write(root, output)
    regimes = in_process_run.built_scenario(in_process_run.smoke_args(scenario, _SEEDS[0])).domain_regimes()
    expected = {}  # algorithm -> column -> [value per seed]
    for algorithm in _ALGORITHMS:
      for seed in _seeds(scenario, algorithm):
        run_dir = os.path.join(root, f'{algorithm}_s{seed}')
        if not os.path.exists(os.path.join(run_dir, 'metrics.csv')):
          continue
        rows = [{k: float(v) for k, v in row.items() if v} for row in in_process_run.metrics_rows(run_dir)]
        with open(os.path.join(run_dir, 'summary.json')) as f:
          windows = json.load(f).get('window_metrics') or []
        final = _final_metrics(rows, period=2)
        for field in ('drop', 'recovery_rounds', 'max_accuracy'):
          values = [w[field] for w in windows if w[field] is not None]
          if values:
            final[f'window_{field}'] = np.mean(values)
          final.update({f'window_{w["window"]}_{field}': w[field] for w in windows if w[field] is not None})
        final.update(_detection_measures(rows, regimes))
        # No-Dist-Shift is a reference: the report names it so and never marks it best.
        name = algorithm + (run_results.NO_SHIFT_MARK if algorithm in run_results.NO_SHIFT_METHODS else '')
        for column, value in final.items():
          expected.setdefault(name, {}).setdefault(column, []).append(value)
    self.assertContainsSubset(['tables.csv', 'tables.md', 'index.html'], files)
    for table in ('tables.csv', 'per_domain.csv', 'per_window.csv'):
      if table not in files:
        continue
      rows = {row['algorithm']: row for row in _read_csv(os.path.join(output, table))}
      self.assertCountEqual(rows, expected)
      columns = [key[:-len('_mean')] for key in next(iter(rows.values())) if key.endswith('_mean')]
      self.assertNotEmpty(columns)
      for column in columns:
        with self.subTest(table=table, column=column):
          means = {}
          for algorithm, row in rows.items():
            values = expected[algorithm].get(column)
            if values is None:
              self.assertEqual(row[f'{column}_mean'], '')
              continue
            # A column some seeds lack (domains a scenario draws per seed) averages the others.
            self.assertEqual(int(row['seeds']), len(_seeds(scenario, algorithm.split(' ')[0])))
            self.assertAlmostEqual(float(row[f'{column}_mean']), np.mean(values), places=5)
            error = abs(values[0] - values[1]) / 2 if len(values) == 2 else 0.0
            self.assertAlmostEqual(float(row[f'{column}_se']), error, places=5)
            if not run_results.is_reference_name(algorithm):
              means[algorithm] = np.mean(values)  # Full precision: the CSV's six digits can hide a difference.
          if column == 'share_correlation_floor':  # Describes the run (its length's noise floor): never marked.
            self.assertEqual({a for a in rows if rows[a][f'{column}_best'] == '1'}, set())
          elif len(means) > 1:
            lower_is_better = (column.startswith(('window_drop', 'window_recovery')) or '_std' in column
                               or column == 'false_alarm_rate')
            best = (min if lower_is_better else max)(means.values())
            marked = {a for a in rows if rows[a][f'{column}_best'] == '1'}
            # Equal up to float rounding, the report's rule.
            self.assertEqual(marked, {a for a, mean in means.items() if np.isclose(mean, best, rtol=1e-9, atol=0.0)})


if __name__ == '__main__':
  absltest.main()
