"""Summarizes finished runs as one markdown table: mean +- standard error over seeds per setting.

    bazel run //experiment:summarize -- --root=/tmp/periodic_shift

A setting is a run's flags without the seed and output names, read from each `summary.json` under `--root`;
the figures are means over the evaluations of each run's last period, from its `metrics.csv`
(`training_loop.final_metrics`): test accuracy, day and night accuracy, and routing accuracy where present.
"""

import collections
import glob
import json
import os

from absl import app
from absl import flags

from experiment import statistics
from experiment import training_loop

_ROOT = flags.DEFINE_string('root', '/tmp/periodic_shift', 'Directory whose sub-directories hold runs.')
_SETTING_FLAGS = ('task', 'algorithm', 'shift_fn', 'shift_p', 'period', 'prior', 'num_branches')
_COLUMNS = ('test_accuracy_last_period_mean', 'test_day_accuracy_last_period_mean',
            'test_night_accuracy_last_period_mean', 'routing_accuracy_last_period_mean')


def _setting(summary: dict) -> tuple:
  values = dict(summary['flags'], **summary['resolved_hyperparameters'])
  if values.get('algorithm') not in ('fedtem', 'fedtkm'):
    values['prior'] = '-'
  if values.get('algorithm') == 'nds':
    values['shift_fn'], values['shift_p'] = 'none', '-'
  return tuple(values.get(name) for name in _SETTING_FLAGS)


def table(root: str) -> str:
  """The markdown table of all runs under `root`."""
  runs = collections.defaultdict(list)
  for path in sorted(glob.glob(os.path.join(root, '*', 'summary.json'))):
    with open(path) as f:
      summary = json.load(f)
    rows = training_loop.read_metrics(os.path.dirname(path))
    period = summary['resolved_hyperparameters']['period']
    runs[_setting(summary)].append(training_loop.final_metrics(rows, window_rounds=period))
  header = list(_SETTING_FLAGS) + ['seeds'] + [c.replace('_last_period_mean', '') for c in _COLUMNS]
  lines = ['| ' + ' | '.join(header) + ' |', '|' + '---|' * len(header)]
  for setting, finals in sorted(runs.items(), key=lambda item: tuple(map(str, item[0]))):
    cells = [statistics.mean_error_cell([f[c] for f in finals if c in f]) for c in _COLUMNS]
    lines.append('| ' + ' | '.join(map(str, setting)) + f' | {len(finals)} | ' + ' | '.join(cells) + ' |')
  return '\n'.join(lines)


def main(argv):
  del argv  # Unused.
  print(table(_ROOT.value))


if __name__ == '__main__':
  app.run(main)
