"""Every method on every scenario: each run ends with its scenario's metrics, and the report of the scenario's runs
holds what a recomputation from their metrics.csv gives (means, and standard errors where a method has two seeds).

This is the suite's small version of the method x scenario matrix (docs/running.md, "Running a grid"): two-round runs on
the synthetic task, one test (and one shard) per scenario. The runs call run_experiment's `main` in this process
(`tests.in_process_run`).

Several TFF workers: in its home scenario (`_ON_TWO_WORKERS`) every method runs a second time on two local
`worker_binary` processes, and its rounds must equal the local run's (FedTEM's as its split round). The shift-free
references (nds, nds_single) run vanilla's computations and are not run twice.
"""

import csv
import itertools
import json
import os

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
_SEEDED_TWICE = 1  # Methods per scenario run with both seeds (in turn: six methods, one per scenario, have two).
# Settings that make each scenario's two rounds small and show its shift; a scenario not listed runs with its defaults.
_SCENARIO_FLAGS = {
    # Two rounds of one period: q(1) = 0 (every sampled client a night client), q(2) = 1.
    'periodic': [],
    # One mixture cycle over 4 rounds: a(1) = 1/2, a(2) = 1.
    'mixture_drift': ['--num_clients=20', '--num_cycles=0.5'],
    'evolving_domains': ['--num_domains=4', '--num_clients=6'],
    # Every client changes concept at round 2 (of 2), recurring every round.
    'concept_drift': ['--drift_type=recurring', '--drift_start=1', '--drift_end=1', '--concept_period=1'],
    # Windows of one round: round 2 is window 1, where half of the clients hold the new regime.
    # 40 parties of the synthetic task's 660 (every party reports to ShiftEx in its census rounds).
    'windowed': ['--window_rounds=1', '--windowing=sliding', '--window_overlap=0', '--num_clients=40'],
    # 12 day clients, 3 of them unseen.
    'dirichlet_mixture': ['--num_clients=12', '--unseen_fraction=0.25'],
}
_SINGLE_BRANCH_PARAMETERS = 64 * 64 + 64 + 64 * 32 + 32 + 32 * 20 + 20


def _refusal(scenario: str, algorithm: str):
  """The one-line error of a method the scenario cannot serve, or None."""
  if algorithm == 'local' and scenario not in ('dirichlet_mixture', 'evolving_domains'):  # Clients' test data.
    return ('run_experiment: error: local evaluates every client on its own test data and needs a scenario with '
            'per-client test data (--scenario=dirichlet_mixture or evolving_domains).')
  if algorithm == 'fedevolve' and scenario != 'evolving_domains':  # Only there are domains time stages.
    return ('run_experiment: error: fedevolve learns from the order of a client\'s domains and needs a scenario '
            'whose domains are time stages, at least 3 (--scenario=evolving_domains --num_domains>=3); this one has '
            '1.')
  return None


# The scenario in which each method also runs on two workers: periodic, or time-stage domains for the methods that
# periodic refuses (`_refusal`).
_ON_TWO_WORKERS = {algorithm: 'periodic' if _refusal('periodic', algorithm) is None else 'evolving_domains'
                   for algorithm in _ALGORITHMS if not algorithm.startswith('nds')}


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


def _windowed_measures(rows: list[dict]) -> dict[str, float]:
  """The detector's rates (ShiftEx: its census checks' totals) and the ARI of the training parties' models against
  the true regimes in window 2 (round 2; 2 regimes, domain d is regime d mod 2), by scikit-learn from the counts."""
  measures = {}
  total = lambda key: sum(row.get(key, 0.0) for row in rows)
  if total('true_shifts') + total('stable_checks'):
    if total('true_shifts'):
      measures['detection_rate'] = total('detected_shifts') / total('true_shifts')
    if total('stable_checks'):
      measures['false_alarm_rate'] = total('false_alarms') / total('stable_checks')
  regimes, branches = [], []
  for key, count in rows[1].items():
    if key.startswith('train_routing_count_'):
      domain, branch = (int(i) for i in key.split('_')[-2:])
      regimes += [domain % 2] * int(count)
      branches += [branch] * int(count)
  if regimes:
    measures['regime_ari'] = metrics.adjusted_rand_score(regimes, branches)
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

  @parameterized.parameters(*scenarios.SCENARIOS)
  def test_every_method_and_the_report(self, scenario):
    root = self.create_tempdir().full_path
    addresses = None
    if scenario in _ON_TWO_WORKERS.values():
      workers, addresses = in_process_run.start_local_workers(2)
      self.addCleanup(in_process_run.stop_workers, workers)
    for algorithm in _ALGORITHMS:
      for seed in _seeds(scenario, algorithm):
        with self.subTest(algorithm=algorithm, seed=seed):
          args = ['--task=synthetic', f'--scenario={scenario}', f'--algorithm={algorithm}', '--clients_per_round=3',
                  '--total_rounds=2', '--period=2', '--rounds_per_eval=2', '--rounds_per_checkpoint=2',
                  '--eval_batch_size=500', f'--seed={seed}',
                  *_SCENARIO_FLAGS.get(scenario, [])]
          status, stderr = in_process_run.run([*args, f'--root_output_dir={root}',
                                               f'--experiment_name={algorithm}_s{seed}'])
          refusal = _refusal(scenario, algorithm)
          if refusal:
            self.assertEqual((status, stderr.strip().splitlines()[-1]), (2, refusal))
            continue
          self.assertEqual(status, 0, stderr[-3000:])
          run_dir = os.path.join(root, f'{algorithm}_s{seed}')
          self._check_scenario_metrics(scenario, algorithm, run_dir)
          if _ON_TWO_WORKERS.get(algorithm) == scenario and seed == _SEEDS[0]:
            remote_root = self.create_tempdir().full_path  # Not in `root`: the report reads every run there.
            status, stderr = in_process_run.run([*args, f'--root_output_dir={remote_root}',
                                                 '--experiment_name=two_workers', f'--workers={",".join(addresses)}'])
            self.assertEqual(status, 0, stderr[-3000:])
            in_process_run.assert_same_rounds(self, in_process_run.metrics_rows(run_dir),
                                              in_process_run.metrics_rows(os.path.join(remote_root, 'two_workers')),
                                              f'{algorithm} on two workers')
    self._check_report(root, scenario)

  def _check_scenario_metrics(self, scenario: str, algorithm: str, run_dir: str):
    rows = in_process_run.metrics_rows(run_dir)
    self.assertLen(rows, 2)
    with open(os.path.join(run_dir, 'summary.json')) as f:
      summary = json.load(f)
    shift_free = algorithm.startswith('nds')
    if algorithm.endswith('_single'):
      self.assertEqual(summary['parameters']['total'], _SINGLE_BRANCH_PARAMETERS)
    if scenario == 'periodic':
      # Without the shift every round samples the population's day share, 300 of 660 clients.
      self.assertEqual([float(row['q']) for row in rows], [300 / 660] * 2 if shift_free else [0.0, 1.0])
      if algorithm in ('scsgd', 'tshot_kmeans', 'min_loss', 'fedem', 'fedtem', 'fedtkm'):  # Routing to branches.
        for column in ('train_routing_accuracy', 'routing_accuracy'):
          self.assertBetween(float(rows[1][column]), 0.0, 1.0)
    elif scenario == 'mixture_drift':
      self.assertEqual(float(rows[1]['scheduled_share_0']), 0.5 if shift_free else 1.0)
      self.assertBetween(float(rows[1]['test_mixture_accuracy']), 0.0, 1.0)
    elif scenario == 'evolving_domains':
      self.assertEqual(float(rows[1]['source_domains']), 3.0)
      # Each client's own target data, and for methods with a global model the centralized target test set: the
      # target, rotated by 3 x 15 degrees, is the last domain, and test_mixture_accuracy is its accuracy.
      self.assertBetween(float(rows[1]['target_accuracy']), 0.0, 1.0)
      if algorithm in ('fedevolve', 'fedevp', 'fedavg_plus', 'fedrep'):  # Personalized, and the global model's view.
        self.assertBetween(float(rows[1]['target_server_accuracy']), 0.0, 1.0)
      if algorithm != 'local':
        target = 'test_day_rot0_accuracy' if shift_free else 'test_day_rot45_accuracy'
        self.assertEqual(rows[1]['test_mixture_accuracy'], rows[1][target])
    elif scenario == 'windowed':
      self.assertEqual([float(row['window']) for row in rows], [0.0, 0.0 if shift_free else 1.0])
      self.assertBetween(float(rows[1]['new_regime_share']), 0.0, 1.0)
      # Evaluated at round 2 only: window 2 (round 2) has its max there and no pre-shift evaluation in window 1.
      windows = summary['window_metrics']
      self.assertEqual([w['window'] for w in windows], [2] if not shift_free else [1])
      self.assertEqual(windows[0]['max_accuracy'], float(rows[1]['test_mixture_accuracy']))
    elif scenario == 'dirichlet_mixture':
      # Two components (the day base and its transformed copy); accuracy on the clients' own and unseen data.
      self.assertAlmostEqual(float(rows[1]['domain_share_0']) + float(rows[1]['domain_share_1']), 1.0)
      columns = ('personalized_accuracy', 'unseen_accuracy') + (('test_day_T_accuracy',) if algorithm != 'local' else ())
      for column in columns:
        self.assertBetween(float(rows[1][column]), 0.0, 1.0)
    else:
      self.assertEqual(float(rows[0]['concept_share_0']), 1.0)  # Before every change point.
      self.assertEqual(float(rows[1]['concept_share_1']), 0.0 if shift_free else 1.0)
      self.assertBetween(float(rows[1]['test_night_c1_accuracy']), 0.0, 1.0)
      self.assertEqual(summary['forgetting'], {})  # One evaluation: no concept has come back yet.

  def _check_report(self, root: str, scenario: str):
    """tables.csv, per_domain.csv and per_window.csv against a recomputation from each run's metrics.csv: per method
    the mean and standard error over its seeds (|a - b| / 2 for two, 0 for one), and the best mean of each column
    marked."""
    output = os.path.join(root, 'report')
    files = report_writer.write(root, output)
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
        if scenario == 'windowed':
          final.update(_windowed_measures(rows))
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
            # A column some seeds lack (windowed's corrupted domains are drawn per seed) averages the others.
            self.assertEqual(int(row['seeds']), len(_seeds(scenario, algorithm.split(' ')[0])))
            self.assertAlmostEqual(float(row[f'{column}_mean']), np.mean(values), places=5)
            error = abs(values[0] - values[1]) / 2 if len(values) == 2 else 0.0
            self.assertAlmostEqual(float(row[f'{column}_se']), error, places=5)
            if not run_results.is_reference_name(algorithm):
              means[algorithm] = float(row[f'{column}_mean'])
          if column == 'share_correlation_floor':  # Describes the run (its length's noise floor): never marked.
            self.assertEqual({a for a in rows if rows[a][f'{column}_best'] == '1'}, set())
          elif len(means) > 1:
            lower_is_better = (column.startswith(('window_drop', 'window_recovery')) or '_std' in column
                               or column == 'false_alarm_rate')
            best = (min if lower_is_better else max)(means.values())
            marked = {a for a in rows if rows[a][f'{column}_best'] == '1'}
            self.assertEqual(marked, {a for a, mean in means.items() if abs(mean - best) < 1e-5 * max(1, abs(best))})


if __name__ == '__main__':
  absltest.main()
