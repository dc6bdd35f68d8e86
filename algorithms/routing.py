"""What the clustering methods (FedTEM, FedTKM, ...) share around branch selection.

- `client_examples`: a client's batches read once, as one batch for the inference passes of the clustering model
  and as the same batches for training.
- `client_confusion` / `routing_accuracy`: simulation-only metrics, counts [modes, branches] of clients (or test
  examples) by true mode and chosen branch, and the share routed to their mode's branch.
"""

import itertools

import numpy as np
import tensorflow as tf


def client_examples(batches: tf.data.Dataset) -> tuple[dict, tf.data.Dataset]:
  """A client's batches read once: all its examples as one batch {'x': [N, ...], ..., 'mode': [N]} (N >= 1) for
  the inference passes, and the same batches, in the same order, sliced from it for training.

  The inference passes run on the whole client at once: a `dataset.reduce` costs a function instantiation per call,
  which on small models costs more than the pass itself (measured: three reduces per client made FedTEM's client
  function 3.3x slower than Vanilla's in plain TF). Client datasets are small (hundreds of examples). Reading the
  input pipeline once (`ragged_batch`, whose row lengths are the batch sizes) instead of twice saves its cost.
  """
  ragged = batches.ragged_batch(np.iinfo(np.int32).max).get_single_element()
  examples = {key: value.values for key, value in ragged.items()}
  batch_size = tf.cast(ragged['mode'].row_lengths()[0], tf.int64)
  return examples, tf.data.Dataset.from_tensor_slices(examples).batch(batch_size)


def client_confusion(mode: tf.Tensor, branch: tf.Tensor, num_modes: int, num_branches: int) -> tf.Tensor:
  """One client's routing count [modes, branches]: 1 at (true mode, chosen branch)."""
  return tf.one_hot(mode, num_modes)[:, tf.newaxis] * tf.one_hot(branch, num_branches)[tf.newaxis]


def routing_accuracy(confusion: tf.Tensor, best_matching: bool) -> tf.Tensor:
  """Share routed to their mode's branch, from counts [modes, branches] (mode k's branch is branch k).

  With `best_matching`, under the best one-to-one assignment of modes to branches (for clustering without a
  prior, whose labels are arbitrary; with more branches than modes, some branches get no mode).
  """
  total = tf.maximum(tf.reduce_sum(confusion), 1.0)
  num_modes, num_branches = int(confusion.shape[0]), int(confusion.shape[1])
  if not best_matching:
    return tf.linalg.trace(confusion[:, :num_modes]) / total
  matchings = np.stack([np.eye(num_branches, dtype=np.float32)[list(p)]
                        for p in itertools.permutations(range(num_branches), num_modes)])  # [P, modes, branches]
  return tf.reduce_max(tf.reduce_sum(confusion[tf.newaxis] * matchings, axis=[1, 2])) / total
