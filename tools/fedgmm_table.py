"""Seed 004's measures from the runs of tools/run_fedgmm_table.sh, mean +- standard error over seeds.

Per run, the last evaluation of metrics.csv: `personalized_accuracy` (every training client's test split with its
own model: Table 2's "average accuracy of all clients", example-weighted), `unseen_accuracy` (the unseen clients'
test halves after adapting on their other halves: Table 5), `test_accuracy` (the union of the components' test sets
with the global model or mixture weights) and, for methods that route, `routing_ari` (test examples' component
against the true one) and the novelty scores' AUROC, average precision and max-F1 (percent; Table 4), with the
number of runs that report each in parentheses.

    python tools/fedgmm_table.py --root=/tmp/fedgmm_table
"""

import collections
import csv
import glob
import os
import re

from absl import app
from absl import flags
import numpy as np

_ROOT = flags.DEFINE_string('root', '/tmp/fedgmm_table', 'Directory of the runs.')
COLUMNS = ('personalized_accuracy', 'unseen_accuracy', 'test_accuracy', 'routing_ari', 'novelty_auroc',
           'novelty_average_precision', 'novelty_max_f1')
PAPER_TABLE_2 = {'fedgmm': 72.02, 'fedem': 65.61, 'vanilla_single': 53.21, 'fedprox': 52.70, 'fedavg_plus': 53.41,
                 'local': 57.52}


def last_evaluation(path: str) -> dict:
  with open(path) as f:
    rows = [row for row in csv.DictReader(f) if row.get('personalized_accuracy')]
  return {key: float(value) for key, value in rows[-1].items() if value != ''}


def table(root: str) -> str:
  runs = collections.defaultdict(list)
  for path in sorted(glob.glob(os.path.join(root, '*_s[0-9]*', 'summary.json'))):  # Finished runs only.
    method = re.sub(r'_s\d+$', '', os.path.basename(os.path.dirname(path)))
    runs[method].append(last_evaluation(os.path.join(os.path.dirname(path), 'metrics.csv')))
  lines = ['| method | seeds | ' + ' | '.join(COLUMNS) + ' | paper Table 2 |',
           '|---|---|' + '---|' * (len(COLUMNS) + 1)]
  for method, evaluations in runs.items():
    cells = []
    for column in COLUMNS:
      values = np.array([e[column] for e in evaluations if column in e])
      if not len(values):
        cells.append('')
        continue
      error = values.std(ddof=1) / np.sqrt(len(values)) if len(values) > 1 else float('nan')
      cells.append(f'{100 * values.mean():.2f} +- {100 * error:.2f} ({len(values)})' if column != 'routing_ari' else
                   f'{values.mean():.3f} +- {error:.3f} ({len(values)})')
    paper = PAPER_TABLE_2.get(method)
    lines.append(f'| {method} | {len(evaluations)} | ' + ' | '.join(cells) +
                 f' | {"" if paper is None else paper} |')
  return '\n'.join(lines)


def main(argv):
  del argv  # Unused.
  print(table(_ROOT.value))


if __name__ == '__main__':
  app.run(main)
