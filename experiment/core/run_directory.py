"""One run's directory: the configuration it was started with, crash-safe checkpoints, and its metrics rows.

    <root>/<name>/config.json     the configuration (flag name -> value, with task defaults resolved) the run was
                                  started with, written before its first round;
    <root>/<name>/metrics.csv     one row per round (`experiment.core.training_loop`);
    <root>/<name>/checkpoints/    `program_state_<round>` directories in `tff.program.FileProgramStateManager`'s
                                  layout.

Rules that keep results from being lost or mixed:
- `check_compatible` refuses a directory whose `config.json` differs from this run's configuration, naming the
  flags that differ, and a directory that holds outputs but no `config.json` (it cannot be known what wrote
  them). A flag that is absent from an older record matches when it has its default value now.
- A larger `--total_rounds` extends a run whose rounds do not depend on its length (`check_compatible`,
  `prepare`): the same experiment with more rounds, its lengths kept in `config.json`; a smaller one is refused.
- `prepare(..., overwrite=True)` deletes the run's outputs (only the files and directories named above, plus
  `tensorboard/` and `summary.json`) and starts afresh. An attempt that completed no round (no checkpoint, no row,
  no summary: a run stopped by a fault in its first round) holds no result, so it never blocks a run: `prepare`
  replaces it, saying so when its configuration differed.
- Resuming needs metrics.csv's rows up to the round it continues after (`check_metrics`, before anything is built
  and again after the checkpoint is restored): a missing, empty, truncated or unparsable file, or rows out of order,
  stop the run in one line naming the file and how to recover, and the file is left as it is. No rows are ever
  recomputed behind the user's back, and no summary is computed over partial rows.
- `Checkpoints.save` writes each checkpoint under `checkpoints/.staging/` and renames it into place, so a process
  killed while saving leaves the earlier checkpoints whole and no partial one. `Checkpoints.load_latest` restores
  the newest checkpoint that loads: one that does not (a damaged file) is moved to `checkpoints/unloadable/` and
  reported, and the run resumes from an earlier one. When none loads it raises `RunDirectoryError`, never a fresh
  start, since that would overwrite the rows of the run that wrote them.
- `truncate_metrics` keeps the header and the complete rows up to the restored round, dropping a row cut short by
  a kill, before the resumed run appends to the file (`MetricsReleaseManager`). It and `write_json` (config.json,
  summary.json) write a temporary file in the same directory, flush it to disk and rename it into place; rows are
  appended one write each, and a row a kill cut short is dropped on resume.
- A full disk or an exceeded quota during any write is `storage_fault`'s one line (the path, the free space, what
  a checkpoint takes); what was written before stays, and the rerun resumes from the newest checkpoint.
"""

import asyncio
import csv
import errno
import io
import json
import math
import os
import re
import shutil
from typing import Callable, Mapping, NamedTuple, Optional

import numpy as np
import tensorflow as tf
from tensorboard.plugins.scalar import metadata as scalar_metadata
import tensorflow_federated as tff
import tree

from utils import strict_json

CONFIG = 'config.json'
TOTAL_ROUNDS = 'total_rounds'
HISTORY = 'total_rounds_history'  # The lengths an extended run had, in config.json.
SOURCES = 'value_sources'  # In config.json: flag name -> where its value came from (a flag, the method's default ...).
METRICS = 'metrics.csv'
CHECKPOINTS = 'checkpoints'
_OUTPUTS = (CONFIG, METRICS, CHECKPOINTS, 'tensorboard', 'summary.json')
_STAGING = '.staging'
_UNLOADABLE = 'unloadable'
_PREFIX = 'program_state_'


class RunDirectoryError(ValueError):
  """The run directory cannot be used as asked; the message is one line for the user."""


def validate_name(name: str) -> None:
  """Raises RunDirectoryError unless `name` is one path component that stays inside the root directory."""
  if not name or name in ('.', '..') or '/' in name or os.sep in name or '\0' in name:
    raise RunDirectoryError(f'--experiment_name must be a single directory name (no "/", not "." or ".."); '
                            f'got {name!r}.')


def read_config(output_dir: str) -> Optional[dict]:
  """The configuration recorded in `output_dir` (config.json: flag name -> value, without `SOURCES`), or None."""
  recorded = _read_config_file(output_dir)
  return None if recorded is None else {name: value for name, value in recorded.items() if name != SOURCES}


def read_sources(output_dir: str) -> dict:
  """Where the values recorded in `output_dir` came from (config.json's `SOURCES`: flag name -> source); empty for
  a run that did not record them."""
  return (_read_config_file(output_dir) or {}).get(SOURCES, {})


def _read_config_file(output_dir: str) -> Optional[dict]:
  path = os.path.join(output_dir, CONFIG)
  if not os.path.exists(path):
    return None
  with open(path) as f:
    return strict_json.load(f)


def _normalized(value):
  """JSON's view of a value (tuples become lists), so a recorded value compares equal to the same live value."""
  return json.loads(json.dumps(value))


def differences(recorded: Mapping[str, object], config: Mapping[str, object],
                defaults: Mapping[str, object]) -> list[str]:
  """`name: recorded -> now` for every configuration value that differs; a name missing from `recorded` differs
  only when its value now is not `defaults[name]`."""
  changed = []
  for name, value in sorted(config.items()):
    value = _normalized(value)
    before = recorded[name] if name in recorded else _normalized(defaults.get(name, value))
    if before != value:
      shown = repr(before) if name in recorded else f'not recorded, so the default {before!r}'
      changed.append(f'{name}: {shown} -> {value!r}')
  return changed


def check_compatible(output_dir: str, config: Mapping[str, object], defaults: Mapping[str, object],
                     length_dependence: Optional[str] = None) -> None:
  """Raises RunDirectoryError if `output_dir` holds a run of another configuration, or outputs of unknown origin.

  A larger `total_rounds` than recorded extends the run (`prepare`), unless `length_dependence` says why the run's
  rounds depend on its length; a smaller one is refused. Reads only; call it before building anything. `config`
  maps flag names to values (JSON-serializable), `defaults` flag names to their default values.
  """
  if not os.path.isdir(output_dir):
    if os.path.exists(output_dir):
      raise RunDirectoryError(f'{output_dir} exists and is not a directory.')
    return
  recorded = read_config(output_dir)
  if recorded is None:
    if any(os.path.exists(os.path.join(output_dir, name)) for name in _OUTPUTS):
      raise RunDirectoryError(f'{output_dir} holds outputs of a run without a {CONFIG}; rerun with --overwrite to '
                              'start afresh, or choose another --experiment_name.')
    return
  before, now = recorded.get(TOTAL_ROUNDS), config.get(TOTAL_ROUNDS)
  if before is not None and now is not None and now != before:
    if now < before:
      raise RunDirectoryError(f'{output_dir} holds a run of {before} rounds; --total_rounds={now} would shorten it '
                              '(a run can be extended, not shortened); --overwrite replaces it.')
    if length_dependence is not None:
      raise RunDirectoryError(f'{output_dir} holds a run of {before} rounds that cannot be extended to {now}: '
                              f'{length_dependence}; --overwrite replaces it, or choose another --experiment_name.')
    config = dict(config, **{TOTAL_ROUNDS: before})
  changed = differences(recorded, config, defaults)
  if changed and completed_no_round(output_dir):
    return  # An attempt that never completed a round holds no result: `prepare` replaces it.
  if changed:
    raise RunDirectoryError(f'{output_dir} holds a run with another configuration ({"; ".join(changed)}); rerun '
                            'with the same flags to resume it, --overwrite to replace it, or choose another '
                            '--experiment_name.')


def write_json(path: str, value: Mapping[str, object]) -> None:
  """Writes `value` to `path` atomically (a temporary file in the same directory, flushed to disk, renamed into
  place), so a reader sees the old file or the new one, never part of one; strict JSON (`utils.strict_json`:
  an infinite epsilon is "inf")."""
  _write_atomically(path, lambda f: strict_json.dump(value, f, indent=2, sort_keys=True))


def prepare(output_dir: str, config: Mapping[str, object], overwrite: bool,
            scheduled: Callable[[int], bool] = lambda round_num: True,
            sources: Optional[Mapping[str, str]] = None) -> Optional[int]:
  """Creates `output_dir` (deleting the run's outputs first when `overwrite`) and records `config` in it, with
  `sources` (where each value came from) as config.json's `SOURCES`.

  A run recorded with fewer `total_rounds` (`check_compatible` allowed it) is extended: its `config.json` takes
  the new length and keeps the lengths it had in `total_rounds_history`, its `summary.json` (of the shorter run) is
  removed, and the recorded length is returned; otherwise None. The shorter run's last round was evaluated and
  checkpointed because it was last; unless `scheduled(round)` says a run of the new length does both there too,
  its checkpoint is deleted first, so the run resumes from the checkpoint before and recomputes the rounds in
  between as a run of the new length does (a kill in between finds the same state).

  Raises RunDirectoryError, with the operating system's reason, when the directory cannot be created or written.
  """
  try:
    if not overwrite and os.path.isdir(output_dir) and read_config(output_dir) is not None and completed_no_round(
        output_dir):
      if _normalized(dict(config)) != read_config(output_dir):
        print(f'Replacing the attempt in {output_dir}, which had another configuration and completed no round.')
      overwrite = True
    if overwrite and os.path.isdir(output_dir):
      for name in _OUTPUTS:
        path = os.path.join(output_dir, name)
        if os.path.isdir(path):
          shutil.rmtree(path)
        elif os.path.exists(path):
          os.remove(path)
    os.makedirs(output_dir, exist_ok=True)
    recorded = _read_config_file(output_dir)
    if recorded is None:
      write_json(os.path.join(output_dir, CONFIG), dict(config, **({SOURCES: dict(sources)} if sources else {})))
      return None
    before, now = recorded.get(TOTAL_ROUNDS), config.get(TOTAL_ROUNDS)
    if before is None or now is None or now <= before:
      return None
    if not scheduled(before):
      Checkpoints(output_dir).discard(before)
    history = recorded.get(HISTORY, [before]) + [now]
    write_json(os.path.join(output_dir, CONFIG), dict(recorded, **{TOTAL_ROUNDS: now, HISTORY: history}))
    summary = os.path.join(output_dir, 'summary.json')
    if os.path.exists(summary):
      os.remove(summary)
    return before
  except OSError as error:
    raise RunDirectoryError(f'cannot write the run directory {output_dir}: {error.strerror or error}.') from error


class MetricsFile(NamedTuple):
  """metrics.csv as parsed by `read_metrics_file`: its columns and its complete rows (cells as written)."""
  fieldnames: list[str]
  rows: list[list[str]]

  @property
  def rounds(self) -> list[int]:
    if not self.rows:
      return []
    column = self.fieldnames.index('round')
    return [int(float(row[column])) for row in self.rows]  # Whole numbers: `read_metrics_file` checked them.


def _recover(path: str) -> str:
  return (f'move {path} aside and rerun with --overwrite to start afresh, or restore the file, or choose another '
          '--experiment_name')


def read_metrics_file(output_dir: str) -> Optional[MetricsFile]:
  """metrics.csv's columns and complete rows (None when there is no file; an empty file has none), dropping only a
  last line without its newline (a row cut short by a kill). Raises RunDirectoryError (one line naming the file)
  when the header has no `round` column, a row has another number of cells or a cell that is not a number,
  or the rounds are not 1, 2, 3, ... in order: such a file cannot be resumed, and is not touched."""
  path = os.path.join(output_dir, METRICS)
  if not os.path.exists(path):
    return None
  with open(path, newline='') as f:
    text = f.read()
  if not text:
    return MetricsFile([], [])
  text = text[:text.rfind('\n') + 1]  # Without a last line that a kill cut short.
  try:
    lines = list(csv.reader(io.StringIO(text, newline='')))
  except csv.Error as error:
    raise RunDirectoryError(f'{path} cannot be parsed as CSV ({error}); {_recover(path)}.') from None
  if not lines:
    return MetricsFile([], [])
  fieldnames, rows = lines[0], lines[1:]
  if 'round' not in fieldnames:
    raise RunDirectoryError(f'{path} has no "round" column (its header: {",".join(fieldnames)[:80]!r}); '
                            f'{_recover(path)}.')
  for line_number, row in enumerate(rows, start=2):
    if len(row) != len(fieldnames):
      raise RunDirectoryError(f'{path} line {line_number} has {len(row)} cells for {len(fieldnames)} columns; '
                              f'{_recover(path)}.')
    for cell in row:
      try:
        float(cell or 0)
      except ValueError:
        raise RunDirectoryError(f'{path} line {line_number} holds {cell[:40]!r}, not a number; '
                                f'{_recover(path)}.') from None
  column = fieldnames.index('round')
  for line_number, row in enumerate(rows, start=2):
    value = float(row[column] or 'nan')
    if not (math.isfinite(value) and value.is_integer() and value >= 1):
      raise RunDirectoryError(f'{path} line {line_number} has round {row[column]!r}, not a whole number >= 1; '
                              f'{_recover(path)}.')
  parsed = MetricsFile(fieldnames, rows)
  if parsed.rounds != list(range(1, len(rows) + 1)):
    raise RunDirectoryError(f'{path} holds {_span(parsed.rounds)}, not 1, 2, 3, ... in order; '
                            f'{_recover(path)}.')
  return parsed


def _span(rounds: list[int]) -> str:
  return 'no rows' if not rounds else f'rounds {rounds[0]}-{rounds[-1]} ({len(rounds)} rows)'


def check_metrics(output_dir: str, last_round: int) -> None:
  """Raises RunDirectoryError (one line naming the file and how to recover) unless metrics.csv parses
  (`read_metrics_file`) and holds the rows of rounds 1..`last_round`, the round a resumed run continues after: rows
  the checkpoint holds no state for cannot be recomputed, and a summary over the rest would be a wrong result."""
  parsed = read_metrics_file(output_dir)
  if last_round == 0:
    return
  path = os.path.join(output_dir, METRICS)
  if parsed is None or len(parsed.rows) < last_round:
    held = 'is missing' if parsed is None else f'holds {_span(parsed.rounds)}'
    raise RunDirectoryError(f'{path} {held}, but the run resumes after round {last_round} (its newest checkpoint): '
                            f'the rows up to it cannot be recomputed from the checkpoint; {_recover(path)}.')


def newest_checkpoint_round(output_dir: str) -> int:
  """The round of the newest checkpoint in `output_dir` by its directory name (0 if none), read without TFF."""
  root = os.path.join(output_dir, CHECKPOINTS)
  names = os.listdir(root) if os.path.isdir(root) else []
  return max((int(name[len(_PREFIX):]) for name in names
              if name.startswith(_PREFIX) and name[len(_PREFIX):].isdigit()), default=0)


def _write_atomically(path: str, write: Callable) -> None:
  """`write(file)` into a temporary file beside `path`, flushed to disk, then renamed over `path`; a write that
  fails (a full disk) leaves `path` as it was and no temporary file."""
  temporary = path + '.tmp'
  try:
    with open(temporary, 'w', newline='') as f:
      write(f)
      f.flush()
      os.fsync(f.fileno())
  except BaseException:
    if os.path.exists(temporary):
      os.remove(temporary)
    raise
  os.replace(temporary, path)


_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)
# TensorFlow's file errors end `<path>; <strerror>` (a checkpoint's SaveV2, a summary writer's flush).
_TF_FULL = re.compile(r'(/[^;{}]*); (No space left on device|Disk quota exceeded)')


def storage_fault(error: BaseException, output_dir: str) -> Optional[str]:
  """One line for `error` when it is a full disk or an exceeded quota (an OSError, or TensorFlow's error for one),
  naming the path written, the free space, what a checkpoint of the run takes and the round a rerun resumes after;
  None for any other error."""
  if isinstance(error, OSError) and error.errno in _FULL_ERRNOS:
    path, reason = error.filename or output_dir, os.strerror(error.errno)
  elif isinstance(error, tf.errors.OpError) and (found := _TF_FULL.search(error.message or '')):
    path, reason = re.sub(rf'(/{_PREFIX}\d+)_temp[^/]*/.*$', r'\1', found.group(1)), found.group(2)
  else:
    return None
  try:
    free = shutil.disk_usage(output_dir).free
  except OSError:
    free = 0
  resumes = newest_checkpoint_round(output_dir)
  checkpoint = _tree_bytes(os.path.join(output_dir, CHECKPOINTS, f'{_PREFIX}{resumes}'))
  needed = checkpoint + (1 << 20)  # A checkpoint saved whole before the oldest goes, and room for rows and events.
  size = _megabytes(checkpoint) if checkpoint else 'an unknown size (none was saved yet)'
  return (f'{reason[0].lower()}{reason[1:]} while writing {path}: {_megabytes(free)} free there, and a checkpoint of '
          f'this run takes {size}; free at least {_megabytes(needed)} and rerun the command, which resumes '
          f'{f"after round {resumes}" if resumes else "from the start"}.')


def _tree_bytes(path: str) -> int:
  """The bytes of the files under `path` (0 when it does not exist)."""
  return sum(os.path.getsize(os.path.join(folder, name)) for folder, _, names in os.walk(path) for name in names)


def _megabytes(count: int) -> str:
  return f'{count / 1e6:.1f} MB'


def truncate_metrics(output_dir: str, last_round: int) -> None:
  """Keeps the header and the complete rows with `round` <= `last_round` of metrics.csv (atomically); raises
  RunDirectoryError, leaving the file as it is, when `check_metrics` refuses it."""
  check_metrics(output_dir, last_round)
  parsed = read_metrics_file(output_dir)
  if parsed is None:
    return
  if not parsed.fieldnames:  # An empty file (nothing in it to keep): the release manager writes a new one.
    os.remove(os.path.join(output_dir, METRICS))
    return

  def write(f):
    writer = csv.writer(f, lineterminator='\r\n')  # As TFF's DictWriter writes them.
    writer.writerow(parsed.fieldnames)
    writer.writerows(parsed.rows[:last_round])

  _write_atomically(os.path.join(output_dir, METRICS), write)


def completed_no_round(output_dir: str) -> bool:
  """Whether `output_dir` holds an attempt that never completed a round: no checkpoint, no summary.json and no row in
  metrics.csv (a run stopped by a fault in its first round, or before it)."""
  try:
    parsed = read_metrics_file(output_dir)
  except RunDirectoryError:
    return False
  return (newest_checkpoint_round(output_dir) == 0 and not os.path.exists(os.path.join(output_dir, 'summary.json'))
          and (parsed is None or not parsed.rows))


class MetricsReleaseManager(tff.program.CSVFileReleaseManager):
  """TFF's CSV release manager for metrics.csv, appending a round's row without first rewriting the file.

  TFF 0.87's `release(value, key)` removes the rows with keys >= `key` by calling `_remove_values_greater_than_key(key -
  1)`, which returns at once only when `key - 1` is above the latest key; for the row after the latest (`key - 1` equal
  to it) it reads and rewrites the whole file, at every release, so a run's metrics cost grows with its rows,
  quadratically over the run (a concern for rows of thousands of columns, as ShiftEx's routing counts make). Here a key
  above the latest only appends (as TFF's append mode does after its removal); a key at or below the latest still
  removes the rows from it on, through TFF's own code. The rows a resumed run follows are cut by `truncate_metrics`
  first, so its first release is also an append.
  """

  async def _remove_values_greater_than_key(self, key: int) -> None:
    if self._latest_key is None or key >= self._latest_key:
      return
    await super()._remove_values_greater_than_key(key)


def _is_number(value) -> bool:
  array = np.asarray(value)
  return array.dtype.kind in 'biuf' and not array.shape


class TensorBoardReleaseManager(tff.program.TensorBoardReleaseManager):
  """TFF's TensorBoard release manager, writing all the scalars of a release in one call of one traced function.

  TFF 0.87 writes every scalar with `tf.summary.scalar` in eager mode, a handful of eager tensors per value, and TF
  2.14 on Python 3.11 never frees 16 bytes of every eager tensor it makes (a pymalloc block; tensorflow#62551,
  "Python >=3.11 TF memory leaks"), and a row may hold thousands of scalars (ShiftEx's routing counts per domain and
  expert), so a driver would grow through TensorBoard alone. Here a release's
  scalars go to `write_scalars` as two vectors (tags, float32 values), traced once, which writes for each the
  event `tf.summary.scalar` writes (the tag, the step, the value cast to float32, the scalars plugin's metadata):
  a few eager tensors per release. Other values go as TFF releases them (histograms for arrays, nothing for
  strings).
  """

  def __init__(self, summary_dir: str):
    super().__init__(summary_dir)
    writer = self._summary_writer
    metadata = scalar_metadata.create_summary_metadata(display_name=None, description=None)

    @tf.function(input_signature=(tf.TensorSpec([None], tf.string), tf.TensorSpec([None], tf.float32),
                                  tf.TensorSpec([], tf.int64)))
    def write_scalars(tags, values, step):
      with writer.as_default(step=step):
        for index in tf.range(tf.size(tags)):
          tf.summary.write(tags[index], values[index], metadata=metadata)

    self._write_scalars = write_scalars

  async def release(self, value, key: int) -> None:
    """Releases `value` (a structure of numbers and arrays) at step `key`: its scalars in one call (class
    docstring), the rest through TFF's `release`."""
    materialized = await tff.program.materialize_value(value)
    named = {'/'.join(map(str, path)): item for path, item in tree.flatten_with_path(materialized)}
    scalars = {tag: item for tag, item in named.items() if _is_number(item)}
    rest = {tag: item for tag, item in named.items() if tag not in scalars}
    if scalars:
      self._write_scalars(tf.constant(list(scalars)), tf.constant(np.array(list(scalars.values()), np.float32)),
                          tf.constant(key, tf.int64))
    if rest:
      await super().release(rest, key)


class Checkpoints:
  """The learning-process state after checkpointed rounds, saved atomically; the newest `keep` are kept."""

  def __init__(self, output_dir: str, keep: int = 3):
    self._root = os.path.join(output_dir, CHECKPOINTS)
    self._staging = os.path.join(self._root, _STAGING)
    self._keep = keep
    self._manager = tff.program.FileProgramStateManager(self._root, prefix=_PREFIX)

  def rounds(self) -> list[int]:
    """The rounds of the saved checkpoints, oldest first."""
    return asyncio.run(self._manager.get_versions()) or []

  def save(self, state, round_num: int) -> None:
    """Saves `state` as the checkpoint of `round_num`: written whole under .staging, then renamed into place."""
    shutil.rmtree(self._staging, ignore_errors=True)  # What a killed save left.
    staging = tff.program.FileProgramStateManager(self._staging, prefix=_PREFIX)
    asyncio.run(staging.save(state, round_num))
    final = self.path(round_num)
    if os.path.exists(final):
      shutil.rmtree(final)
    os.rename(os.path.join(self._staging, f'{_PREFIX}{round_num}'), final)
    for old in self.rounds()[:-self._keep]:  # Moved out of sight first, so a kill cannot leave half of one.
      discarded = os.path.join(self._staging, f'discarded_{old}')
      os.rename(self.path(old), discarded)
      shutil.rmtree(discarded)

  def check_loadable(self, structure) -> None:
    """Raises RunDirectoryError when checkpoints exist and none loads with `structure`; reads only (a run checks this
    before `prepare` edits the directory, as an extension does)."""
    reasons = []
    for round_num in reversed(self.rounds()):
      try:
        asyncio.run(self._manager.load(round_num, structure))
        return
      except Exception as error:  # pylint: disable=broad-except
        reasons.append((round_num, str(error).splitlines()[0] if str(error) else type(error).__name__))
    if reasons:
      raise self._none_loads(*reasons[0])

  def _none_loads(self, round_num: int, reason: str) -> 'RunDirectoryError':
    return RunDirectoryError(f'no checkpoint in {self._root} loads into this run\'s state (round {round_num}: '
                             f'{reason}); rerun with --overwrite to start afresh.')

  def load_latest(self, structure) -> 'Restored':
    """The newest checkpoint that loads with `structure` (state None and round 0 if there is no checkpoint).

    Newer checkpoints that do not load are moved to `checkpoints/unloadable/` (kept for inspection, out of the
    rounds a later save keeps or a later resume reads) and listed in `Restored.unloadable`. Raises
    RunDirectoryError if none loads: the directory holds the state of another process, or only damaged files.
    """
    rounds, unloadable = self.rounds(), []
    for round_num in reversed(rounds):
      try:
        state = asyncio.run(self._manager.load(round_num, structure))
      except Exception as error:  # pylint: disable=broad-except
        unloadable.append((round_num, str(error).splitlines()[0] if str(error) else type(error).__name__))
        continue
      for skipped, _ in unloadable:
        self._move_aside(skipped)
      return Restored(state, round_num, tuple(unloadable))
    if not rounds:
      return Restored(None, 0, ())
    raise self._none_loads(*unloadable[0])

  def _move_aside(self, round_num: int) -> None:
    aside = os.path.join(self._root, _UNLOADABLE)
    os.makedirs(aside, exist_ok=True)
    target = os.path.join(aside, f'{_PREFIX}{round_num}')
    shutil.rmtree(target, ignore_errors=True)
    os.rename(self.path(round_num), target)

  def discard(self, round_num: int) -> None:
    """Deletes the checkpoint of `round_num`, if there is one."""
    shutil.rmtree(self.path(round_num), ignore_errors=True)

  def path(self, round_num: int) -> str:
    """Where the checkpoint of `round_num` is (or was, before it was moved aside)."""
    return os.path.join(self._root, f'{_PREFIX}{round_num}')


class Restored(NamedTuple):
  """What `Checkpoints.load_latest` restored: the state (None: no checkpoint), its round (0: none) and the newer
  checkpoints that did not load, (round, first line of the error), newest first."""
  state: Optional[object]
  round_num: int
  unloadable: tuple[tuple[int, str], ...]
