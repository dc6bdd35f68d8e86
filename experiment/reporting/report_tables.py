"""The report's tables: every metric that applies to a root's finished runs, mean +- standard error over seeds.

Per run the figures come from its `summary.json`: the last evaluation (`final_metrics`), the mean over the last
period of evaluations (`test_accuracy_last_period_mean`), the training accuracy averaged over the last 10 rounds
(`train_accuracy_last_10_rounds_mean`, from metrics.csv: a round's training accuracy is one round's batches), the
windows' drop / recovery / max accuracy averaged over the run's windows (and per window, for the per-window table),
and the recurring concepts' forgetting averaged over its concepts. Held-out clients' accuracy has a server view
(`<name>_server_accuracy`, the FedEvolve paper's "server accuracy") beside the personalized one; a method with a
global model that does not personalize (it reports `test_accuracy` but no server view) has one model for both, so its
server view is its `<name>_accuracy`. Runs whose scenario schedules a mixture (`scheduled_share_0`, the pFedEM
paper's cycles) add the pFedEM paper's measures from their metrics.csv (`experiment.core.shift_metrics`): the mean of
`test_mixture_accuracy` over the evaluations (`test_mixture_accuracy_mean`), its standard deviation over the last two
cycles (`test_mixture_accuracy_std_last_cycles`, Table I), the last evaluation's mean of the per-domain accuracies
(`balanced_mix_accuracy`: every base in equal share, the 50/50 mix of Figure 2) and, for a method that learns mixture
weights, the signed correlation of the share matched to base 0 with the imposed share (`share_correlation`, Figure 4)
and beside it what noise reaches for that run length (`share_correlation_floor`). Windowed runs of a method that
detects shifts add the detector's rates against the simulation's truth (`detection_rate`, `false_alarm_rate`) and the
ARI of its assignment against the true regimes (`regime_ari`), from `summary.json` (`experiment.core.shift_metrics`).
Runs with `--aggregator=dp` add their epsilon (`dp_epsilon`: set by the noise multiplier and the rounds, the same for
every method of a comparison). A column appears when at least one run reports it; `columns` chooses and orders them;
the headline metric of the runs' scenario (summary.json's `headline_metric`, the scenario module's `HEADLINE_METRIC`)
comes first when the runs share one, and the mixed-mode batches (`--mixed_test_q`) follow the test accuracies.
Headers are labels with units and averaging windows (`metric_labels`; the CSV keeps the metric names). Rows are
settings (`experiment.reporting.run_results`); within a comparison (settings that differ only in the method) the best
mean of each column is marked (bold in markdown, `best` in the CSV): highest, or lowest for losses, drops, recovery
times, false alarms and forgetting; the columns that describe a run (`share_correlation_floor`, `dp_epsilon`) are not
marked. Reference rows (No-Dist-Shift, runs that decided with the test labels: `run_results.is_reference_name`) are
marked as such and never marked best.
"""

import csv
import html
import io
import json
import re
from typing import Optional

import numpy as np

from experiment.reporting import metric_labels
from experiment.reporting import report_plots
from experiment.reporting import run_results
from experiment.core import shift_metrics

# (column, lower is better), in table order; None for a column that describes the run rather than scores it (the
# noise floor of `share_correlation`, the privacy budget), which is never marked best.
MAIN_COLUMNS = (
    ('test_accuracy_last_period_mean', False), ('test_accuracy', False), ('test_mixture_accuracy', False),
    ('personalized_accuracy', False), ('personalized_server_accuracy', False), ('unseen_accuracy', False),
    ('target_accuracy', False), ('target_server_accuracy', False), ('routing_accuracy', False),
    ('routing_accuracy_matched', False), ('routing_accuracy_run_matched', False),
    ('test_mixture_accuracy_mean', False), ('test_mixture_accuracy_std_last_cycles', True),
    ('balanced_mix_accuracy', False), ('share_correlation', False), ('share_correlation_floor', None), ('routing_ari', False),
    ('train_routing_accuracy_run_matched', False), ('novelty_auroc', False),
    ('novelty_average_precision', False), ('novelty_max_f1', False), ('window_drop', True), ('window_recovery_rounds', True),
    ('window_max_accuracy', False), ('regime_ari', False), ('detection_rate', False), ('false_alarm_rate', True),
    ('forgetting', True), ('dp_epsilon', None))
_HELD_OUT = ('personalized', 'unseen', 'target')
WINDOW_FIELDS = (('drop', True), ('recovery_rounds', True), ('max_accuracy', False))  # (field, lower is better)


def run_metrics(run: run_results.RunResult) -> dict[str, float]:
  """The table figures of one finished run (see the module docstring)."""
  final = dict(run.summary.get('final_metrics', {}))
  if 'test_accuracy' in final:
    for name in _HELD_OUT:
      if f'{name}_accuracy' in final:
        final.setdefault(f'{name}_server_accuracy', final[f'{name}_accuracy'])
  trained = [row['train_accuracy'] for row in run.rows if 'train_accuracy' in row]
  if len(trained) >= 10:  # The window is in the figure's name, as metric_labels shows it.
    final['train_accuracy_last_10_rounds_mean'] = float(np.mean(trained[-10:]))
  windows = run.summary.get('window_metrics') or []
  for field, _ in WINDOW_FIELDS:
    values = [w[field] for w in windows if w.get(field) is not None]
    if values:
      final[f'window_{field}'] = float(np.mean(values))
    for w in windows:  # Per window, for the per-window table (the ShiftEx paper's Tables 1 and 2).
      if w.get(field) is not None:
        final[f'window_{w["window"]}_{field}'] = float(w[field])
  detection = run.summary.get('detection') or {}  # The ShiftEx paper's detector against the simulation's truth.
  for key in ('detection_rate', 'false_alarm_rate'):
    if detection.get(key) is not None:
      final[key] = float(detection[key])
  if (run.summary.get('regime_ari') or {}).get('mean') is not None:
    final['regime_ari'] = float(run.summary['regime_ari']['mean'])
  forgetting = list((run.summary.get('forgetting') or {}).values())
  if forgetting:
    final['forgetting'] = float(np.mean(forgetting))
  if 'epsilon' in run.summary.get('privacy', {}):  # --aggregator=dp (`algorithms.core.privacy_accounting`).
    final['dp_epsilon'] = float(run.summary['privacy']['epsilon'])
  if run.rows and 'scheduled_share_0' in run.rows[0]:
    final.update(_mixture_drift_measures(run))
  return final


def _mixture_drift_measures(run: run_results.RunResult) -> dict[str, float]:
  """The pFedEM paper's measures (module docstring) of a finished run under a scheduled mixture."""
  evaluated = [row for row in run.rows if 'test_mixture_accuracy' in row]
  accuracies = [row['test_mixture_accuracy'] for row in evaluated]
  last = evaluated[-1]
  measures = {
      'test_mixture_accuracy_mean': float(np.mean(accuracies)),
      'test_mixture_accuracy_std_last_cycles': shift_metrics.std_over_last_cycles(
          [row['round'] for row in evaluated], accuracies, run.config['total_rounds'], run.config['num_cycles']),
      'balanced_mix_accuracy': float(np.mean([last[f'test_{name}_accuracy']
                                              for name in report_plots.domain_names([last])]))}
  correlation = shift_metrics.share_correlation(run.rows)
  if correlation is not None:
    measures['share_correlation'] = correlation
    measures['share_correlation_floor'] = shift_metrics.share_correlation_floor(run.rows)
  return measures


def mixed_columns(metrics: list[dict]) -> list[tuple[str, bool]]:
  """The mixed-mode batches' accuracy of each share q (`--mixed_test_q`), over the last period where the runs
  report that mean, else at the last evaluation; shares in order."""
  shares = sorted({re.fullmatch(r'mixed_q([\d.]+)_accuracy.*', key).group(1) for m in metrics for key in m
                   if re.fullmatch(r'mixed_q[\d.]+_accuracy.*', key)}, key=float)
  columns = []
  for share in shares:
    mean = f'mixed_q{share}_accuracy_last_period_mean'
    columns.append((mean if any(mean in m for m in metrics) else f'mixed_q{share}_accuracy', False))
  return columns


LAST_PERIOD = '_last_period_mean'


def domain_columns(metrics: list[dict], over_period: bool = True) -> list[tuple[str, bool]]:
  """The per-domain table's columns, domains in natural order (rot6 before rot12): `test_<domain>_accuracy` over the
  last period where `over_period` (the main metric's window) and the runs report it, else at the last evaluation."""
  columns = []
  for domain in report_plots.domain_names(metrics):
    mean = f'test_{domain}_accuracy{LAST_PERIOD}'
    columns.append((mean if over_period and any(mean in m for m in metrics) else f'test_{domain}_accuracy', False))
  return columns


def domain_of(column: str) -> str:
  """The domain of a per-domain column."""
  return re.fullmatch(rf'test_(.+)_accuracy(?:{LAST_PERIOD})?', column).group(1)


def window_name(table: 'Table') -> str:
  """'mean over the last period' when `table`'s columns are last-period means, else 'last evaluation'."""
  return 'mean over the last period' if all(name.endswith(LAST_PERIOD) for name, _ in table.columns) else (
      'last evaluation')


def window_columns(metrics: list[dict]) -> list[tuple[str, bool]]:
  """`window_<w>_<field>` columns of the per-window table: each window's drop, recovery rounds and max accuracy,
  windows in order."""
  windows = sorted({int(key.split('_')[1]) for m in metrics for key in m
                    if key.startswith('window_') and key.split('_')[1].isdigit()})
  return [(f'window_{w}_{field}', lower) for w in windows for field, lower in WINDOW_FIELDS]


class Cell:
  """A column's values over seeds, times `scale` (100 for percent): mean, standard error (0 for one seed), count;
  `digits` decimals in text."""

  def __init__(self, values: list[float], scale: float = 1.0, digits: int = 3):
    self.values = np.asarray(values, float) * scale
    self.digits = digits

  @property
  def mean(self) -> float:
    return float(np.mean(self.values))

  @property
  def error(self) -> float:
    if len(self.values) == 1 or np.all(self.values == self.values[0]):  # Also for equal infinities (epsilon inf).
      return 0.0
    return float(np.std(self.values, ddof=1) / np.sqrt(len(self.values)))

  def text(self) -> str:
    if len(self.values) == 1 or not np.isfinite(self.mean):  # One seed, or an infinity (epsilon without noise).
      return f'{self.mean:.{self.digits}f}'
    return f'{self.mean:.{self.digits}f} +- {self.error:.{self.digits}f}'


class Table:
  """Rows of settings x columns of cells, with the best cell of each comparison marked."""

  def __init__(self, keys: list[str], rows: list[tuple[tuple, int, dict[str, Cell]]], columns,
               percent: bool = False):
    self.keys = keys
    self.rows = rows  # (setting values, seeds, column -> Cell)
    self.columns = [(name, lower) for name, lower in columns if any(name in cells for _, _, cells in rows)]
    self.percent = percent
    self.best = self._best()

  def _header(self) -> list[str]:
    return self.keys + ['seeds'] + [metric_labels.label(name, self.percent) for name, _ in self.columns]

  def _is_reference(self, values: tuple) -> bool:
    return run_results.METHOD in self.keys and run_results.is_reference_name(
        str(values[self.keys.index(run_results.METHOD)]))

  def _best(self) -> set[tuple[int, str]]:
    """(row index, column) of every best cell within its comparison; means equal up to float rounding (1e-9
    relative, e.g. (0.0 + 0.3) / 2 = 0.15 and (0.1 + 0.2) / 2 = 0.15000000000000002) tie."""
    best = set()
    comparisons: dict[tuple, list[int]] = {}
    for index, (values, _, _) in enumerate(self.rows):
      if not self._is_reference(values):
        comparisons.setdefault(run_results.comparison_key(values, self.keys), []).append(index)
    for members in comparisons.values():
      if len(members) < 2:
        continue
      for name, lower in self.columns:
        means = {i: self.rows[i][2][name].mean for i in members if name in self.rows[i][2]}
        if lower is None or len(means) < 2:
          continue
        target = (min if lower else max)(means.values())
        best |= {(i, name) for i, mean in means.items() if np.isclose(mean, target, rtol=1e-9, atol=0.0)}
    return best

  def markdown(self) -> str:
    header = self._header()
    lines = ['| ' + ' | '.join(header) + ' |', '|' + '---|' * len(header)]
    for index, (values, seeds, cells) in enumerate(self.rows):
      texts = []
      for name, _ in self.columns:
        text = cells[name].text() if name in cells else ''
        texts.append(f'**{text}**' if (index, name) in self.best else text)
      lines.append('| ' + ' | '.join([_value(v) for v in values] + [str(seeds)] + texts) + ' |')
    return '\n'.join(lines)

  def html(self) -> str:
    header = self._header()
    lines = ['<table>', '<tr>' + ''.join(f'<th>{html.escape(h)}</th>' for h in header) + '</tr>']
    for index, (values, seeds, cells) in enumerate(self.rows):
      texts = []
      for name, _ in self.columns:
        text = html.escape(cells[name].text().replace('+-', '\u00b1')) if name in cells else ''
        texts.append(f'<td class="best">{text}</td>' if (index, name) in self.best else f'<td>{text}</td>')
      lines.append('<tr>' + ''.join(f'<td>{html.escape(_value(v))}</td>' for v in values) + f'<td>{seeds}</td>' +
                   ''.join(texts) + '</tr>')
    return '\n'.join(lines + ['</table>'])

  def csv(self) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(self.keys + ['seeds'] + [f'{name}_{part}' for name, _ in self.columns
                                             for part in ('mean', 'se', 'best')])
    for index, (values, seeds, cells) in enumerate(self.rows):
      row = [_value(v) for v in values] + [seeds]
      for name, _ in self.columns:
        cell = cells.get(name)
        row += ['', '', ''] if cell is None else [f'{cell.mean:.6g}', f'{cell.error:.6g}',
                                                  int((index, name) in self.best)]
      writer.writerow(row)
    return out.getvalue()


class DomainTable:
  """A table of one comparison for reading: a row per domain (or window), a column per method, the best method of
  each row marked (`Table` holds the same cells a row per setting, for the CSV)."""

  def __init__(self, title: str, methods: list[str], domains: list[str], cells: dict[tuple[str, str], Cell],
               row_name: str = 'domain', lower_is_better: bool = False):
    self.title, self.methods, self.domains, self.cells = title, methods, domains, cells  # (domain, method) -> Cell
    self.row_name, self.lower_is_better = row_name, lower_is_better

  def _best(self, domain: str) -> set[str]:
    means = {m: self.cells[domain, m].mean for m in self.methods
             if (domain, m) in self.cells and not run_results.is_reference_name(m)}
    if len(means) < 2:
      return set()
    target = (min if self.lower_is_better else max)(means.values())
    return {m for m, mean in means.items() if mean == target}

  def markdown(self) -> str:
    lines = [f'| {self.row_name} | ' + ' | '.join(self.methods) + ' |', '|' + '---|' * (len(self.methods) + 1)]
    for domain in self.domains:
      best = self._best(domain)
      texts = [(f'**{self.cells[domain, m].text()}**' if m in best else self.cells[domain, m].text())
               if (domain, m) in self.cells else '' for m in self.methods]
      lines.append(f'| {domain} | ' + ' | '.join(texts) + ' |')
    return '\n'.join(lines)

  def html(self) -> str:
    lines = ['<table>', f'<tr><th>{html.escape(self.row_name)}</th>' +
             ''.join(f'<th>{html.escape(m)}</th>' for m in self.methods) + '</tr>']
    for domain in self.domains:
      best = self._best(domain)
      texts = []
      for m in self.methods:
        text = html.escape(self.cells[domain, m].text().replace('+-', '\u00b1')) if (domain, m) in self.cells else ''
        texts.append(f'<td class="best">{text}</td>' if m in best else f'<td>{text}</td>')
      lines.append(f'<tr><td>{html.escape(domain)}</td>' + ''.join(texts) + '</tr>')
    return '\n'.join(lines + ['</table>'])


def _comparison_rows(table: Table) -> list[tuple[str, list[tuple[tuple, int, dict[str, Cell]]]]]:
  """The rows of `table` grouped by comparison: (title, its rows)."""
  groups: dict[tuple, list] = {}
  for row in table.rows:
    groups.setdefault(run_results.comparison_key(row[0], table.keys), []).append(row)
  return [(comparison_title(comparison, table.keys), rows) for comparison, rows in groups.items()]


def comparison_title(comparison: tuple, keys: list[str]) -> str:
  others = [key for key in keys if key != run_results.METHOD]
  return ', '.join(f'{key}={value}' for key, value in zip(others, comparison)) or 'all runs'


def footing_notes(table: Table, runs: list[run_results.RunResult]) -> dict[str, str]:
  """The comparisons of `table` whose finished `runs` differ in a flag they share: title -> `run_results.footing_note`
  (the report prints it beside the comparison's table)."""
  groups: dict[str, list] = {}
  for run in runs:
    if run.finished:
      key = run_results.comparison_key(run_results.setting(run, table.keys), table.keys)
      groups.setdefault(comparison_title(key, table.keys), []).append(run)
  notes = {title: run_results.footing_note(members) for title, members in groups.items()}
  return {title: note for title, note in notes.items() if note}


def _comparisons(table: Table) -> list[tuple[str, list[str], list[dict[str, Cell]]]]:
  """The rows of `table` grouped by comparison: (title, methods, each method's cells)."""
  method_index = table.keys.index(run_results.METHOD) if run_results.METHOD in table.keys else None
  return [(title, [str(values[method_index]) if method_index is not None else 'all' for values, _, _ in rows],
           [cells for _, _, cells in rows]) for title, rows in _comparison_rows(table)]


def comparison_tables(table: Table) -> list[tuple[str, Table]]:
  """`table` split by comparison for reading, (title, table) each, a row per method and only the columns some of
  its methods have (a grid over scenarios has a few columns per scenario and dozens in all)."""
  if run_results.METHOD not in table.keys:
    return [('all runs', table)]
  method_index = table.keys.index(run_results.METHOD)
  return [(title, Table([run_results.METHOD], [((values[method_index],), seeds, cells)
                                               for values, seeds, cells in rows], table.columns, table.percent))
          for title, rows in _comparison_rows(table)]


def domain_tables(table: Table) -> list[DomainTable]:
  """The per-domain `table` split by comparison, each turned a row per domain."""
  result = []
  for title, methods, members in _comparisons(table):
    cells = {(domain_of(name), method): cell
             for method, row_cells in zip(methods, members) for name, cell in row_cells.items()}
    domains = [domain_of(name) for name, _ in table.columns if any(name in row_cells for row_cells in members)]
    result.append(DomainTable(title, methods, domains, cells))
  return result


def window_tables(table: Table) -> list[DomainTable]:
  """The per-window `table` split by comparison and by measure (drop, recovery rounds, max accuracy), each a row
  per window and a column per method."""
  result = []
  for title, methods, members in _comparisons(table):
    for field, lower in WINDOW_FIELDS:
      cells = {(name.split('_')[1], method): cell for method, row_cells in zip(methods, members)
               for name, cell in row_cells.items() if name.endswith(f'_{field}')}
      windows = sorted({window for window, _ in cells}, key=int)
      if windows:
        result.append(DomainTable(f'{title}: {metric_labels.window_field_label(field, table.percent)}', methods,
                                  windows, cells, 'window', lower))
  return result


def _value(value) -> str:
  return '-' if value is None else str(value)


def build(runs: list[run_results.RunResult], per_domain: bool = False, columns: Optional[list[str]] = None,
          percent: bool = False, per_window: bool = False) -> Optional[Table]:
  """The main table (or the per-domain accuracy table, or the per-window drop / recovery / max table) of the
  finished `runs`; None without finished runs.

  `columns`: the metrics to show, in order (default: every `MAIN_COLUMNS` one that applies); `percent`: accuracies
  and accuracy drops as percentages with two decimals, as the papers' tables print them.
  """
  finished = [run for run in runs if run.finished]
  if not finished:
    return None
  keys = run_results.setting_keys(finished) or [run_results.METHOD]
  if run_results.METHOD not in keys and any(run_results.uses_test_labels(run) or run_results.is_no_shift(run)
                                            for run in finished):
    keys = [run_results.METHOD] + keys  # The method column carries the reference marks.
  rows = []
  all_metrics = [run_metrics(run) for run in finished]
  headlines = {run.summary.get('headline_metric') for run in finished}
  main = headlines.pop() if len(headlines) == 1 else None
  if per_domain:  # Over the main metric's window: the last period, or the last evaluation.
    chosen = domain_columns(all_metrics, over_period=main is None or main.endswith(LAST_PERIOD))
  elif per_window:
    chosen = window_columns(all_metrics)
  elif columns:
    lower = dict(MAIN_COLUMNS)
    chosen = [(name, lower.get(name, False)) for name in columns]
  else:
    chosen = list(MAIN_COLUMNS)
    chosen[3:3] = mixed_columns(all_metrics)  # After the test and mixture accuracies.
    if main:  # One scenario: its main metric first.
      chosen.sort(key=lambda column: column[0] != main)
  for values, group in run_results.by_setting(finished, keys).items():
    metrics = [run_metrics(run) for run in group]
    cells = {}
    for name, _ in chosen:
      if any(name in m for m in metrics):
        scale = 100.0 if percent and metric_labels.is_share(name) else 1.0
        digits = 2 if scale != 1.0 else 4 if '_std' in name else 3  # Standard deviations are small.
        cells[name] = Cell([m[name] for m in metrics if name in m], scale, digits)
    rows.append((values, len({json.dumps(run.config.get('seed')) for run in group}), cells))
  return Table(keys, rows, chosen, percent)
