"""Whether a diagonal GMM over a frozen encoder's features can find a task's bases (`experiment/core/base_separability.py`),
for the encoder a pFedEM run with the same task, seed and `--pfedem_features` freezes.

    bazel run //experiment:check_base_separability -- --task=synthetic --seeds=0,1,2 --features=pretrained

Prints, per seed, over every training example of every base pooled: the logistic-probe accuracy of the base from
the features, and the mean log-likelihood and ARI against the bases of the highest-likelihood diagonal GMM found and
of the GMM of the bases' own Gaussians.

With `--by_granularity`, a second table: k-means ARI and probe accuracy on every example, every batch's mean and
every client's mean feature (each client's training data of its base in batches of `--batch_size`;
`base_separability.separation_by_granularity`), for clustering that only sums what clients send:

    bazel run //experiment:check_base_separability -- --task=digits --seeds=0,1,2 --features=raw --by_granularity
"""

import sys

from absl import app
from absl import flags
import numpy as np
import tensorflow_federated as tff

from algorithms.methods import pfedem
from experiment.core import base_separability
from tasks import registry as tasks
from tasks import task as task_lib

_TASK = flags.DEFINE_string('task', 'synthetic', f'One of {", ".join(tasks.TASKS)}.')
_SEEDS = flags.DEFINE_list('seeds', ['0'], 'Run seeds: the task\'s data and the encoder (as pFedEM\'s).')
_FEATURES = flags.DEFINE_enum('features', 'pretrained', list(pfedem.FROZEN_ENCODERS) + ['raw'],
                              'The encoder, as --pfedem_features.')
_PRETRAIN_EPOCHS = flags.DEFINE_integer('pretrain_epochs', 8, 'As --pfedem_pretrain_epochs.')
_STARTS = flags.DEFINE_integer('starts', 10, 'EM starts of the highest-likelihood GMM.')
_STYLE_SCALE = flags.DEFINE_float('synthetic_style_scale', None, 'As run_experiment\'s.')
_CACHE_DIR = flags.DEFINE_string('cache_dir', None, 'As run_experiment\'s.')
_TFDS_DATA_DIR = flags.DEFINE_string('tfds_data_dir', None, 'As run_experiment\'s.')
_BY_GRANULARITY = flags.DEFINE_bool('by_granularity', False, 'Also the separation of examples, batch means and client '
                                    'means (module docstring).')
_BATCH_SIZE = flags.DEFINE_integer('batch_size', 10, 'Batches of --by_granularity (the digits task\'s client batch).')


def _encoder(task_settings, seed: int):
  """(task, features_fn): the task of `seed` and the frozen encoder a pFedEM run of it uses."""
  task = tasks.create(_TASK.value, task_settings, task_lib.DataFiles(_CACHE_DIR.value, _TFDS_DATA_DIR.value), seed)
  weights = pfedem.frozen_encoder_weights(task, _FEATURES.value, _PRETRAIN_EPOCHS.value, seed)
  return task, pfedem.Features(_FEATURES.value, lambda: task.model_fn(1), weights)


def _features(task, features_fn, seed: int) -> tuple[np.ndarray, np.ndarray, int]:
  """(features [N, D], bases [N], K) over the task's pooled training examples."""
  features, bases = zip(*pfedem.pooled_features(task, features_fn, seed))
  return np.concatenate(features), np.concatenate(bases), len(task.domain_names)


def _client_features(task, features_fn, seed: int) -> tuple[list[list[np.ndarray]], list[int]]:
  """(per client of every base, its feature batches [B, D]; the clients' bases)."""
  spec = tff.simulation.baselines.ClientSpec(1, _BATCH_SIZE.value)
  clients, bases = [], []
  for base, client_ids in enumerate(task.mode_client_ids()):
    for client_id in client_ids:
      batches = task_lib.model_batches(task.client_dataset(base, client_id, spec, (seed, 0)), task.batch_fn)
      clients.append([features_fn(None, batch['x']).numpy() for batch in batches])
      bases.append(base)
  return clients, bases


def main(argv):
  try:
    if len(argv) > 1:
      raise ValueError(f'unexpected arguments: {" ".join(argv[1:])}')
    task_settings = tasks.settings_from(_TASK.value, {'synthetic_style_scale': _STYLE_SCALE.value})
    tasks.validate(_TASK.value, task_settings)
    if not all(seed.isdigit() for seed in _SEEDS.value):
      raise ValueError(f'--seeds takes non-negative integers; got {",".join(_SEEDS.value)}.')
    seeds = [int(seed) for seed in _SEEDS.value]
    if _PRETRAIN_EPOCHS.value < 1 or _STARTS.value < 1 or _BATCH_SIZE.value < 1:
      raise ValueError('--pretrain_epochs, --starts and --batch_size must be >= 1.')
  except ValueError as error:
    print(f'check_base_separability: error: {error}', file=sys.stderr)
    sys.exit(2)
  print('| seed | examples | probe accuracy | best GMM log-lik. | best GMM ARI | bases\' GMM log-lik. '
        '| bases\' GMM ARI |')
  print('|---|---|---|---|---|---|---|')
  granularity = []
  for seed in seeds:
    task, features_fn = _encoder(task_settings, seed)
    features, bases, num_bases = _features(task, features_fn, seed)
    result = base_separability.separability(features, bases, num_bases, _STARTS.value, seed)
    print(f'| {seed} | {len(bases)} | {result.probe_accuracy:.3f} | {result.best_log_likelihood:.2f} | '
          f'{result.best_ari:.2f} | {result.bases_log_likelihood:.2f} | {result.bases_ari:.2f} |', flush=True)
    if _BY_GRANULARITY.value:
      clients, client_bases = _client_features(task, features_fn, seed)
      granularity.append((seed, base_separability.separation_by_granularity(clients, client_bases, num_bases, seed)))
  if granularity:
    print('\n| seed | examples: k-means ARI / probe | batch means | client means |\n|---|---|---|---|')
    for seed, by_name in granularity:
      cells = [f'{g.kmeans_ari:.2f} / {g.probe_accuracy:.2f} ({g.count})' for g in by_name.values()]
      print(f'| {seed} | {" | ".join(cells)} |')


if __name__ == '__main__':
  app.run(main)
