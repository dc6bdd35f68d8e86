"""Why FedEvp trains under parameter averaging and stalls under FedAdam: traces of its loss terms and of its
representation's spread, round by round (Tan et al., "Federated Learning Under Evolving Distribution Shifts", 2024).

One run of `run_experiment.py`'s flags (`--` then the flags; the defaults below are the emnist CNN on real digits in
EMNIST's layout under evolving_domains, 7 domains 15 degrees apart), trained round by round in this process. Every
`--every` rounds, on the round's first client's batches (its own sources, as it trains on them), the global model
gives:

  ce          the cross-entropy of its classifier (Eq. 8);
  alignment   the prototype alignment of Eq. 7 as the objective weighs it (`stage_reduction` mean);
  spread      the representation's spread: the mean over feature dimensions of the standard deviation of f(x)
              across the batch's examples, divided by the mean norm of f(x) (0: every example maps to one point);
  separation  between-class over within-class variance of f(x) (the prototypes' distinctness);
  live        the share of f(x)'s units, and of the classifier's hidden units, that are nonzero on at least one of
              the batch's examples (a ReLU unit at zero on every example passes no gradient);
  update      the norm of the round's change of the global model, and of the representation's part.

    bazel run //benchmarks:fedevp_server_step -- --cache_dir=DIR --server_optimizer=adam
"""

import os
import sys

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

from absl import flags
import numpy as np
import tensorflow as tf

from algorithms.core import learning_process
from algorithms.core import objectives
from algorithms.methods import fedevp
from experiment.core import assembly
from models import multi_branch
from tasks import task as task_lib
import run_experiment

_DEFAULT_FLAGS = ['--task=emnist', '--scenario=evolving_domains', '--num_domains=7', '--rotation_step=15',
                  '--num_clients=6', '--clients_per_round=6', '--client_batch_size=128', '--algorithm=fedevp',
                  '--total_rounds=80', '--root_output_dir=/tmp/fedevp_server_step']


def _terms(model, batches, config: fedevp.Config, task) -> dict:
  objective = fedevp.training_objective(task.num_stages, task.num_classes, config)
  ce, total, features, labels, hidden = [], [], [], [], []
  head = [layer for layer in model.layers if isinstance(layer, tf.keras.Model)][-1]
  for batch in batches:
    outputs = model(batch['x'], training=False)
    hidden.append(head.layers[0](outputs[multi_branch.FEATURES]).numpy())
    ce.append(float(objectives.averaged_branches(outputs, batch).loss))
    total.append(float(objective(outputs, batch).loss))
    features.append(outputs[multi_branch.FEATURES].numpy())
    labels.append(batch['y'].numpy())
  f, y = np.concatenate(features), np.concatenate(labels)
  class_means = np.stack([f[y == c].mean(axis=0) for c in np.unique(y)])
  within = np.mean([f[y == c].var(axis=0).sum() for c in np.unique(y)])
  h = np.concatenate(hidden)
  return {'ce': np.mean(ce), 'alignment': np.mean(total) - np.mean(ce),
          'live_features': float(np.mean(f.max(axis=0) > 0)), 'live_hidden': float(np.mean(h.max(axis=0) > 0)),
          'spread': float(f.std(axis=0).mean() / max(np.linalg.norm(f, axis=1).mean(), 1e-12)),
          'separation': float(class_means.var(axis=0).sum() / max(within, 1e-12))}


def main() -> None:
  argv = sys.argv[1:]
  every = 10
  if argv and argv[0].startswith('--every='):
    every, argv = int(argv[0].split('=')[1]), argv[1:]
  flag_values = flags.FlagValues()
  run_experiment.define_flags(flag_values)
  flag_values([sys.argv[0]] + _DEFAULT_FLAGS + argv)
  resolved = assembly.resolve(run_experiment.experiment_config(flag_values))
  experiment = assembly.build(resolved)
  process, task = experiment.algorithm.process, experiment.task
  model = experiment.model_fn()
  trainable = len(model.trainable_variables)
  representation_tensors = len(next(layer for layer in model.layers  # The tower's, first in trainable order.
                                    if isinstance(layer, tf.keras.Model)).trainable_variables)
  state = process.initialize()
  print(f'server optimizer {resolved.training.server_optimizer}, rate {resolved.training.server_learning_rate:g}, '
        f'alignment weight {resolved.method_config.alignment_weight:g}; {trainable} trainable tensors')
  print('round  train_acc     ce  alignment  spread  separation  live  update  update_representation')
  for round_num in range(1, resolved.training.total_rounds + 1):
    datasets = experiment.round_datasets(round_num)
    before = [np.array(t) for t in learning_process.global_model_weights(state).trainable]
    output = process.next(state, datasets)
    state = output.state
    if round_num % every and round_num != 1:
      continue
    weights = learning_process.global_model_weights(state)
    after = [np.array(t) for t in weights.trainable]
    change = [a - b for a, b in zip(after, before)]
    norm = lambda tensors: float(np.sqrt(sum(np.sum(t * t) for t in tensors)))
    weights.assign_weights_to(model)
    terms = _terms(model, list(task_lib.model_batches(datasets[0], task.batch_fn)), resolved.method_config, task)
    work = output.metrics['client_work']
    accuracy = float(work['train_accuracy'])
    print(f'{round_num:5d}  {accuracy:9.3f}  {terms["ce"]:5.3f}  {terms["alignment"]:9.3f}  {terms["spread"]:6.3f}  '
          f'{terms["separation"]:10.3f}  {terms["live_features"]:.2f}/{terms["live_hidden"]:.2f}  '
          f'{norm(change):6.3f}  {norm(change[:representation_tensors]):21.3f}',
          flush=True)


if __name__ == '__main__':
  main()
