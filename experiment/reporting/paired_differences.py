"""Paired differences between a method and each baseline over seeds: what a claim "the method does better than the
baseline" rests on.

In every setting of the runs (their flags but the method and the seed), each seed run by both the method and a
baseline gives one difference d_s = figure(method, s) - figure(baseline, s) of a table figure
(`report_tables.run_metrics`). A row has n, the mean of the d_s, its standard error and the 95% interval
mean +- t(0.975, n - 1) SE (`claims.interval`). Pairing by seed removes what a seed's runs share (the regimes drawn,
the population, the participants, the initial weights) from the noise. The verdict on "the method does better" is
the claims' rule (`claims.verdict`, at its minimum of seeds), with the better side higher, or lower for the figures
where lower is better (drops, recovery times, false alarms): `better` when the interval lies wholly on the better
side of 0, `worse` when it lies wholly on the other side, and `inconclusive (n seeds)` otherwise.
"""

import dataclasses
import json
from typing import Optional, Sequence

from experiment.reporting import claims
from experiment.reporting import report_tables
from experiment.reporting import run_results

LOWER_IS_BETTER = frozenset(column for column, lower in report_tables.MAIN_COLUMNS if lower)


@dataclasses.dataclass(frozen=True)
class PairedRow:
  setting: tuple  # ((flag, value), ...) of the flags that vary between the settings.
  baseline: str
  figure: str
  difference: claims.Interval

  @property
  def verdict(self) -> str:
    direction = 'lower' if self.figure in LOWER_IS_BETTER else 'higher'
    verdict = claims.verdict(self.difference, direction, claims.MIN_SEEDS)
    return {claims.REPRODUCED: 'better', claims.NOT_REPRODUCED: 'worse'}.get(verdict, verdict)


def paired_rows(runs: Sequence[run_results.RunResult], method: str, figures: Sequence[str],
                baselines: Optional[Sequence[str]] = None) -> list[PairedRow]:
  """Per setting, baseline and figure, the paired differences of `method`'s finished runs against the baseline's."""
  finished = [run for run in runs if run.finished]
  keys = [key for key in run_results.setting_keys(finished) if key not in (run_results.METHOD, 'seed')]
  table: dict[tuple, dict[str, dict[int, dict]]] = {}
  for run in finished:
    setting = tuple((key, run.config.get(key)) for key in keys)
    table.setdefault(setting, {}).setdefault(run_results.method_name(run), {})[run.config.get('seed', 0)] = (
        report_tables.run_metrics(run))
  rows = []
  for setting in sorted(table, key=json.dumps):
    by_method = table[setting]
    if method not in by_method:
      continue
    for baseline in baselines or sorted(set(by_method) - {method}):
      for figure in figures:
        seeds = sorted(seed for seed in set(by_method[method]) & set(by_method.get(baseline, {}))
                       if figure in by_method[method][seed] and figure in by_method[baseline][seed])
        differences = [by_method[method][s][figure] - by_method[baseline][s][figure] for s in seeds]
        rows.append(PairedRow(setting, baseline, figure, claims.interval(differences)))
  return rows


def markdown(rows: Sequence[PairedRow], method: str) -> str:
  """The rows as a markdown table."""
  lines = [f'| setting | {method} - baseline | figure | n | mean +- s.e. | 95% interval | verdict |',
           '|---|---|---|---|---|---|---|']
  for row in rows:
    setting = ', '.join(f'{key}={value}' for key, value in row.setting) or '-'
    d = row.difference
    lines.append(f'| {setting} | {row.baseline} | {row.figure} | {d.n} | {d.mean:+.3f} +- {d.standard_error:.3f} | '
                 f'[{d.low:+.3f}, {d.high:+.3f}] | {row.verdict} |')
  return '\n'.join(lines)
