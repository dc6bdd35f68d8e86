r"""The results pages from their data: claims (`experiment/claims/<page>.toml`), per-run data
(`docs/results/data/<grid>.csv`) and the pages' generated regions (`experiment/reporting/results_pages.py`).

    python -m experiment.results                     regenerate every page's generated regions from the data
    python -m experiment.results --check             exit 1 if a committed page differs from what its data make
    python -m experiment.results --stale             exit 1 if a data row's method code, or a printed table's
                                                     program, changed since it ran (`staleness`), naming what to
                                                     rerun
    python -m experiment.results --collect=GRID --root=DIR
                                                     merge the finished runs of a root into GRID's data file: they
                                                     replace its rows of the same runs (bash tools/run_table.sh GRID
                                                     DIR runs the grid; --sweep=... runs a part of it)
    python -m experiment.results --produce=NAME      run a program whose printed table a page shows
                                                     (experiment/results_outputs.toml) and store it

`bazel run //experiment:results -- --check` does the same from the workspace.
"""

import functools
import os
import sys

from absl import app
from absl import flags

from experiment.core import grid as grid_lib
from experiment.reporting import claims as claims_lib
from experiment.reporting import results_data
from experiment.reporting import results_outputs
from experiment.reporting import results_pages
from experiment.reporting import staleness

_CHECK = flags.DEFINE_bool('check', False, 'Exit 1 if a committed page differs from what its data make.')
_STALE = flags.DEFINE_bool('stale', False, 'Exit 1 if a data row or a printed table ran other code than the tree\'s.')
_COLLECT = flags.DEFINE_string('collect', None, 'Merge the finished runs of --root into this grid\'s data file.')
_ROOT = flags.DEFINE_string('root', None, 'A root of the grid\'s runs (with --collect).')
_PRODUCE = flags.DEFINE_string('produce', None, 'Run this output\'s program (experiment/results_outputs.toml) and '
                               'store its table.')


def _repository() -> str:
  return os.environ.get('BUILD_WORKSPACE_DIRECTORY') or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _fail(message: str) -> None:
  print(f'results: error: {message}', file=sys.stderr)
  sys.exit(2)


def _collect(repository: str, grid_name: str, root: str) -> None:
  figures = []
  grid = results_pages.load_grid(repository, grid_name)
  claimed = [c for page in results_pages.pages(repository) for c in page.claims if c.grid == grid_name]
  for figure in list(grid.report_columns) + [f for c in claimed for f in (c.figure, c.against_figure) if f]:
    if figure not in figures:
      figures.append(figure)
  reader = functools.cache(lambda commit: staleness.commit_reader(repository, commit))

  @functools.cache
  def method_code(commit: str, algorithm: str):
    read = reader(commit)
    return None if read is None else staleness.method_code(repository, read, algorithm)

  collected = results_data.collect(grid, root, figures, method_code)
  if not collected:
    _fail(f'no finished run of grid {grid_name} in {root}.')
  path = results_data.path(repository, grid_name)
  kept = results_data.read(path) if os.path.exists(path) else []
  rows = results_data.merge(grid, kept, collected)
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, 'w') as f:
    f.write(results_data.to_csv(rows))
  print(f'results: {path}: {len(collected)} runs collected, {len(rows)} of the grid\'s {len(grid.runs())} in the file')


def _stale(repository: str) -> int:
  found, code_now = 0, staleness.tree_method_code(repository)
  for grid_name in results_data.grid_names(repository):
    stale = staleness.stale_rows(results_data.read(results_data.path(repository, grid_name)), code_now)
    if stale:
      found += 1
      methods = sorted({row['algorithm'] for row in stale})
      narrowed = (f' --sweep=algorithm={",".join(methods)}'
                  if 'algorithm' in dict(results_pages.load_grid(repository, grid_name).sweep) else '')
      print(f'results: grid {grid_name}: {len(stale)} runs ran code of {", ".join(methods)} other than the '
            f'tree\'s, or unrecorded; rerun: '
            f'bash tools/run_table.sh {grid_name} ROOT{narrowed}, then python -m experiment.results '
            f'--collect={grid_name} --root=ROOT')
  for name in results_outputs.stale(repository):
    found += 1
    print(f'results: output {name} is not produced or ran other code than the tree\'s; rerun: python -m '
          f'experiment.results --produce={name}')
  return 1 if found else 0


def _produce(repository: str, name: str) -> None:
  outputs = results_outputs.declared(repository)
  if name not in outputs:
    _fail(f'--produce: no output {name!r} in {results_outputs.DECLARATIONS} ({", ".join(sorted(outputs))}).')
  results_outputs.write(repository, name, results_outputs.produce(repository, outputs[name]))
  print(f'results: {results_data.output_path(repository, name)}: {outputs[name].command()}')


def main(argv):
  if len(argv) > 1:
    _fail(f'unexpected arguments: {" ".join(argv[1:])}')
  repository = _repository()
  try:
    if _COLLECT.value:
      if not _ROOT.value:
        _fail('--collect needs --root=DIR, the root of the grid\'s runs.')
      _collect(repository, _COLLECT.value, os.path.abspath(_ROOT.value))
      return
    if _PRODUCE.value:
      _produce(repository, _PRODUCE.value)
      return
    if _STALE.value:
      sys.exit(_stale(repository))
    if _CHECK.value:
      differing = results_pages.stale_pages(repository)
      for path, line in differing:
        print(f'results: {path} differs from what its data make ({line}); python -m experiment.results '
              'regenerates it.')
      sys.exit(1 if differing else 0)
    for page in results_pages.pages(repository):
      path = os.path.join(repository, page.path)
      with open(path) as f:
        text = f.read()
      generated = results_pages.regenerate_page(repository, page, text)
      if generated != text:
        with open(path, 'w') as f:
          f.write(generated)
      print(f'results: {page.path}: {"regenerated" if generated != text else "unchanged"}')
  except (claims_lib.ClaimError, results_pages.PageError, results_data.DataError, grid_lib.GridError,
          results_outputs.OutputError) as error:
    _fail(str(error))


if __name__ == '__main__':
  app.run(main)
