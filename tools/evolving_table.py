"""Seed 001's measures from the runs of tools/run_evolving_table.sh, mean +- standard error over seeds (percent).

Per run (`<task>_<method>_a<alpha>_s<seed>`), the last evaluation of metrics.csv: the seed's server accuracy
(`target_server_accuracy`: the global model on every client's own target-domain data; for methods that do not
personalize, `target_accuracy`, the same thing), its client accuracy (`target_accuracy`: after the method's
personalization) and the global model on the centralized target test set (`test_mixture_accuracy`), with the
number of seeds.

    python tools/evolving_table.py --root=/tmp/evolving_table
"""

import collections
import glob
import os
import re

from absl import app
from absl import flags

from experiment import statistics
from experiment import training_loop

_ROOT = flags.DEFINE_string('root', '/tmp/evolving_table', 'Directory of the runs.')
METHODS = ('vanilla_single', 'fedavg_plus', 'fedrep', 'fedevp', 'fedevolve')
LABELS = {'vanilla_single': 'FedAvg', 'fedavg_plus': 'FedAvg+FT', 'fedrep': 'FedRep', 'fedevp': 'FedEvp',
          'fedevolve': 'FedEvolve'}


def last_evaluation(run_dir: str) -> dict:
  rows = [row for row in training_loop.read_metrics(run_dir) if 'target_accuracy' in row]
  final = rows[-1]
  return {'server': final.get('target_server_accuracy', final['target_accuracy']), 'client': final['target_accuracy'],
          'test': final.get('test_mixture_accuracy')}


def table(root: str) -> str:
  runs = collections.defaultdict(list)
  for path in sorted(glob.glob(os.path.join(root, '*_s[0-9]*', 'summary.json'))):  # Finished runs only.
    match = re.fullmatch(r'(\w+?)_(\w+)_a([\w.]+)_s\d+', os.path.basename(os.path.dirname(path)))
    runs[match.groups()].append(last_evaluation(os.path.dirname(path)))
  lines = ['| task | Dir alpha | method | seeds | server accuracy | client accuracy | target test set |',
           '|---|---|---|---|---|---|---|']
  order = lambda key: (key[0], key[2], METHODS.index(key[1]) if key[1] in METHODS else len(METHODS))
  for (task, method, alpha), finals in sorted(runs.items(), key=lambda item: order(item[0])):
    cells = [statistics.mean_error_cell([f[c] for f in finals if f[c] is not None], 100.0, 2)
             for c in ('server', 'client', 'test')]
    lines.append(f'| {task} | {alpha} | {LABELS.get(method, method)} | {len(finals)} | ' + ' | '.join(cells) + ' |')
  return '\n'.join(lines)


def main(argv):
  del argv  # Unused.
  print(table(_ROOT.value))


if __name__ == '__main__':
  app.run(main)
