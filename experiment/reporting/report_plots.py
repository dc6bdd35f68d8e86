"""The report's plots (matplotlib, PNG): per comparison of methods (`experiment.reporting.run_results`),

- test accuracy against rounds, one line per method (mean over seeds, the band +- one standard error), with the
  scenario's shift drawn under it (q(t), a domain's share, the new regime's share or the window);
- routing accuracy against rounds, for methods that route;
- a method's own estimate of the shift against the true one, for methods that learn one: FedTEM's and FedTKM's
  temporal prior of the day mode against q(t), pFedEM's mixture weight of the component that tracks domain 0 best
  against domain 0's imposed share (the pFedEM paper's Figure 4);
- per-domain accuracy of the last evaluation, one bar per method and domain (a line per method over the domains in
  their order when there are more than `_MAX_BARS` domains, e.g. the FedEvolve paper's 30 rotations);
- accuracy on test batches that mix the two modes against the day share q of every batch, for runs evaluated on
  them (`--mixed_test_q`);
and, when a numeric flag is swept, the final accuracy against its values, one line per method (the paper's
accuracy against p). Running runs are drawn with what they have so far.
"""

import re
from typing import Optional

import matplotlib

matplotlib.use('Agg')
import cycler  # pylint: disable=g-import-not-at-top
import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
import numpy as np

from algorithms.core import metric_names
from experiment.reporting import run_results
from experiment.core import shift_metrics

# The accuracy a curve shows, the first one the runs report.
ACCURACIES = ('test_mixture_accuracy', 'test_accuracy', 'target_accuracy', 'personalized_accuracy')
# What the shift looks like, the first column the rows have: label.
SHIFTS = (('q', 'q(t), probability of the day mode'), ('scheduled_share_0', 'share of domain 0'),
          ('domain_share_0', 'share of component 0'), ('new_regime_share', 'share in the new regime'),
          ('concept_share_1', 'share of concept 1'), ('window', 'window'))
_FIGURE_SIZE = (7.0, 4.2)
_MAX_BARS = 8
_MAX_LEGEND_INSIDE = 8  # More entries than this go right of the axes: inside, 21 methods covered the curves.
# Ten colours, then the same colours dashed, dotted and dash-dotted: up to 40 methods stay apart (the default cycle
# repeats after ten, and the every-method grid has 21).
matplotlib.rcParams['axes.prop_cycle'] = (cycler.cycler(linestyle=['-', '--', ':', '-.']) *
                                          cycler.cycler(color=plt.get_cmap('tab10').colors))


def _legend(axes) -> None:
  if len(axes.get_legend_handles_labels()[0]) > _MAX_LEGEND_INSIDE:
    axes.legend(fontsize=7, loc='upper left', bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
  else:
    axes.legend(fontsize=8)


def _mean_lines(axes, lines: dict[str, dict[float, list[float]]]) -> None:
  """A line per label through x -> values: the mean of the values at each x, +- their standard error (0 for one)."""
  for label, points in lines.items():
    x = sorted(points)
    error = [np.std(points[v], ddof=1) / np.sqrt(len(points[v])) if len(points[v]) > 1 else 0.0 for v in x]
    axes.errorbar(x, [np.mean(points[v]) for v in x], yerr=error, marker='o', capsize=3, label=label)


def _finish(figure, axes, xlabel: str, ylabel: str, title: str, path: str) -> None:
  """Labels, grid and legend of a line plot, then `_save`."""
  axes.set_xlabel(xlabel)
  axes.set_ylabel(ylabel)
  if title:
    axes.set_title(title, fontsize=10)
  axes.grid(alpha=0.3)
  _legend(axes)
  _save(figure, path)


def _save(figure, path: str) -> None:
  figure.tight_layout()
  figure.savefig(path, dpi=110, bbox_inches='tight')  # 'tight' keeps a legend placed outside the axes.
  plt.close(figure)


def natural_key(name: str) -> list:
  """Sorts names with numbers by their numbers: rot6.2 before rot12.4 before rot105.5."""
  return [(0, float(part), '') if index % 2 else (1, 0.0, part)
          for index, part in enumerate(re.split(r'(\d+(?:\.\d+)?)', name))]


def domain_names(rows: list[dict]) -> list[str]:
  """The domains of `test_<domain>_accuracy` columns in `rows`, in natural order."""
  domains = {match.group(1) for row in rows for key in row
             for match in [re.fullmatch(r'test_(.+)_accuracy', key)] if match and match.group(1) != 'mixture'}
  return sorted(domains, key=natural_key)


def accuracy_metric(runs: list[run_results.RunResult]) -> Optional[str]:
  for name in ACCURACIES:
    if any(name in row for run in runs for row in run.rows):
      return name
  return None


def mean_curve(runs: list[run_results.RunResult], metric: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """(rounds, mean, standard error) of `metric` over the runs, at the rounds every run that reports it has."""
  series = [{row['round']: row[metric] for row in run.rows if metric in row} for run in runs]
  series = [s for s in series if s]
  if not series:
    return np.array([]), np.array([]), np.array([])
  rounds = sorted(set.intersection(*(set(s) for s in series)))
  values = np.array([[s[r] for r in rounds] for s in series])
  error = values.std(axis=0, ddof=1) / np.sqrt(len(series)) if len(series) > 1 else np.zeros(len(rounds))
  return np.array(rounds), values.mean(axis=0), error


def _label(values: tuple, keys: list[str], exclude: str = run_results.METHOD) -> str:
  parts = [f'{key}={value}' for key, value in zip(keys, values) if key != exclude]
  return ', '.join(parts) or 'all runs'


def curves(methods: dict[str, list[run_results.RunResult]], metric: str, title: str, path: str,
           shift: bool = True) -> bool:
  """`metric` against rounds per method (with the shift under it); False when no run reports the metric."""
  runs = [run for group in methods.values() for run in group]
  shift_column = next(((c, label) for c, label in SHIFTS if any(c in row for run in runs for row in run.rows)),
                      None) if shift else None
  if shift_column is not None:
    figure, (top, bottom) = plt.subplots(2, 1, figsize=_FIGURE_SIZE, sharex=True,
                                         gridspec_kw={'height_ratios': [3, 1]})
  else:
    figure, top = plt.subplots(figsize=_FIGURE_SIZE)
  drawn = False
  for method, group in methods.items():
    rounds, mean, error = mean_curve(group, metric)
    if not len(rounds):
      continue
    drawn = True
    line, = top.plot(rounds, mean, marker='.' if len(rounds) < 30 else None, label=f'{method} ({len(group)})')
    top.fill_between(rounds, mean - error, mean + error, color=line.get_color(), alpha=0.2)
  if not drawn:
    plt.close(figure)
    return False
  top.set_ylabel(metric)
  top.set_title(title, fontsize=10)
  top.grid(alpha=0.3)
  _legend(top)
  if shift_column is not None:
    column, label = shift_column
    reference = next(run for run in runs if any(column in row for row in run.rows))
    rows = [row for row in reference.rows if column in row]
    bottom.plot([row['round'] for row in rows], [row[column] for row in rows], color='gray')
    bottom.set_ylabel(label, fontsize=8)
    bottom.set_xlabel('round')
    bottom.grid(alpha=0.3)
  else:
    top.set_xlabel('round')
  _save(figure, path)
  return True


def learned_columns(run: run_results.RunResult) -> Optional[tuple[str, str]]:
  """(learned column, true column) of the run's estimate of the shift (module docstring), or None."""
  if not run.rows:
    return None
  if 'q' in run.rows[0] and any(np.isfinite(row.get('prior', np.nan)) for row in run.rows):
    return 'prior', 'q'
  column = shift_metrics.tracking_share(run.rows)
  return (column, 'scheduled_share_0') if column else None


def learned_shift(methods: dict[str, list[run_results.RunResult]], title: str, path: str) -> bool:
  """Each method's learned estimate of the shift (mean over seeds) and the true value (dashed) against rounds;
  False when no method learns one."""
  figure, axes = plt.subplots(figsize=_FIGURE_SIZE)
  true_label = None
  for method, group in methods.items():
    series = []
    for run in group:
      columns = learned_columns(run)
      if columns is None:
        continue
      learned, true = columns
      series.append({row['round']: row[learned] for row in run.rows if np.isfinite(row.get(learned, np.nan))})
      if true_label is None:
        true_label = true
        axes.plot([row['round'] for row in run.rows], [row[true] for row in run.rows], 'k--', label=f'true: {true}')
    if series:
      rounds = sorted(set.intersection(*(set(s) for s in series)))
      axes.plot(rounds, [np.mean([s[r] for s in series]) for r in rounds], label=f'{method} ({len(series)})')
  if true_label is None:
    plt.close(figure)
    return False
  _finish(figure, axes, 'round', 'learned prior or share (mean over seeds)', title, path)
  return True


def mixed_batches(methods: dict[str, list[run_results.RunResult]], title: str, path: str) -> bool:
  """Accuracy on test batches mixing the modes against the share q of mode 1 in every batch (mean over the last
  period of evaluations, `mixed_q<q>_accuracy_last_period_mean`; mean and standard error over seeds), a line per
  method; False without mixed batches."""
  pattern = re.compile(re.escape(metric_names.MIXED_PREFIX) + r'(.+)_accuracy_last_period_mean')
  lines = {}
  for method, group in methods.items():
    points: dict[float, list[float]] = {}
    for run in group:
      for key, value in (run.summary or {}).get('final_metrics', {}).items():
        match = pattern.fullmatch(key)
        if match:
          points.setdefault(float(match.group(1)), []).append(value)
    if points:
      lines[method] = points
  if not lines:
    return False
  figure, axes = plt.subplots(figsize=_FIGURE_SIZE)
  _mean_lines(axes, lines)
  _finish(figure, axes, 'share q of mode 1 (day) in every test batch', 'test accuracy (last period mean)', title,
          path)
  return True


def _domain_accuracies(run: run_results.RunResult) -> tuple[dict[str, float], bool]:
  """(domain -> accuracy, whether over the last period) of a run: the last-period means of a finished run's summary
  (the main table's window), else its last evaluation."""
  final = (run.summary or {}).get('final_metrics', {})
  means = {match.group(1): value for key, value in final.items()
           for match in [re.fullmatch(r'test_(.+)_accuracy_last_period_mean', key)] if match and
           match.group(1) != 'mixture'}
  if means:
    return means, True
  last = run.evaluations()[-1] if run.evaluations() else {}
  return {domain: last[f'test_{domain}_accuracy'] for domain in domain_names([last])}, False


def domain_bars(methods: dict[str, list[run_results.RunResult]], title: str, path: str) -> bool:
  """Per-domain accuracy per method, mean +- standard error over seeds, over the last period where every run has it
  (else the last evaluation); False without per-domain columns."""
  accuracies = {method: [_domain_accuracies(run) for run in group] for method, group in methods.items()}
  over_period = all(period for runs in accuracies.values() for _, period in runs)
  last = {method: [values for values, _ in runs] for method, runs in accuracies.items()}
  domains = sorted({domain for rows in last.values() for row in rows for domain in row}, key=natural_key)
  if not domains:
    return False
  lines = len(domains) > _MAX_BARS
  width_inches = _FIGURE_SIZE[0] if lines else min(10.0, max(_FIGURE_SIZE[0], 0.35 * len(domains) * len(last)))
  figure, axes = plt.subplots(figsize=(width_inches, _FIGURE_SIZE[1]))
  width = 0.8 / max(len(last), 1)
  positions = np.arange(len(domains))
  for index, (method, rows) in enumerate(last.items()):
    values = [[row[d] for row in rows if d in row] for d in domains]
    means = [np.mean(v) if v else np.nan for v in values]
    errors = [np.std(v, ddof=1) / np.sqrt(len(v)) if len(v) > 1 else 0.0 for v in values]
    seeds = max((len(v) for v in values), default=0)
    label = f'{method} ({seeds} seeds)'
    if lines:
      axes.errorbar(positions, means, yerr=errors, marker='.', capsize=2, label=label)
    else:
      axes.bar(positions + index * width, means, width, yerr=errors, capsize=2, label=label)
  step = max(1, len(domains) // 15)  # At most about 15 labels.
  shown = positions[::step]
  axes.set_xticks(shown if lines else shown + 0.4 - width / 2)
  axes.set_xticklabels(domains[::step], rotation=45 if len(domains) > 4 else 0,
                       ha='right' if len(domains) > 4 else 'center', fontsize=8)
  window = 'mean over the last period' if over_period else 'last evaluation'
  axes.set_ylabel(f'test accuracy ({window}; bars: +-1 standard error)')
  axes.set_title(title, fontsize=10)
  _legend(axes)
  axes.grid(alpha=0.3, axis='y')
  _save(figure, path)
  return True


def swept(runs: list[run_results.RunResult], keys: list[str], flag: str, metric: str, path: str) -> bool:
  """The last evaluation's `metric` against the values of a swept numeric `flag`, one line per method (other
  settings pooled only when equal: one line per method and remaining setting)."""
  lines: dict[str, dict[float, list[float]]] = {}
  for run in runs:
    evaluations = [row for row in run.evaluations() if metric in row]
    value = run.config.get(flag)
    if not evaluations or not isinstance(value, (int, float)) or not np.isfinite(value):  # No place for inf.
      continue
    others = tuple((k, run.config.get(k)) for k in keys if k != flag)
    label = ', '.join(f'{v}' for _, v in others)
    lines.setdefault(label, {}).setdefault(float(value), []).append(evaluations[-1][metric])
  if not lines or max(len(points) for points in lines.values()) < 2:
    return False
  figure, axes = plt.subplots(figsize=_FIGURE_SIZE)
  _mean_lines(axes, dict(sorted(lines.items())))
  _finish(figure, axes, flag, f'{metric} (last evaluation)', '', path)
  return True
