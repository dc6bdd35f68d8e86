"""A directory of runs as the report reads it: each run's settings, its metrics rows and its summary, from the
files alone (`config.json`, `metrics.csv`, `summary.json`; `experiment.core.run_directory`), without TensorFlow.
A directory whose files are missing or do not parse is skipped with its reason (`load_all`), never counted; a run
without summary.json is unfinished (`progress`): in plots, not in tables.

Runs are compared within *settings*: the configuration flags that differ between the runs of the root, without
the seed. Settings that differ only in the algorithm form one *comparison* (the methods of one table block or one
plot).
"""

import csv
import dataclasses
import io
import json
import os
from typing import Optional

from utils import strict_json

# Flags that name or place a run, or repeat it, rather than set it.
# Besides the flags that only place a run: where its values came from (`experiment.core.run_directory.SOURCES`).
NOT_SETTINGS = frozenset({'seed', 'experiment_name', 'root_output_dir', 'overwrite', 'cache_dir', 'tfds_data_dir',
                          'value_sources'})
METHOD = 'algorithm'
ORACLE_FLAG = 'oracle_test_labels'
# Methods whose test-time choice reads the test labels with `--oracle_test_labels`, and always did before the flag
# existed (runs that do not record it).
ORACLE_METHODS = frozenset({'fedem', 'cfl', 'feddrift'})
ORACLE_MARK = ' (oracle: test labels)'
DOMAIN_ORACLE_FLAG = 'oracle_test_domains'
# Methods whose evaluation reads the test batches' true domains with `--oracle_test_domains`, and always did before
# the flag existed (runs that do not record it).
DOMAIN_ORACLE_METHODS = frozenset({'shiftex', 'feddrift'})
DOMAIN_ORACLE_MARK = ' (oracle: test domains)'
# A method's own oracle settings are named `<method>_oracle_<what>` (`--shiftex_oracle_assignment`): a run with one
# on decided in training with the examples' true domains.
TRAINING_ORACLE_INFIX = '_oracle_'
TRAINING_ORACLE_MARK = ' (oracle: true domains in training)'
# No-Dist-Shift (`--no_shift`; `nds` and `nds_single` are Vanilla without the shift): a reference, not a competitor.
NO_SHIFT_METHODS = frozenset({'nds', 'nds_single'})
NO_SHIFT_MARK = ' (reference: no shift)'
# A run under --aggregator=dp|secure whose method also aggregated statistics of its own in the clear
# (`--accept_unprotected_sums`; summary.json's privacy.not_covered.method_sums).
PARTLY_PRIVATE_MARK = ' (private: model update only)'


@dataclasses.dataclass(frozen=True)
class RunResult:
  """One run: `config` (flag -> value), `rows` (metrics.csv, floats, empty cells left out), `summary` (None while
  the run has not finished)."""
  name: str
  config: dict
  rows: list
  summary: Optional[dict]

  @property
  def finished(self) -> bool:
    return self.summary is not None

  def evaluations(self) -> list[dict]:
    """The rows holding test metrics: an accuracy other than the training one."""
    return [row for row in self.rows if any(k.endswith('accuracy') and not k.startswith('train_') for k in row)]


class Unreadable(ValueError):
  """A run directory the report cannot use; the message says why, in one line."""


@dataclasses.dataclass(frozen=True)
class Skipped:
  """A directory under the root left out of the report, and why."""
  name: str
  reason: str


_RUN_FILES = ('config.json', 'metrics.csv', 'summary.json', 'checkpoints')
_LOCK_FILE = '.lock'  # `utils.directory_lock`'s file, which a run writes before anything else.
# The most the report reads of one file: a metrics.csv of 2,000 rounds of ShiftEx's 2,500 columns is about 100 MB;
# a larger file is skipped unread (a 1 GB file read whole held 2.8 GB of memory).
MAX_METRICS_BYTES = 256 << 20
MAX_JSON_BYTES = 16 << 20


def _check_size(path: str, limit: int) -> None:
  size = os.path.getsize(path)
  if size > limit:
    raise Unreadable(f'{os.path.basename(path)} is {size / 1e6:,.1f} MB, over the report\'s limit of '
                     f'{limit / 1e6:,.1f} MB for it; not read')


def _read_json(path: str) -> dict:
  _check_size(path, MAX_JSON_BYTES)
  try:
    with open(path) as f:
      value = strict_json.load(f)
  except (OSError, ValueError) as error:
    raise Unreadable(f'{os.path.basename(path)} does not parse ({str(error).splitlines()[0][:120]})') from None
  if not isinstance(value, dict):
    raise Unreadable(f'{os.path.basename(path)} is not a JSON object')
  return value


def _read_rows(path: str) -> list[dict]:
  """metrics.csv's complete rows as floats (empty cells left out; a last line without its newline, a row being
  written, dropped); Unreadable unless the header has a `round` column, every cell is a number and the rounds are
  whole numbers from 1 up, in increasing order (a finished run must also hold every round: `_read_run`)."""
  _check_size(path, MAX_METRICS_BYTES)
  with open(path, newline='', errors='replace') as f:
    text = f.read()
  if '\0' in text:
    raise Unreadable(f'metrics.csv holds binary data (a NUL byte at offset {text.index(chr(0)):,})')
  text = text[:text.rfind('\n') + 1]
  reader = csv.reader(io.StringIO(text, newline=''))
  try:
    lines = list(reader)
  except csv.Error as error:
    raise Unreadable(f'metrics.csv does not parse ({error})') from None
  if not lines or len(lines) == 1:
    raise Unreadable('metrics.csv holds no rows')
  header, rows = lines[0], []
  if 'round' not in header:
    raise Unreadable(f'metrics.csv has no "round" column ({",".join(header)[:60]!r})')
  for line_number, cells in enumerate(lines[1:], start=2):
    try:
      if len(cells) != len(header):
        raise ValueError(f'{len(cells)} cells for {len(header)} columns')
      rows.append({key: float(value) for key, value in zip(header, cells) if value != ''})
    except ValueError as error:
      raise Unreadable(f'metrics.csv line {line_number} does not parse ({str(error)[:80]})') from None
  rounds = [row.get('round') for row in rows]
  if any(r is None or r < 1 or not r.is_integer() for r in rounds) or any(a >= b for a, b in zip(rounds, rounds[1:])):
    raise Unreadable('metrics.csv rounds are not whole numbers from 1 up, in increasing order')
  return rows


def _read_run(run_dir: str) -> RunResult:
  """The run in `run_dir`; Unreadable when a file is missing or does not parse, or a summary claims rounds that
  metrics.csv does not hold."""
  if not os.path.exists(os.path.join(run_dir, 'config.json')):
    raise Unreadable('holds run outputs but no config.json')
  config = _read_json(os.path.join(run_dir, 'config.json'))
  if not os.path.exists(os.path.join(run_dir, 'metrics.csv')):
    checkpoints = _checkpoint_rounds(run_dir)
    raise Unreadable(f'no metrics.csv, though it holds checkpoints of rounds {", ".join(map(str, checkpoints))}'
                     if checkpoints else 'no metrics.csv (no round completed)')
  rows = _read_rows(os.path.join(run_dir, 'metrics.csv'))
  summary = None
  if os.path.exists(os.path.join(run_dir, 'summary.json')):
    summary = _read_json(os.path.join(run_dir, 'summary.json'))
    total = config.get('total_rounds')
    if total is not None and len(rows) != total:
      raise Unreadable(f'summary.json, but metrics.csv holds {len(rows)} of its {total} rounds')
  return RunResult(os.path.basename(run_dir), config, rows, summary)


def _checkpoint_rounds(run_dir: str) -> list[int]:
  """The rounds of the checkpoints in `run_dir`, by their directories' names."""
  folder = os.path.join(run_dir, 'checkpoints')
  names = os.listdir(folder) if os.path.isdir(folder) else []
  return sorted(int(name.rpartition('_')[2]) for name in names
                if name.startswith('program_state_') and name.rpartition('_')[2].isdigit())


def _no_run_reason(run_dir: str) -> Optional[str]:
  """Why a directory that holds none of a run's files is listed as skipped: it is empty, or holds only a run's
  lock file (a run stopped before it wrote config.json); None for one that holds other files (the report's own)."""
  names = set(os.listdir(run_dir))
  if not names:
    return 'an empty directory'
  if names == {_LOCK_FILE}:
    return 'no run outputs, only a run\'s lock file (the run stopped before it wrote config.json)'
  return None


def load_all(root: str) -> tuple[list['RunResult'], list[Skipped]]:
  """(every usable run under `root`, by name; the directories skipped, each with its reason). A directory holding
  none of a run's files but other files (the report's own, say) is neither, nor is a hidden one (`.matrix`); an empty
  one, or one with only a run's lock file, is skipped. Of several runs with the same settings and seed
  (config.json without the flags that only place a run, `NOT_SETTINGS`), a finished one is kept (the first by name)
  and the others are skipped as duplicates, so a seed is never counted twice."""
  runs, skipped = [], []
  for name in sorted(os.listdir(root)) if os.path.isdir(root) else []:
    run_dir = os.path.join(root, name)
    if not os.path.isdir(run_dir) or name.startswith('.'):
      continue
    if not any(os.path.exists(os.path.join(run_dir, f)) for f in _RUN_FILES):
      if (reason := _no_run_reason(run_dir)) is not None:
        skipped.append(Skipped(name, reason))
      continue
    try:
      run = _read_run(run_dir)
    except (Unreadable, OSError) as error:
      skipped.append(Skipped(name, str(error)))
      continue
    runs.append(run)
  kept = {}
  for run in sorted(runs, key=lambda run: not run.finished):  # A finished run before an unfinished copy of it.
    key = json.dumps({k: v for k, v in run.config.items() if k == 'seed' or k not in NOT_SETTINGS}, sort_keys=True)
    if key in kept:
      skipped.append(Skipped(run.name, f'duplicate of {kept[key].name} (the same settings and seed; '
                                       f'{progress(run)})'))
    else:
      kept[key] = run
  runs = sorted(kept.values(), key=lambda run: run.name)
  return runs, sorted(skipped, key=lambda item: item.name)


def load(root: str) -> list['RunResult']:
  """The usable runs under `root` (`load_all`)."""
  return load_all(root)[0]


def progress(run: 'RunResult') -> str:
  """'finished', or 'unfinished: N of T rounds' for a run without summary.json (going on, stopped or failed)."""
  if run.finished:
    return 'finished'
  total = run.config.get('total_rounds')
  return f'unfinished: {len(run.rows)} of {total} rounds' if total else f'unfinished: {len(run.rows)} rounds'


# Flags kept when another flag that varies with them could name the setting instead (a grid sweeps `task` and sets
# `num_domains` per task: the rows say `task`).
_NAMING_FLAGS = (METHOD, 'task', 'scenario')


def _partition(runs: list[RunResult], keys: list[str]) -> set[frozenset]:
  groups: dict[tuple, set] = {}
  for index, run in enumerate(runs):
    groups.setdefault(tuple(json.dumps(run.config.get(key)) for key in keys), set()).add(index)
  return {frozenset(group) for group in groups.values()}


def setting_keys(runs: list[RunResult]) -> list[str]:
  """The flags whose values differ between the `runs` that record them, the method first, without
  `NOT_SETTINGS`. A flag some runs do not record (a method's flag added after they ran) does not split them. A flag
  whose value the others determine (it groups the runs no differently) is left out, `_NAMING_FLAGS` last."""
  keys = sorted({key for run in runs for key in run.config} - NOT_SETTINGS)
  varying = [key for key in keys if len({json.dumps(run.config[key]) for run in runs if key in run.config}) > 1]
  groups = _partition(runs, varying)
  for key in sorted(varying, key=lambda key: (key in _NAMING_FLAGS, key)):
    rest = [other for other in varying if other != key]
    if rest and _partition(runs, rest) == groups:
      varying = rest
  return sorted(varying, key=lambda key: (key != METHOD, key))


# Flags the methods of one comparison may set differently: the method, its own parameters, the setup that gave the
# rest, and the flags that mark a reference. Every other flag all of its runs record is the comparison's footing.
METHOD_OWN = frozenset({METHOD, 'num_branches', 'setup', ORACLE_FLAG, DOMAIN_ORACLE_FLAG, 'no_shift'})


def footing_differences(runs: list[RunResult]) -> dict[str, list[str]]:
  """The flags every one of `runs` records, `NOT_SETTINGS` and `METHOD_OWN` aside, whose values differ between them,
  each with its values (sorted): a comparison of these runs is not on one footing in them (FedAvg under FedAdam
  against ShiftEx under averaging compares server steps as much as methods)."""
  if not runs:
    return {}
  keys = set.intersection(*(set(run.config) for run in runs)) - NOT_SETTINGS - METHOD_OWN
  shown = lambda value: ','.join(map(str, value)) if isinstance(value, list) else str(value)
  values = {key: sorted({shown(run.config[key]) for run in runs}, key=_order_text) for key in sorted(keys)}
  return {key: found for key, found in values.items() if len(found) > 1}


def footing_note(runs: list[RunResult]) -> Optional[str]:
  """'not on one footing: server_optimizer adam / sgd; ...' for `runs` that differ in a shared flag, else None."""
  differences = footing_differences(runs)
  if not differences:
    return None
  return 'not on one footing: ' + '; '.join(f'{key} {" / ".join(found)}' for key, found in differences.items())


def uses_test_labels(run: RunResult) -> bool:
  """Whether the run's method chose at test time with the test labels (`--oracle_test_labels`, or a label-reading
  method run before that flag existed)."""
  return run.config.get(METHOD) in ORACLE_METHODS and bool(run.config.get(ORACLE_FLAG, True))


def uses_test_domains(run: RunResult) -> bool:
  """Whether the run's evaluation read the test batches' true domains (`--oracle_test_domains`, or a
  domain-reading method run before that flag existed)."""
  return run.config.get(METHOD) in DOMAIN_ORACLE_METHODS and bool(run.config.get(DOMAIN_ORACLE_FLAG, True))


def uses_training_domains(run: RunResult) -> bool:
  """Whether a setting of the run's method made it decide in training with the true domains (`TRAINING_ORACLE_INFIX`)."""
  return any(TRAINING_ORACLE_INFIX in key and value is True for key, value in run.config.items())


def is_no_shift(run: RunResult) -> bool:
  """Whether the run is the No-Dist-Shift reference (its scenario without its shift)."""
  return run.config.get(METHOD) in NO_SHIFT_METHODS or bool(run.config.get('no_shift', False))


def is_reference_name(method: str) -> bool:
  """Whether a method as `setting` names it is a reference (no shift, or test labels decided)."""
  return method.endswith((ORACLE_MARK, DOMAIN_ORACLE_MARK, TRAINING_ORACLE_MARK, NO_SHIFT_MARK))


def method_name(run: RunResult) -> Optional[str]:
  """The run's method as tables and plots name it: with `ORACLE_MARK` or `NO_SHIFT_MARK` when it is a reference."""
  name = run.config.get(METHOD)
  if name is None:
    return None
  if uses_test_labels(run):
    name += ORACLE_MARK
  if uses_test_domains(run):
    name += DOMAIN_ORACLE_MARK
  if uses_training_domains(run):
    name += TRAINING_ORACLE_MARK
  if is_partly_private(run):
    name += PARTLY_PRIVATE_MARK
  return name + NO_SHIFT_MARK if is_no_shift(run) else name


def is_partly_private(run: RunResult) -> bool:
  """Whether the run's private aggregation left statistics of its method in the clear (`PARTLY_PRIVATE_MARK`)."""
  privacy = (run.summary or {}).get('privacy') or {}
  return bool((privacy.get('not_covered') or {}).get('method_sums'))


def setting(run: RunResult, keys: list[str]) -> tuple:
  """The run's values of `keys`; its method marked `ORACLE_MARK` when it decided with the test labels and
  `NO_SHIFT_MARK` when it is the No-Dist-Shift reference."""
  return tuple(method_name(run) if key == METHOD else run.config.get(key) for key in keys)


def _order(value) -> tuple:
  """Numbers by value (5 before 10), before other values by their text."""
  if isinstance(value, (int, float)) and not isinstance(value, bool):
    return (0, float(value), '')
  return (1, 0.0, str(value))


def _order_text(text: str) -> tuple:
  """A shown value's order: numbers by value, before other text."""
  try:
    return (0, float(text), '')
  except ValueError:
    return (1, 0.0, text)


def by_setting(runs: list[RunResult], keys: list[str]) -> dict[tuple, list[RunResult]]:
  """Runs grouped by their values of `keys` (seeds together), in a stable order (numbers by value)."""
  groups: dict[tuple, list[RunResult]] = {}
  for run in sorted(runs, key=lambda r: (tuple(map(_order, setting(r, keys))), r.config.get('seed', 0))):
    groups.setdefault(setting(run, keys), []).append(run)
  return groups


def comparison_key(values: tuple, keys: list[str]) -> tuple:
  """A setting without its method: the comparison it belongs to."""
  return tuple(value for key, value in zip(keys, values) if key != METHOD)
