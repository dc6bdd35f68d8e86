"""A network trained centrally on a task's pooled training data: the stand-in for a pretrained encoder.

pFedEM (Chen et al.) and FedGMM (Wu et al., 2023) compute their GMMs on the features of a frozen encoder pretrained on
ImageNet. No pretrained weights are reachable offline, so this module
trains the task's own network instead, centrally, on the examples of every training client of every domain pooled
(labels included; no test example), with Adam:

  for each of `epochs` passes over the pooled examples, shuffled (seeded), in batches of `batch_size`:
    w <- Adam(w, grad of the mean cross-entropy of the averaged branches' logits, `objectives.averaged_branches`).

Such an encoder has seen the very clients the federated run trains on, which the paper's ImageNet encoder has not
seen of CIFAR or EMNIST: its features are an upper bound on what a frozen encoder gives a GMM, not a private
federated procedure.
"""

import numpy as np
import tensorflow as tf

from algorithms.core import objectives
from tasks import task as task_lib
from utils import seeded_shuffle

_SHUFFLE_BUFFER = 10_000


def pooled_training_batches(task: task_lib.Task, batch_size: int, seed: int) -> tf.data.Dataset:
  """Every training example of every domain of `task` (`Task.pooled_training_examples`), shuffled (seeded), as
  model batches (x, y, mode)."""
  pooled = seeded_shuffle.shuffle(task.pooled_training_examples(seed), _SHUFFLE_BUFFER, (seed, seed),
                                  reshuffle_each_iteration=True)
  return task_lib.model_batches(pooled.batch(batch_size), task.batch_fn)


def pretrained_weights(task: task_lib.Task, model_fn, epochs: int, batch_size: int, learning_rate: float,
                       seed: int) -> list[np.ndarray]:
  """The weights (`model.get_weights()` order) of `model_fn()`, seeded by `seed`, after `epochs` Adam passes over
  `pooled_training_batches`."""
  tf.keras.utils.set_random_seed(seed)
  model = model_fn()
  optimizer = tf.keras.optimizers.Adam(learning_rate)
  batches = pooled_training_batches(task, batch_size, seed)

  @tf.function  # Autograph turns the Python loop over the dataset into a dataset loop.
  def train_epoch():
    for batch in batches:
      with tf.GradientTape() as tape:
        loss = objectives.averaged_branches(model(batch['x'], training=True), batch).loss
      optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))

  for _ in range(epochs):
    train_epoch()
  return model.get_weights()
