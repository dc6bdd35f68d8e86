"""Seed 000's measures from mixture_drift runs (tools/run_pfedem_table.sh), mean +- standard error over seeds.

Per run, from metrics.csv:
  mean accuracy   mean of test_mixture_accuracy (the test data follow the round's mixture) over the evaluations;
  std last 2      standard deviation of test_mixture_accuracy over the evaluations of the last two cycles (Table I
                  of the seed reports it over its 3-cycle runs);
  final 50/50     the mean of the per-domain test accuracies at the last evaluation (a balanced mix, Fig. 2);
  pi corr         for pFedEM, the correlation over rounds of the learned share of the component that tracks base 0
                  best with the imposed share of base 0 (Fig. 4).

    python tools/pfedem_table.py --root=/tmp/pfedem_table
"""

import collections
import csv
import glob
import os
import re

from absl import app
from absl import flags
import numpy as np

_ROOT = flags.DEFINE_string('root', '/tmp/pfedem_table', 'Directory of the runs.')
_NUM_CYCLES = flags.DEFINE_integer('num_cycles', 3, 'Cycles of the runs.')


def run_measures(path: str, num_cycles: int) -> dict:
  with open(path) as f:
    rows = [{k: float(v) for k, v in row.items() if v != ''} for row in csv.DictReader(f)]
  evaluated = [row for row in rows if 'test_accuracy' in row]
  total = rows[-1]['round']
  last_two = [row['test_mixture_accuracy'] for row in evaluated if row['round'] > total * (1 - 2 / num_cycles)]
  domains = [k for k in evaluated[-1] if re.fullmatch(r'test_.+_accuracy', k) and k not in (
      'test_accuracy', 'test_mixture_accuracy')]
  measures = {'mean accuracy': np.mean([row['test_mixture_accuracy'] for row in evaluated]),
              'std last 2': np.std(last_two),
              'final 50/50': np.mean([evaluated[-1][k] for k in domains])}
  shares = [k for k in rows[0] if k.startswith('learned_share_')]
  if shares:
    imposed = np.array([row['scheduled_share_0'] for row in rows])
    measures['pi corr'] = max(np.corrcoef([row[k] for row in rows], imposed)[0, 1] for k in shares)
  return measures


def main(argv):
  del argv  # Unused.
  groups = collections.defaultdict(list)
  for path in sorted(glob.glob(os.path.join(_ROOT.value, '*', 'metrics.csv'))):
    name = os.path.basename(os.path.dirname(path))
    groups[re.sub(r'_s\d+$', '', name)].append(run_measures(path, _NUM_CYCLES.value))
  columns = ['mean accuracy', 'std last 2', 'final 50/50', 'pi corr']
  print('| method / schedule | seeds | ' + ' | '.join(columns) + ' |')
  print('|---|---|' + '---|' * len(columns))
  for group, runs in sorted(groups.items()):
    cells = []
    for column in columns:
      values = [run[column] for run in runs if column in run]
      if not values:
        cells.append('-')
        continue
      error = np.std(values, ddof=1) / np.sqrt(len(values)) if len(values) > 1 else float('nan')
      cells.append(f'{np.mean(values):.4f} +- {error:.4f}')
    print(f'| {group} | {len(runs)} | ' + ' | '.join(cells) + ' |')


if __name__ == '__main__':
  app.run(main)
