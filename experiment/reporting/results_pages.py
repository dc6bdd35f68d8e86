"""The results pages' generated regions: every number in them made from the committed data files
(`results_data`) and claim files (`claims`), so a page cannot say what its data do not.

A page marks what is generated; the prose around stays written by hand:

  <!-- generated: claims -->        the page's claims, each setting and baseline a row with n, the mean paired
  ...                               difference +- its standard error, the 95% t interval, the verdict by the one
  <!-- end generated -->            rule (`claims`) and the departures from their papers its methods ran with
                                    (`departures_in_effect`)
  <!-- generated: table GRID -->    a grid's table (any grid of experiment/grids, claimed or not): per setting and
  ...                               method, the seeds and each of the grid's [report] columns as mean +- standard
                                    error over the seeds (a grid without a data file has no rows, and its claims
                                    n = 0)
  <!-- end generated -->
  <!-- generated: seeds GRID FIGURE -->  one figure of a grid run by run: per setting (as in its table) the figure's
  ...                               value for each seed, so a page can say which seeds do what; settings without
  <!-- end generated -->            the figure (a method that does not report it) are left out
  <!-- generated: output NAME -->   the table a program printed (`results_outputs`), as stored in its data file
  ...
  <!-- end generated -->

`regenerate` gives every page as its data make it; `python -m experiment.results --check` fails on a page that
differs (a hand edit of a generated number, or data changed without the page).
"""

import dataclasses
import glob
import os
import re
from typing import Optional, Sequence

from experiment.core import grid as grid_lib
from experiment.reporting import claims as claims_lib
from experiment.reporting import metric_labels
from experiment.reporting import results_data

CLAIMS_DIR = os.path.join('experiment', 'claims')
GRIDS_DIR = os.path.join('experiment', 'grids')
_REGION = re.compile(r'(<!-- generated: (?P<name>[^>]*?) -->\n)(?P<body>.*?)(<!-- end generated -->)', re.DOTALL)


class PageError(ValueError):
  """A page or its data that cannot be generated; its message names the page and what is wrong."""


@dataclasses.dataclass(frozen=True)
class Page:
  path: str  # Relative to the repository.
  claims: tuple[claims_lib.Claim, ...]


def pages(repository: str) -> list[Page]:
  """The pages that have a claim file, in the files' order."""
  result = []
  for claim_path in sorted(glob.glob(os.path.join(repository, CLAIMS_DIR, '*.toml'))):
    claim_file = claims_lib.load(claim_path)
    result.append(Page(claim_file.page, claim_file.claims))
  return result


def load_grid(repository: str, name: str) -> grid_lib.Grid:
  return grid_lib.load(os.path.join(repository, GRIDS_DIR, f'{name}.toml'))


def _scale(figure: str, percent: bool) -> tuple[float, int]:
  """(factor, decimals) a figure is shown with: shares in percent on a percent grid, spreads with 4 decimals."""
  if percent and metric_labels.is_share(figure):
    return 100.0, 2
  return 1.0, 4 if '_std' in figure else 3


def _setting_text(setting: tuple) -> str:
  return ', '.join(f'{flag}={value}' for flag, value in setting) or '-'


def _typed(text: str, default):
  if isinstance(default, bool):
    return text.lower() in ('true', '1')
  return type(default)(text) if isinstance(default, (int, float)) else text


def departures_in_effect(grid: grid_lib.Grid, rows: Sequence[dict], methods: set) -> list[str]:
  """`METHOD: flag=value` for each setting whose default departs from its method's paper
  (`algorithms.registry.departures`) that a run in `rows` of one of `methods` ran with: its grid's flags (the run of
  the row's name) leave it at that default."""
  from algorithms import registry  # pylint: disable=g-import-not-at-top  # TensorFlow, only for a claims region.
  flags_of = {run.name: dict(run.flags) for run in grid.runs()}
  found = set()
  for row in rows:
    name = row['algorithm']
    if name not in methods or name not in registry.METHODS or row['run'] not in flags_of:
      continue
    fields = registry.setting_defaults(name)
    values = {flag: _typed(text, fields[flag]) for flag, text in flags_of[row['run']].items() if flag in fields}
    found |= {f'{name}: {flag}={fields[flag]}' for flag in registry.departures(name, values)}
  return sorted(found)


def claims_table(page_claims: Sequence[claims_lib.Claim], data: dict[str, list[dict]],
                 grids: dict[str, grid_lib.Grid]) -> str:
  """The claims region: one row per claim, setting and baseline, with the departures its methods ran with
  (docs/running.md, Each method's own settings, says why each is kept)."""
  lines = ['| claim (where in the paper) | the paper | setting | figure | against | n | mean difference +- s.e. | '
           '95% interval | verdict | departures in effect |', '|---|---|---|---|---|---|---|---|---|---|']
  for claim in page_claims:
    factor, decimals = _scale(claim.figure, grids[claim.grid].report_percent)
    for index, verdict in enumerate(claims_lib.verdicts(claim, data[claim.grid])):
      if verdict.baseline:
        against = verdict.baseline
      elif claim.against_figure:
        against = f'its own `{claim.against_figure}`'
      else:
        against = f'the value {factor * claim.against_value:g}'
      d = verdict.difference
      if d.n >= 2:
        numbers = (f'{factor * d.mean:+.{decimals}f} +- {factor * d.standard_error:.{decimals}f} | '
                   f'[{factor * d.low:+.{decimals}f}, {factor * d.high:+.{decimals}f}]')
      else:
        numbers = '- | -'
      where = f' ({claim.where})' if claim.where else ''
      # The claim's text on its first row only: its other settings and baselines follow it.
      claim_cells = f'{claim.text}{where} | {claim.paper}' if index == 0 else ' | '
      compared = [row for row in data[claim.grid] if claim.selects(row) and
                  all(row.get(flag) == value for flag, value in verdict.setting)]
      departures = departures_in_effect(grids[claim.grid], compared, {claim.method, verdict.baseline})
      lines.append(f'| {claim_cells} | {_setting_text(verdict.setting)} | `{claim.figure}` | {against} | '
                   f'{d.n} | {numbers} | {verdict.verdict} | {"; ".join(departures) or "-"} |')
  return '\n'.join(lines) + '\n'


def _settings(grid: grid_lib.Grid, rows: Sequence[dict]) -> tuple[list[str], dict[tuple, list[dict]]]:
  """The flags that make a setting (the grid's swept flags but the seed, the method first) and the rows of each."""
  flags = ['algorithm'] + [flag for flag, _ in grid.sweep if flag not in ('algorithm', 'seed')]
  groups: dict[tuple, list[dict]] = {}
  for row in rows:  # The method as the report names it, so a run that read test labels is marked as one.
    key = tuple(row[results_data.REPORTED_AS] if flag == 'algorithm' else row[flag] for flag in flags)
    groups.setdefault(key, []).append(row)
  return flags, groups


def _no_runs(grid_name: str) -> str:
  return (f'The data file of grid {grid_name} holds no runs: `bash tools/run_table.sh {grid_name} ROOT`, then '
          f'`python -m experiment.results --collect={grid_name} --root=ROOT`, makes it.\n')


def grid_table(grid_name: str, grid: grid_lib.Grid, rows: Sequence[dict]) -> str:
  """A grid's table region: per setting the seeds and each report column's mean +- standard error over them."""
  flags, groups = _settings(grid, rows)
  columns = list(grid.report_columns)
  if not rows:
    return _no_runs(grid_name)
  lines = ['| ' + ' | '.join(flags + ['seeds'] + [metric_labels.label(c, grid.report_percent) for c in columns])
           + ' |', '|' + '---|' * (len(flags) + 1 + len(columns))]
  for key in sorted(groups):
    cells = []
    for column in columns:
      values = [float(row[column]) for row in groups[key] if row.get(column, '') != '']
      if not values:
        cells.append('')
        continue
      factor, decimals = _scale(column, grid.report_percent)
      spread = claims_lib.interval([factor * v for v in values])  # Its mean and standard error.
      cells.append(f'{spread.mean:.{decimals}f} +- {spread.standard_error:.{decimals}f}' if len(values) > 1
                   else f'{spread.mean:.{decimals}f}')
    lines.append('| ' + ' | '.join(list(key) + [str(len(groups[key]))] + cells) + ' |')
  return '\n'.join(lines) + '\n'


def seeds_table(grid_name: str, grid: grid_lib.Grid, rows: Sequence[dict], figure: str) -> str:
  """A `seeds GRID FIGURE` region: per setting that reports `figure`, its value in the run of each seed."""
  rows = [row for row in rows if row.get(figure, '') != '']
  if not rows:
    return _no_runs(grid_name)
  flags, groups = _settings(grid, rows)
  seeds = sorted({int(row['seed']) for row in rows})
  factor, decimals = _scale(figure, grid.report_percent)
  lines = [f'{metric_labels.label(figure, grid.report_percent)}, run by run:', '',
           '| ' + ' | '.join(flags + [f'seed {seed}' for seed in seeds]) + ' |',
           '|' + '---|' * (len(flags) + len(seeds))]
  for key in sorted(groups):
    # Rounded before it is written, so a value a hair below zero shows as 0.000, not -0.000.
    by_seed = {int(row['seed']): round(factor * float(row[figure]), decimals) + 0.0 for row in groups[key]}
    cells = [f'{by_seed[seed]:.{decimals}f}' if seed in by_seed else '' for seed in seeds]
    lines.append('| ' + ' | '.join(list(key) + cells) + ' |')
  return '\n'.join(lines) + '\n'


def _region(repository: str, name: str, page: Page, data: dict[str, list[dict]],
            grids: dict[str, grid_lib.Grid]) -> str:
  if name == 'claims':
    return claims_table(page.claims, data, grids)
  kind, _, argument = name.partition(' ')
  if kind == 'table' and argument in grids:
    return grid_table(argument, grids[argument], data[argument])
  grid_name, _, figure = argument.partition(' ')
  if kind == 'seeds' and grid_name in grids and figure:
    if figure not in grids[grid_name].report_columns:
      raise PageError(f'{page.path}: grid {grid_name} does not report {figure!r} (its [report] columns: '
                      f'{", ".join(grids[grid_name].report_columns)}).')
    return seeds_table(grid_name, grids[grid_name], data[grid_name], figure)
  if kind == 'output':
    stored = results_data.read_output(repository, argument)
    if stored is None:
      return f'Output {argument} is not produced yet: `python -m experiment.results --produce={argument}`.\n'
    return stored['table']
  raise PageError(f'{page.path}: no generated region is called {name!r} (claims, output NAME, or table GRID '
                  f'or seeds GRID FIGURE for a grid of {GRIDS_DIR}).')


def regenerate_page(repository: str, page: Page, text: Optional[str] = None) -> str:
  """The page's text with every generated region made from the data (`text`: the page as it is, read if None)."""
  if text is None:
    with open(os.path.join(repository, page.path)) as f:
      text = f.read()
  tabled = {m.group('name').split(' ')[1] for m in _REGION.finditer(text)
            if m.group('name').split(' ')[0] in ('table', 'seeds') and ' ' in m.group('name')}
  grid_names = sorted({claim.grid for claim in page.claims}
                      | {name for name in tabled if os.path.exists(os.path.join(repository, GRIDS_DIR, f'{name}.toml'))})
  grids = {name: load_grid(repository, name) for name in grid_names}
  data = {}
  for name in grid_names:  # A grid not run yet has no rows: its claims have n = 0.
    data_path = results_data.path(repository, name)
    data[name] = results_data.read(data_path) if os.path.exists(data_path) else []
  if not _REGION.search(text) or 'claims' not in [m.group('name') for m in _REGION.finditer(text)]:
    raise PageError(f'{page.path}: no <!-- generated: claims --> region.')
  return _REGION.sub(lambda m: m.group(1) + _region(repository, m.group('name'), page, data, grids) + m.group(4), text)


def stale_pages(repository: str) -> list[tuple[str, str]]:
  """(page, its first line that differs from the regenerated page) for each page its data do not make."""
  stale = []
  for page in pages(repository):
    with open(os.path.join(repository, page.path)) as f:
      text = f.read()
    generated = regenerate_page(repository, page, text)
    if generated != text:
      line = next(i for i, (a, b) in enumerate(zip(text.splitlines() + [''], generated.splitlines() + [''])) if a != b)
      stale.append((page.path, f'line {line + 1}: {text.splitlines()[line] if line < len(text.splitlines()) else ""}'))
  return stale
