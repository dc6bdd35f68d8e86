"""How strongly FedEvolve's prototypical loss pulls on a fresh network, against FedAvg's cross-entropy (Tan et al.,
"Federated Learning Under Evolving Distribution Shifts", 2024).

FedEvolve's logits are -d(phi(x), c_y) (Eq. 5 [R], `algorithms.methods.fedevolve`). Whether d is the Euclidean
distance (the paper's word read literally, `--fedevolve_distance=euclidean`) or its square (Prototypical Networks, the
default)
decides the logits' scale: at initialization the emnist task's CNN maps every digit to features of norm ~11 whose
class means lie ~0.4 apart, so Euclidean distances to the ten prototypes differ by a few hundredths, the softmax is
nearly uniform and the loss's gradient is small; squaring multiplies those differences by about 2 d.

For each seed: one pair batch of real digits in the EMNIST layout (`benchmarks.task_files.emnist_layout_digits`; 5
digits of each class as stage-0 support and 5 others as stage-1 queries), the FedEvolve objective's loss, the mean
standard deviation of its logits across classes and the norm of its gradient over both towers, for both distances;
and FedAvg's cross-entropy, logit spread and gradient on the same digits through the task's tower and head
(`models.representation.conv_representation`).

    bazel run //benchmarks:prototype_loss_scale
"""

import os

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

from absl import app
import numpy as np
import tensorflow as tf

from algorithms.core import prototypes
from algorithms.methods import fedevolve
from benchmarks import task_files
from models import multi_branch
from models import representation

NUM_CLASSES, PER_CLASS = 10, 5
SEEDS = (0, 1, 2)


def _pair_batch() -> dict:
  """x [100, 28, 28, 1], y [100], stage [100]: PER_CLASS digits of every class in stage 0, PER_CLASS others in 1."""
  pixels, labels = task_files.emnist_layout_digits()
  rng = np.random.default_rng(0)
  chosen = [rng.choice(np.flatnonzero(labels == c), 2 * PER_CLASS, replace=False) for c in range(NUM_CLASSES)]
  support = np.concatenate([ids[:PER_CLASS] for ids in chosen])
  queries = np.concatenate([ids[PER_CLASS:] for ids in chosen])
  ids = np.concatenate([support, queries])
  return dict(x=pixels[ids, ..., np.newaxis], y=labels[ids].astype(np.int32),
              stage=np.repeat(np.array([0, 1], np.int32), len(support)))


def _gradient_norm(gradients) -> float:
  return float(tf.linalg.global_norm(gradients))


def _logit_spread(logits) -> float:
  return float(tf.reduce_mean(tf.math.reduce_std(logits, axis=-1)))


def main(argv):
  del argv  # Unused.
  batch = _pair_batch()
  network = representation.conv_representation((28, 28, 1), NUM_CLASSES)
  queries = batch['stage'] == 1
  print('seed  objective              loss    logit std across classes  gradient norm')
  for seed in SEEDS:
    tf.keras.utils.set_random_seed(seed)
    towers = representation.two_tower_model(network)
    for distance in prototypes.DISTANCES:
      objective = fedevolve.training_objective(2, NUM_CLASSES, distance)
      with tf.GradientTape() as tape:
        outputs = fedevolve.pair_outputs(towers, batch)
        loss = objective(outputs, batch).loss
      gradients = tape.gradient(loss, towers.trainable_variables)
      means, counts = prototypes.stage_class_means(outputs[representation.PSI], batch['y'], batch['stage'], 2,
                                                   NUM_CLASSES)
      logits = -prototypes.distances(tf.boolean_mask(outputs[representation.PHI], queries), means[0], distance)
      print(f'{seed:4d}  FedEvolve, {distance:9s}  {float(loss):.4f}  {_logit_spread(logits):24.4f}  '
            f'{_gradient_norm(gradients):13.4f}')
    tower_head = representation.tower_head_model(network)
    with tf.GradientTape() as tape:
      logits = tower_head(batch['x'])[multi_branch.LOGITS][:, 0]
      loss = tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(batch['y'], logits, from_logits=True))
    gradients = tape.gradient(loss, tower_head.trainable_variables)
    print(f'{seed:4d}  FedAvg, cross-entropy {float(loss):.4f}  {_logit_spread(logits):24.4f}  '
          f'{_gradient_norm(gradients):13.4f}')


if __name__ == '__main__':
  app.run(main)
