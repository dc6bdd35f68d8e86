"""Seed 001's measures from the runs of `bash tools/run_table.sh seed_001`, mean +- standard error over seeds
(percent).

Per finished run, grouped by its recorded task, method and Dirichlet alpha, the last evaluation of metrics.csv: the
seed's server accuracy (`target_server_accuracy`: the global model on every client's own target-domain data; for
methods that do not personalize, `target_accuracy`, the same thing), its client accuracy (`target_accuracy`: after
the method's personalization) and the global model on the centralized target test set (`test_mixture_accuracy`),
with the number of seeds.

    python tools/evolving_table.py --root=/tmp/evolving_table
"""

import collections

from absl import app
from absl import flags

from experiment import run_results
from experiment import statistics

_ROOT = flags.DEFINE_string('root', '/tmp/evolving_table', 'Directory of the runs.')
METHODS = ('vanilla_single', 'fedavg_plus', 'fedrep', 'fedevp', 'fedevolve')
LABELS = {'vanilla_single': 'FedAvg', 'fedavg_plus': 'FedAvg+FT', 'fedrep': 'FedRep', 'fedevp': 'FedEvp',
          'fedevolve': 'FedEvolve'}


def last_evaluation(run: run_results.RunResult) -> dict:
  final = [row for row in run.rows if 'target_accuracy' in row][-1]
  return {'server': final.get('target_server_accuracy', final['target_accuracy']), 'client': final['target_accuracy'],
          'test': final.get('test_mixture_accuracy')}


def table(root: str) -> str:
  runs = collections.defaultdict(list)
  for run in run_results.load(root):
    if run.finished and 'target_accuracy' in run.summary.get('final_metrics', {}):
      config = run.config
      runs[(config['task'], config['algorithm'], str(config.get('dirichlet_alpha')))].append(last_evaluation(run))
  lines = ['| task | Dir alpha | method | seeds | server accuracy | client accuracy | target test set |',
           '|---|---|---|---|---|---|---|']
  order = lambda key: (key[0], -float(key[2]), METHODS.index(key[1]) if key[1] in METHODS else len(METHODS))
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
