"""A directory of runs as the report reads it: each run's settings, its metrics rows and its summary, from the
files alone (`config.json`, `metrics.csv`, `summary.json`; `experiment.core.run_directory`), without TensorFlow.

Runs are compared within *settings*: the configuration flags that differ between the runs of the root, without
the seed. Settings that differ only in the algorithm form one *comparison* (the methods of one table block or one
plot).
"""

import csv
import dataclasses
import glob
import json
import os
from typing import Optional

# Flags that name or place a run, or repeat it, rather than set it.
NOT_SETTINGS = frozenset({'seed', 'experiment_name', 'root_output_dir', 'overwrite', 'cache_dir', 'tfds_data_dir'})
METHOD = 'algorithm'
ORACLE_FLAG = 'oracle_test_labels'
# Methods whose test-time choice reads the test labels with `--oracle_test_labels`, and always did before the flag
# existed (runs that do not record it).
ORACLE_METHODS = frozenset({'fedem', 'cfl', 'feddrift'})
ORACLE_MARK = ' (oracle: test labels)'
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


def _read_rows(path: str) -> list[dict]:
  with open(path) as f:
    return [{key: float(value) for key, value in row.items() if value not in ('', None)} for row in csv.DictReader(f)]


def load(root: str) -> list[RunResult]:
  """Every run directory under `root` with a configuration and metrics, by name."""
  runs = []
  for config_path in sorted(glob.glob(os.path.join(root, '*', 'config.json'))):
    run_dir = os.path.dirname(config_path)
    metrics_path = os.path.join(run_dir, 'metrics.csv')
    if not os.path.exists(metrics_path):
      continue
    with open(config_path) as f:
      config = json.load(f)
    summary = None
    if os.path.exists(os.path.join(run_dir, 'summary.json')):
      with open(os.path.join(run_dir, 'summary.json')) as f:
        summary = json.load(f)
    runs.append(RunResult(os.path.basename(run_dir), config, _read_rows(metrics_path), summary))
  return runs


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


def uses_test_labels(run: RunResult) -> bool:
  """Whether the run's method chose at test time with the test labels (`--oracle_test_labels`, or a label-reading
  method run before that flag existed)."""
  return run.config.get(METHOD) in ORACLE_METHODS and bool(run.config.get(ORACLE_FLAG, True))


def is_no_shift(run: RunResult) -> bool:
  """Whether the run is the No-Dist-Shift reference (its scenario without its shift)."""
  return run.config.get(METHOD) in NO_SHIFT_METHODS or bool(run.config.get('no_shift', False))


def is_reference_name(method: str) -> bool:
  """Whether a method as `setting` names it is a reference (no shift, or test labels decided)."""
  return method.endswith((ORACLE_MARK, NO_SHIFT_MARK))


def method_name(run: RunResult) -> Optional[str]:
  """The run's method as tables and plots name it: with `ORACLE_MARK` or `NO_SHIFT_MARK` when it is a reference."""
  name = run.config.get(METHOD)
  if name is None:
    return None
  if uses_test_labels(run):
    name += ORACLE_MARK
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


def by_setting(runs: list[RunResult], keys: list[str]) -> dict[tuple, list[RunResult]]:
  """Runs grouped by their values of `keys` (seeds together), in a stable order (numbers by value)."""
  groups: dict[tuple, list[RunResult]] = {}
  for run in sorted(runs, key=lambda r: (tuple(map(_order, setting(r, keys))), r.config.get('seed', 0))):
    groups.setdefault(setting(run, keys), []).append(run)
  return groups


def comparison_key(values: tuple, keys: list[str]) -> tuple:
  """A setting without its method: the comparison it belongs to."""
  return tuple(value for key, value in zip(keys, values) if key != METHOD)
