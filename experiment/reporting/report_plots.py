"""The report's plots (matplotlib, PNG and SVG): per comparison of methods (`experiment.reporting.run_results`),

- test accuracy against rounds, one line per method (mean over seeds, the band +- one standard error, the seed count
  in the legend), with the scenario's shift drawn under it (q(t), a domain's share, the new regime's share or the
  window);
- test accuracy per domain (mode) against rounds, for up to `_MAX_MODE_CURVES` domains, with the shift under it;
- routing accuracy against rounds, for methods that route, with the shift under it and the chance line (1 / domains);
- what a method learns about the shift against the truth it should track (`LEARNED`): FedTKM's q_bar against q(t),
  FedTEM's assigned share of mode 1 against the round's realised day share, pFedEM's and FedGMM's mixture weight of
  the component that tracks domain 0 against domain 0's share (the pFedEM paper's Figure 4); the prescribed prior
  FedTEM and FedTKM are given is drawn as an input, dotted;
- the size of a method's pool against rounds (`POOLS`: FedDrift's models, ShiftEx's experts, CFL's clusters), with
  the windows under it;
- per-domain accuracy over the main table's window, one bar per method and domain with standard errors (a line per
  method over the domains in their order when there are more than `_MAX_BARS` domains, e.g. the FedEvolve paper's
  30 rotations);
- accuracy on test batches that mix the two modes against the day share q of every batch, for runs evaluated on
  them (`--mixed_test_q`);
and, when a numeric flag is swept, the final accuracy against its values, one line per method (the paper's
accuracy against p). Running runs are drawn with what they have so far.
"""

import dataclasses
import re
from typing import Optional

import matplotlib

matplotlib.use('Agg')
import cycler  # pylint: disable=g-import-not-at-top
import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
import numpy as np

from algorithms.core import metric_names
from experiment.core import shift_metrics
from experiment.reporting import metric_labels
from experiment.reporting import run_results

# The accuracy a curve shows, the first one the runs report.
ACCURACIES = ('test_mixture_accuracy', 'test_accuracy', 'target_accuracy', 'personalized_accuracy')
# What the shift looks like, the first column the rows have: a short label for the panel under a plot.
SHIFTS = (('q', 'q(t)'), ('scheduled_share_0', 'share of\ndomain 0'), ('domain_share_0', 'share of\ncomponent 0'),
          ('new_regime_share', 'share in\nnew regime'), ('concept_share_1', 'share of\nconcept 1'),
          ('window', 'window'))
# What a method learns about the shift, the truth it should track, and what the line is.
LEARNED = (('q_bar', 'q', 'q_bar: the learned share of the day cluster (FedTKM)'),
           ('assigned_mode_one_share', 'day_fraction', 'assigned share of mode 1 (FedTEM)'))
# The truth a learned mixture share tracks: the scheduled share (mixture drift), else the round's share.
SHARE_TRUTHS = ('scheduled_share_0', 'domain_share_0')
# A method's pool of models, experts or clusters: column, label, whether the column counts the round's additions
# (summed over the rounds so far) rather than the pool.
POOLS = (('num_models', 'models (FedDrift)', False), ('spawned', 'experts spawned so far (ShiftEx)', True),
         ('num_clusters', 'clusters (CFL)', False))
_BAND = 'lines: mean over seeds (n); bands: +-1 standard error'
_MAX_MODE_CURVES = 4
_FIGURE_SIZE = (7.0, 4.2)
_MAX_BARS = 8
_MAX_LEGEND_INSIDE = 8  # More entries than this go right of the axes: inside, 21 methods covered the curves.
# Ten colours, then the same colours dashed, dotted and dash-dotted: up to 40 methods stay apart (the default cycle
# repeats after ten, and the every-method grid has 21).
matplotlib.rcParams['axes.prop_cycle'] = (cycler.cycler(linestyle=['-', '--', ':', '-.']) *
                                          cycler.cycler(color=plt.get_cmap('tab10').colors))


def _legend(axes, title: Optional[str] = None) -> None:
  if len(axes.get_legend_handles_labels()[0]) > _MAX_LEGEND_INSIDE:
    axes.legend(fontsize=7, loc='upper left', bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, title=title,
                title_fontsize=7)
  else:
    axes.legend(fontsize=8, title=title, title_fontsize=7)


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
  """`path` (PNG at 150 dpi) and the same figure as SVG beside it, for papers."""
  figure.tight_layout()
  figure.savefig(path, dpi=150, bbox_inches='tight')  # 'tight' keeps a legend placed outside the axes.
  figure.savefig(re.sub(r'\.png$', '.svg', path), bbox_inches='tight')
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


def _shift_panel(axes, runs: list[run_results.RunResult], shift_column: tuple[str, str]) -> None:
  column, label = shift_column
  reference = next(run for run in runs if any(column in row for row in run.rows))
  rows = [row for row in reference.rows if column in row]
  axes.plot([row['round'] for row in rows], [row[column] for row in rows], color='gray')
  axes.set_ylabel(label, fontsize=8)
  axes.set_xlabel('round')
  axes.grid(alpha=0.3)


def _axes_with_shift(runs: list[run_results.RunResult], shift: bool):
  """(figure, top axes, the shift column drawn under them or None, the bottom axes or None)."""
  shift_column = next(((c, label) for c, label in SHIFTS if any(c in row for run in runs for row in run.rows)),
                      None) if shift else None
  if shift_column is None:
    figure, top = plt.subplots(figsize=_FIGURE_SIZE)
    return figure, top, None, None
  figure, (top, bottom) = plt.subplots(2, 1, figsize=(_FIGURE_SIZE[0], _FIGURE_SIZE[1] + 0.6), sharex=True,
                                       gridspec_kw={'height_ratios': [3, 1]})
  return figure, top, shift_column, bottom


def _finish_over_rounds(figure, top, bottom, runs, shift_column, ylabel: str, title: str, path: str) -> None:
  top.set_ylabel(ylabel, fontsize=9)
  top.set_title(title, fontsize=10)
  top.grid(alpha=0.3)
  _legend(top, _BAND)
  if shift_column is not None:
    _shift_panel(bottom, runs, shift_column)
  else:
    top.set_xlabel('round')
  _save(figure, path)


def curves(methods: dict[str, list[run_results.RunResult]], metric: str, title: str, path: str,
           shift: bool = True, chance: Optional[float] = None) -> bool:
  """`metric` against rounds per method (with the shift under it, and a dashed chance line when given); False when
  no run reports the metric."""
  runs = [run for group in methods.values() for run in group]
  figure, top, shift_column, bottom = _axes_with_shift(runs, shift)
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
  if chance is not None:
    top.axhline(chance, color='black', linestyle=':', linewidth=1, label=f'chance ({chance:.2g})')
  _finish_over_rounds(figure, top, bottom, runs, shift_column, metric_labels.curve_label(metric), title, path)
  return True


def chance_routing(runs: list[run_results.RunResult]) -> Optional[float]:
  """Routing accuracy by chance: 1 / the branches the runs route between (`num_branches`), else 1 / the domains
  they are tested on."""
  branches = {run.config.get('num_branches') for run in runs if run.config.get('num_branches')}
  if len(branches) == 1:
    return 1.0 / branches.pop()
  domains = domain_names([row for run in runs for row in run.evaluations()])
  return 1.0 / len(domains) if domains else None


def mode_curves(methods: dict[str, list[run_results.RunResult]], title: str, path: str) -> bool:
  """Each domain's test accuracy against rounds per method (a colour per method, a line style per domain), and the
  batches mixing the modes at a share strictly between 0 and 1 (`--mixed_test_q`), with the shift under it; False
  without per-domain columns or with more than `_MAX_MODE_CURVES` domains."""
  runs = [run for group in methods.values() for run in group]
  rows = [row for run in runs for row in run.evaluations()]
  domains = domain_names(rows)
  if not domains or len(domains) > _MAX_MODE_CURVES:
    return False
  mixed = sorted({key for row in rows for key in row
                  for match in [re.fullmatch(re.escape(metric_names.MIXED_PREFIX) + r'([\d.]+)_accuracy', key)]
                  if match and 0 < float(match.group(1)) < 1})
  series = [(f'test_{domain}_accuracy', domain) for domain in domains] + [
      (column, f'mixed, q={column[len(metric_names.MIXED_PREFIX):-len("_accuracy")]}') for column in mixed]
  figure, top, shift_column, bottom = _axes_with_shift(runs, True)
  colours = plt.get_cmap('tab10').colors
  for index, (method, group) in enumerate(methods.items()):
    for (column, domain), style in zip(series, ('-', '--', ':', '-.', (0, (1, 4)), (0, (5, 1)))):
      rounds, mean, error = mean_curve(group, column)
      if len(rounds):
        colour = colours[index % len(colours)]
        top.plot(rounds, mean, linestyle=style, color=colour, label=f'{method}, {domain} ({len(group)})')
        top.fill_between(rounds, mean - error, mean + error, color=colour, alpha=0.12)
  _finish_over_rounds(figure, top, bottom, runs, shift_column, 'test accuracy on each domain and mixed batches', title,
                      path)
  return True


def _with_mixture_shares(run: run_results.RunResult) -> list[dict]:
  """The run's rows with FedGMM's learned mixture over its Gaussians (`global_pi_<g>_<l>` summed over the learners
  l) as `learned_share_<g>`."""
  rows = []
  for row in run.rows:
    shares = {}
    for key, value in row.items():
      match = re.fullmatch(r'global_pi_(\d+)_\d+', key)
      if match:
        shares[f'learned_share_{match.group(1)}'] = shares.get(f'learned_share_{match.group(1)}', 0.0) + value
    rows.append(dict(row, **shares) if shares else row)
  return rows


def learned_columns(run: run_results.RunResult) -> Optional[tuple[str, str, str]]:
  """(learned column, true column, what the learned line is) of the run's estimate of the shift (`LEARNED`, or the
  learned mixture share that tracks domain 0), or None when the method learns none."""
  if not run.rows:
    return None
  present = {key for row in run.rows for key, value in row.items() if np.isfinite(value)}
  for learned, true, what in LEARNED:
    if learned in present and true in present:
      return learned, true, what
  rows = _with_mixture_shares(run)
  for truth in SHARE_TRUTHS:
    column = shift_metrics.tracking_share(rows, truth)
    if column:
      return column, truth, f'{column}: the learned share of the component matched to domain 0'
  return None


def learned_shift(methods: dict[str, list[run_results.RunResult]], title: str, path: str) -> bool:
  """Each method's learned estimate of the shift (mean over seeds) and the truth it should track (dashed) against
  rounds, the prescribed prior an input (dotted); False when no method learns one."""
  figure, axes = plt.subplots(figsize=_FIGURE_SIZE)
  truths, inputs = set(), set()
  for method, group in methods.items():
    series, what = [], ''
    for run in group:
      columns = learned_columns(run)
      if columns is None:
        continue
      learned, true, what = columns
      rows = _with_mixture_shares(run)
      series.append({row['round']: row[learned] for row in rows if np.isfinite(row.get(learned, np.nan))})
      if true not in truths:
        truths.add(true)
        axes.plot([row['round'] for row in rows if true in row], [row[true] for row in rows if true in row],
                  color='black', linestyle=('--', '-.', ':')[(len(truths) - 1) % 3], linewidth=1,
                  label=f'truth: {true}')
      if 'prior' in run.rows[0] and 'prior' not in inputs:
        inputs.add('prior')
        axes.plot([row['round'] for row in run.rows if 'prior' in row],
                  [row['prior'] for row in run.rows if 'prior' in row], color='gray', linestyle=':',
                  linewidth=1, label='prescribed prior q~(t) (input)')
    if series:
      rounds = sorted(set.intersection(*(set(s) for s in series)))
      axes.plot(rounds, [np.mean([s[r] for s in series]) for r in rounds], label=f'{method} ({len(series)}): {what}')
  if not truths:
    plt.close(figure)
    return False
  axes.set_ylim(-0.05, 1.05)
  axes.legend(fontsize=7, loc='upper center', bbox_to_anchor=(0.5, -0.18), ncol=2)  # Below: the lines fill the axes.
  axes.set_xlabel('round')
  axes.set_ylabel('share (learned: mean over n seeds)')
  axes.set_title(title, fontsize=10)
  axes.grid(alpha=0.3)
  _save(figure, path)
  return True


def _cumulative(run: run_results.RunResult, column: str) -> run_results.RunResult:
  """`run` with `column` summed over its rounds so far."""
  total, rows = 0.0, []
  for row in run.rows:
    if column in row:
      total += row[column]
      row = dict(row, **{column: total})
    rows.append(row)
  return dataclasses.replace(run, rows=rows)


def pools(methods: dict[str, list[run_results.RunResult]], title: str, path: str) -> bool:
  """The size of each method's pool (`POOLS`) against rounds, mean over seeds, with the windows under it; False
  when no method has one."""
  runs = [run for group in methods.values() for run in group]
  figure, top, shift_column, bottom = _axes_with_shift(runs, True)
  drawn = False
  for method, group in methods.items():
    for column, label, added in POOLS:
      if added:
        group = [_cumulative(run, column) for run in group]
      rounds, mean, error = mean_curve(group, column)
      if len(rounds):
        drawn = True
        line, = top.plot(rounds, mean, drawstyle='steps-post', label=f'{method} ({len(group)}): {label}')
        top.fill_between(rounds, mean - error, mean + error, color=line.get_color(), alpha=0.2, step='post')
  if not drawn:
    plt.close(figure)
    return False
  _finish_over_rounds(figure, top, bottom, runs, shift_column, 'pool size', title, path)
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
  window = 'last-period mean' if over_period else 'last evaluation'
  axes.set_ylabel(f'test accuracy ({window})\nerror bars: +-1 standard error', fontsize=9)
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
  _finish(figure, axes, flag, f'{metric_labels.curve_label(metric)} (last evaluation)', '', path)
  return True
