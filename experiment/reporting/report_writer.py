"""Writes a report directory from a root of runs: tables (markdown, CSV), plots (PNG and SVG) and one `index.html`
that shows them together, readable offline (images by relative path, no scripts).

    <output>/tables.md, tables.csv            every metric that applies (`experiment.reporting.report_tables`)
    <output>/per_domain.md, per_domain.csv    per-domain accuracy, when the runs report domains
    <output>/per_window.md, per_window.csv    each window's drop, recovery rounds and max accuracy (runs with windows)
    <output>/*.png, *.svg                     `experiment.reporting.report_plots`, per comparison of methods
    <output>/index.html

The page opens with what was run: the flags every run shares and those that differ, the grid file, commit and
command the matrix recorded (`<root>/.matrix/grid.json`, `GRID_RECORD`), when the runs ended, and links to the
table files, each run's directory and its own page where `plot_run` wrote one. A single run's page is named after
the run and adds its training curves.

A comparison whose runs differ in a flag every one of them records, other than a method's own
(`run_results.METHOD_OWN`), also compares that setting: its tables (page and markdown) are headed and its plots'
captions end with "not on one footing: server_optimizer adam / sgd" (`run_results.footing_note`).
"""

import datetime
import difflib
import glob
import html
import json
import os
import sys
from typing import Optional

from experiment.reporting import metric_labels
from experiment.reporting import report_plots
from experiment.reporting import report_tables
from experiment.reporting import run_results

_STYLE = ('body{font-family:sans-serif;margin:2em;max-width:1400px} table{border-collapse:collapse;font-size:13px;'
          'margin-bottom:1.5em} td,th{border:1px solid #bbb;padding:3px 6px;text-align:right} '
          'th{background:#eee} td.best{font-weight:bold;background:#e6f4e6} img{max-width:100%;margin:0.5em 0} '
          '.plots{display:grid;grid-template-columns:repeat(auto-fill,minmax(560px,1fr));gap:1em} '
          'table.flags td,table.flags th{text-align:left} summary{cursor:pointer;margin:0.3em 0} '
          'p.footing{color:#a00;font-weight:bold}')


# Every file name a report writes.
_WRITTEN = ('tables.md', 'tables.csv', 'per_domain.md', 'per_domain.csv', 'per_window.md', 'per_window.csv',
            '*.png', '*.svg', 'index.html')
# What the matrix records about a grid in its root (grid file, command, commit, start), for the page.
GRID_RECORD = os.path.join('.matrix', 'grid.json')
# Where `plot_run` writes a run's own page, under its directory.
RUN_PAGE = os.path.join('plots', 'index.html')


class ReportError(ValueError):
  """A report that cannot be written; its message is one line."""


def _plots(runs: list[run_results.RunResult], output: str, single_run: bool = False) -> list[tuple[str, str]]:
  """(title, file name) of every plot written; a single run's page adds its training curves."""
  keys = run_results.setting_keys(runs) or [run_results.METHOD]
  comparisons: dict[tuple, dict[str, list]] = {}
  for values, group in run_results.by_setting(runs, keys).items():
    method = run_results.method_name(group[0]) or '?'
    comparisons.setdefault(run_results.comparison_key(values, keys), {})[method] = group
  other_keys = [key for key in keys if key != run_results.METHOD]
  written = []
  for index, (comparison, methods) in enumerate(comparisons.items()):
    title = report_tables.comparison_title(comparison, keys)
    members = [run for group in methods.values() for run in group]
    note = run_results.footing_note(members)
    metric = report_plots.accuracy_metric(members)
    chance = report_plots.chance_routing(members)
    candidates = [(f'accuracy_{index}.png', f'{metric and metric_labels.curve_label(metric)} — {title}',
                   lambda path, t: metric and report_plots.curves(methods, metric, t, path)),
                  (f'modes_{index}.png', f'test accuracy on each domain — {title}',
                   lambda path, t: report_plots.mode_curves(methods, t, path)),
                  (f'routing_{index}.png', f'test routing accuracy, chance dotted — {title}',
                   lambda path, t: report_plots.curves(methods, 'routing_accuracy', t, path, chance=chance)),
                  (f'learned_{index}.png', f'what the methods learn about the shift against the truth — {title}',
                   lambda path, t: report_plots.learned_shift(methods, t, path)),
                  (f'pools_{index}.png', f'models, experts or clusters in use — {title}',
                   lambda path, t: report_plots.pools(methods, t, path)),
                  (f'domains_{index}.png', f'per-domain accuracy — {title}',
                   lambda path, t: report_plots.domain_bars(methods, t, path)),
                  (f'mixed_{index}.png', f'accuracy on test batches mixing the modes against their day share — '
                   f'{title}', lambda path, t: report_plots.mixed_batches(methods, t, path))]
    if single_run:
      candidates += [(f'train_{index}.png', f'{metric_labels.curve_label(column)} — {title}',
                      lambda path, t, column=column: report_plots.curves(methods, column, t, path))
                     for column in ('train_accuracy', 'train_loss')]
    for name, plot_title, draw in candidates:
      if draw(os.path.join(output, name), plot_title):
        written.append((f'{plot_title} ({note})' if note else plot_title, name))
  metric = report_plots.accuracy_metric(runs)
  for flag in other_keys:
    if metric and all(isinstance(run.config.get(flag), (int, float)) for run in runs):
      name = f'swept_{flag}.png'
      if report_plots.swept(runs, keys, flag, metric, os.path.join(output, name)):
        written.append((f'{metric_labels.curve_label(metric)} at the last evaluation against {flag}', name))
  return written


def _check_columns(runs: list[run_results.RunResult], columns: list[str]) -> None:
  reported = {name for run in runs if run.finished for name in report_tables.run_metrics(run)}
  missing = [name for name in columns if name not in reported]
  if missing:
    close = sorted({match for name in missing for match in difflib.get_close_matches(name, reported, n=4)})
    hint = f' (close: {", ".join(close)})' if close else ''
    raise ReportError(f'no finished run reports {", ".join(missing)}{hint}.')


def write(root: str, output: str, only: Optional[str] = None, columns: Optional[list[str]] = None,
          percent: bool = False) -> list[str]:
  """Writes the report of the runs under `root` (only the run named `only`, when given) into `output`; returns the
  files written. `columns` and `percent` shape the main table (`report_tables.build`)."""
  runs, skipped = run_results.load_all(root)
  runs = [run for run in runs if only is None or run.name == only]
  skipped = [item for item in skipped if only is None or item.name == only]
  if not runs:
    what = f'no run {os.path.join(root, only)}' if only else f'no runs under {root}'
    why = ''.join(f'; skipped {item.name}: {item.reason}' for item in skipped[:3])
    raise ReportError(f'{what} (a run directory has config.json and metrics.csv){why}.')
  if columns:
    _check_columns(runs, columns)
  os.makedirs(output, exist_ok=True)
  for pattern in _WRITTEN:  # A previous report's files, which this one may not rewrite (a plot no longer drawn).
    for path in glob.glob(os.path.join(output, pattern)):
      os.remove(path)
  files, sections = [], []
  finished = sum(run.finished for run in runs)
  sections.append(f'<p>{len(runs)} runs under <code>{html.escape(root)}</code>, {finished} finished'
                  f'{f", {len(skipped)} skipped" if skipped else ""}; tables use finished runs (mean &plusmn; '
                  'standard error over distinct seeds, best of each comparison in bold, references marked and never '
                  'bold), plots every run.</p>')
  sections.append(_left_out(runs, skipped))

  for name, heading in (('tables', 'Metrics'), ('per_domain', 'Per-domain accuracy'),
                        ('per_window', 'Per window: accuracy drop, rounds to recovery, max accuracy')):
    per_domain = name == 'per_domain'
    table = report_tables.build(runs, per_domain=per_domain, columns=columns, percent=percent,
                                per_window=name == 'per_window')
    if table is None or not table.columns:
      continue
    footing = report_tables.footing_notes(table, runs)
    if per_domain:
      heading = f'Per-domain accuracy, {report_tables.window_name(table)}'
    if name != 'tables':  # A table per comparison, a row per domain or window: they do not fit a page's width.
      parts = (report_tables.domain_tables if per_domain else report_tables.window_tables)(table)
      markdown = '\n\n'.join(f'{part.title}\n\n{part.markdown()}' for part in parts)
      page_html = ''.join(f'<h3>{html.escape(part.title)}</h3>\n{part.html()}' for part in parts)
    else:  # The page shows a table per comparison when there are several; the files keep one.
      markdown = table.markdown()
      parts = report_tables.comparison_tables(table)
      page_html = (table.html() if len(parts) == 1 else
                   ''.join(f'<h3>{html.escape(title)}</h3>\n{part.html()}' for title, part in parts))
    if footing:  # Above the tables and in the markdown: a comparison of these methods also compares their settings.
      markdown = ''.join(f'**{title}: {note}**\n\n' for title, note in footing.items()) + markdown
      page_html = ''.join(f'<p class="footing">{html.escape(title)}: {html.escape(note)}</p>'
                          for title, note in footing.items()) + page_html
    for extension, text in (('md', markdown), ('csv', table.csv())):
      with open(os.path.join(output, f'{name}.{extension}'), 'w') as f:
        f.write(text + ('\n' if extension == 'md' else ''))
      files.append(f'{name}.{extension}')
    sections.append(f'<h2>{heading}</h2>\n{page_html}')
  sections.insert(1, _context(root, output, runs, [name for name in files if name.endswith(('.md', '.csv'))]))
  plots = _plots(runs, output, single_run=only is not None)
  files += [name for _, name in plots] + [name[:-len('.png')] + '.svg' for _, name in plots]
  if plots:
    sections.append('<h2>Plots</h2>\n<div class="plots">' + ''.join(
        f'<figure><img src="{name}" alt="{html.escape(title)}"><figcaption>{html.escape(title)} '
        f'(<a href="{name[:-len(".png")]}.svg">SVG</a>)</figcaption></figure>' for title, name in plots) + '</div>')
  heading = f'Run: {only}' if only else f'Report: {os.path.basename(root.rstrip("/"))}'
  page = (f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{html.escape(heading)}</title>'
          f'<style>{_STYLE}</style></head><body>\n<h1>{html.escape(heading)}</h1>\n' + '\n'.join(sections) +
          '\n</body></html>\n')
  with open(os.path.join(output, 'index.html'), 'w') as f:
    f.write(page)
  return files + ['index.html']


def _left_out(runs: list[run_results.RunResult], skipped: list[run_results.Skipped]) -> str:
  """The page's lists of runs not in the tables: unfinished ones (in plots only) and skipped directories, with why."""
  parts = []
  unfinished = [run for run in runs if not run.finished]
  if unfinished:
    parts.append(f'<h2>Unfinished ({len(unfinished)}): in plots, not in tables</h2><ul>' + ''.join(
        f'<li>{html.escape(run.name)}: {html.escape(run_results.progress(run))}</li>' for run in unfinished) +
                 '</ul>')
  if skipped:
    parts.append(f'<h2>Skipped ({len(skipped)})</h2><ul>' + ''.join(
        f'<li>{html.escape(item.name)}: {html.escape(item.reason)}</li>' for item in skipped) + '</ul>')
  return '\n'.join(parts)


def _flag_table(values: dict) -> str:
  return ('<table class="flags">' + ''.join(f'<tr><th>{html.escape(key)}</th><td>{html.escape(str(value))}</td></tr>'
                                            for key, value in sorted(values.items())) + '</table>')


def _context(root: str, output: str, runs: list[run_results.RunResult], table_files: list[str]) -> str:
  """The page's block on what was run (module docstring)."""
  configs = [run.config for run in runs]
  keys = set().union(*configs) - run_results.NOT_SETTINGS
  shared = {key: configs[0][key] for key in keys
            if all(key in config and config[key] == configs[0][key] for config in configs)}
  show = lambda value: ','.join(map(str, value)) if isinstance(value, list) else str(value)
  values = lambda key: ', '.join(sorted({show(config[key]) for config in configs if key in config}))
  # The settings that split the runs, and those every run records with values that differ (a method's footing).
  recorded = set.intersection(*map(set, configs)) - run_results.NOT_SETTINGS
  differing = {key: values(key) for key in set(run_results.setting_keys(runs)) | (recorded - set(shared))}
  # A method's own flags, which only its runs record.
  own = {key: f'{values(key)} ({", ".join(sorted({str(c.get(run_results.METHOD)) for c in configs if key in c}))})'
         for key in keys - set(shared) - set(differing)}
  parts = ['<h2>What was run</h2>']
  record_path = os.path.join(root, GRID_RECORD)
  if os.path.exists(record_path):
    with open(record_path) as f:
      record = json.load(f)
    parts.append('<p>' + '; '.join(f'{html.escape(key)}: <code>{html.escape(str(value))}</code>'
                                  for key, value in record.items() if value) + '</p>')
  ended = [os.path.getmtime(os.path.join(root, run.name, 'summary.json')) for run in runs if run.finished]
  if ended:
    stamp = lambda t: datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')
    parts.append(f'<p>Runs ended {stamp(min(ended))} to {stamp(max(ended))}; report written '
                 f'{stamp(datetime.datetime.now().timestamp())}.</p>')
  parts.append(f'<details open><summary>Flags that differ between the runs ({len(differing)})</summary>'
               f'{_flag_table(differing)}</details>')
  parts.append(f'<details><summary>Flags every run shares ({len(shared)})</summary>{_flag_table(shared)}</details>')
  if own:
    parts.append(f'<details><summary>Flags of some methods only ({len(own)})</summary>{_flag_table(own)}</details>')
  links = ' '.join(f'<a href="{name}">{name}</a>' for name in table_files)
  run_links = []
  for run in runs:
    directory = os.path.relpath(os.path.join(root, run.name), output)
    page = os.path.join(root, run.name, RUN_PAGE)
    own = f' (<a href="{html.escape(os.path.relpath(page, output))}">page</a>)' if os.path.exists(page) else ''
    run_links.append(f'<a href="{html.escape(directory)}/">{html.escape(run.name)}</a>{own}')
  parts.append(f'<p>Tables: {links}</p><details><summary>Run directories ({len(runs)})</summary><p>' +
               ', '.join(run_links) + '</p></details>')
  return '\n'.join(parts)


def working_path(path: str) -> str:
  """`path` relative to where the user ran the command (`bazel run` runs binaries in their runfiles)."""
  return os.path.normpath(os.path.join(os.environ.get('BUILD_WORKING_DIRECTORY', os.getcwd()), path))


def write_and_print(program: str, root: str, output: str, only: Optional[str] = None,
                    columns: Optional[list[str]] = None, percent: bool = False, show_table: bool = False) -> bool:
  """Writes the report and says where it is (printing the main table's markdown first when `show_table`); a report
  that cannot be written is one error line and False."""
  try:
    files = write(root, output, only, columns, percent)
  except ReportError as error:
    print(f'{program}: error: {error}', file=sys.stderr)
    return False
  except OSError as error:  # A full disk, a quota, a read-only output: the file it was writing, in one line.
    print(f'{program}: error: cannot write the report: {error.strerror or error} writing '
          f'{error.filename or output}.', file=sys.stderr)
    return False
  if show_table and 'tables.md' in files:
    with open(os.path.join(output, 'tables.md')) as f:
      print(f.read().rstrip('\n') + '\n')
  _, skipped = run_results.load_all(root)
  for item in skipped if only is None else [item for item in skipped if item.name == only]:
    print(f'{program}: skipped {item.name}: {item.reason}', file=sys.stderr)
  print(f'{program}: {len(files)} files in {output}; open {os.path.join(output, "index.html")}')
  return True


def write_and_say(program: str, root: str, output: str, only: Optional[str] = None,
                  columns: Optional[list[str]] = None, percent: bool = False, show_table: bool = False) -> None:
  """The report binaries' end: `write_and_print`, exiting with 2 after its error line."""
  if not write_and_print(program, root, output, only, columns, percent, show_table):
    sys.exit(2)
