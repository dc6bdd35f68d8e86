"""What the clustering methods (FedTEM, FedTKM, ...) share around branch selection.

- `client_examples`: a client's batches read once, as one batch for the inference passes of the clustering model
  and as the same batches for training.
- `routed_result`: the metrics of a test batch whose examples were routed to given branches;
- `client_confusion` / `routing_accuracy` / `adjusted_rand_index`: simulation-only metrics, counts [modes, branches]
  of clients (or test examples) by true mode and chosen branch, the share routed to their mode's branch, and the
  chance-corrected agreement of the two partitions (0 for routing independent of the mode, 1 for a perfect one).
"""

import collections
from typing import NamedTuple, Optional

import numpy as np
import tensorflow as tf

from algorithms.core import client_training
from algorithms.core import metric_names
from algorithms.core import objectives
from models import multi_branch


class ClientExamples(NamedTuple):
  """examples: {key: [N, ...]}; batches: the client's batches sliced from them; batch_size: int64 scalar."""
  examples: dict
  batches: tf.data.Dataset
  batch_size: tf.Tensor


def client_examples(batches: tf.data.Dataset) -> ClientExamples:
  """A client's batches read once: all its examples as one batch {'x': [N, ...], ..., 'mode': [N]} (N >= 1) for
  the inference passes, and the same batches, in the same order, sliced from it for training.

  The inference passes run on the whole client at once: a `dataset.reduce` costs a function instantiation per call,
  which on small models costs more than the pass itself (measured: three reduces per client made FedTEM's client
  function 3.3x slower than Vanilla's in plain TF). Client datasets are small (hundreds of examples). Reading the
  input pipeline once (`ragged_batch`, whose row lengths are the batch sizes) instead of twice saves its cost.
  """
  ragged = client_training.single_element(batches.ragged_batch(np.iinfo(np.int32).max))
  examples = {key: value.values for key, value in ragged.items()}
  batch_size = tf.cast(ragged['mode'].row_lengths()[0], tf.int64)
  return ClientExamples(examples, tf.data.Dataset.from_tensor_slices(examples).batch(batch_size), batch_size)


def client_mode(examples: dict) -> tf.Tensor:
  """A client's true mode (int32 scalar): the domain most of its examples' `mode` have, the lowest on a tie (a
  client of one domain has that domain; mixture scenarios give clients several). Simulation metrics only."""
  return tf.argmax(tf.math.bincount(tf.cast(examples['mode'], tf.int32)), output_type=tf.int32)


def client_confusion(mode: tf.Tensor, branch: tf.Tensor, num_modes: int, num_branches: int) -> tf.Tensor:
  """One client's routing count [modes, branches]: 1 at (true mode, chosen branch)."""
  return tf.one_hot(mode, num_modes)[:, tf.newaxis] * tf.one_hot(branch, num_branches)[tf.newaxis]


def training_sums(training: client_training.TrainingOutput, mode: tf.Tensor, branch: tf.Tensor, num_modes: int,
                  num_branches: int, **extra) -> collections.OrderedDict:
  """A routing client's metric sums: its training metrics, its `routing` count [modes, branches] and any `extra`
  sums, all zero when the client was left out of the round (`training.finite` is False)."""
  routed = dict(routing=client_confusion(mode, branch, num_modes, num_branches), **extra)
  return collections.OrderedDict(training.metrics, **client_training.exclude_unless(training.finite, routed))


def routed_result(outputs: dict, batch: dict, branches: tf.Tensor, num_modes: int, num_branches: int,
                  routes: Optional[tf.Tensor] = None) -> objectives.BatchResult:
  """Metrics of the logits of branch `branches` [B] of each example, with routing counts [modes, branches] of
  `routes` [B] (the branches unless given: a method whose clusters map to branches by a permutation counts
  clusters)."""
  logits = tf.gather(outputs[multi_branch.LOGITS], branches, axis=1, batch_dims=1)
  routes = branches if routes is None else routes
  confusion = tf.matmul(tf.one_hot(batch['mode'], num_modes), tf.one_hot(routes, num_branches), transpose_a=True)
  return objectives.classification_result(logits, batch)._replace(routing=confusion)


def assigned_share(domain_slots: tf.Tensor, batch: dict, fallback: tf.Tensor) -> tf.Tensor:
  """share [K] of a test batch of one domain over a pool's networks: the domain's row of domain_slots [modes, K]
  (how many of the domain's clients trained each network recently, simulation only), normalized; `fallback` [K]
  when no client of the domain was seen."""
  counts = tf.gather(domain_slots, batch['mode'][0])
  total = tf.reduce_sum(counts)
  return tf.where(total > 0, counts / tf.maximum(total, 1e-12), fallback)


def shared_result(outputs: dict, batch: dict, share: tf.Tensor, num_modes: int) -> objectives.BatchResult:
  """Metrics of the batch under each network k of logits [B, K, C], weighted by share [K] (summing to 1), with
  routing counts [modes, K] that spread each example by the share."""
  num_networks = int(outputs[multi_branch.LOGITS].shape[1])
  results = [objectives.classification_result(outputs[multi_branch.LOGITS][:, k], batch) for k in range(num_networks)]
  mixed = lambda field: tf.add_n([share[k] * getattr(results[k], field) for k in range(num_networks)])
  confusion = tf.matmul(tf.one_hot(batch['mode'], num_modes), tf.tile(share[tf.newaxis], [tf.shape(batch['y'])[0], 1]),
                        transpose_a=True)
  return objectives.BatchResult(mixed('loss'), mixed('loss_sum'), mixed('num_correct'), results[0].num_examples,
                                results[0].num_predictions, confusion)


def batch_branches(batch: dict, branch: tf.Tensor) -> tf.Tensor:
  """`branch` for every example of `batch`: [B] int32."""
  return tf.fill(tf.shape(batch['y'])[:1], tf.cast(branch, tf.int32))


def train_metrics(sums: dict) -> collections.OrderedDict:
  """Train loss/accuracy plus the routing metrics (`train_routing_metrics`, best matching) from summed metrics
  with `routing`."""
  return collections.OrderedDict(client_training.finalize_train_metrics(sums),
                                 **train_routing_metrics(sums['routing'], best_matching=True))


def train_routing_metrics(confusion: tf.Tensor, best_matching: bool) -> collections.OrderedDict:
  """A round's routing metrics from its clients' counts [modes, branches]: `train_routing_accuracy` (under this
  round's best matching when `best_matching`), `train_routing_ari`, and every count as
  `train_routing_count_<mode>_<branch>`, from which `experiment.core.routing_summary` scores the whole run under one
  matching (a per-round matching lets branches that swap meaning between rounds score high)."""
  counts = {f'{metric_names.ROUTING_COUNT_PREFIX}{m}_{b}': confusion[m, b]
            for m in range(int(confusion.shape[0])) for b in range(int(confusion.shape[1]))}
  return collections.OrderedDict(train_routing_accuracy=routing_accuracy(confusion, best_matching=best_matching),
                                 train_routing_ari=adjusted_rand_index(confusion), **counts)


def routing_accuracy(confusion: tf.Tensor, best_matching: bool) -> tf.Tensor:
  """Share routed to their mode's branch, from counts [modes, branches] (mode k's branch is branch k).

  With `best_matching`, under the best one-to-one assignment of modes to branches (for clustering without a
  prior, whose labels are arbitrary; with more branches than modes some branches get no mode, with more modes
  than branches some modes get no branch).
  """
  total = tf.maximum(tf.reduce_sum(confusion), 1.0)
  num_modes = int(confusion.shape[0])
  if not best_matching:
    return tf.linalg.trace(confusion[:, :num_modes]) / total
  return _max_matching_weight(tf.cast(confusion, tf.float32)) / total


def _max_matching_weight(weights: tf.Tensor) -> tf.Tensor:
  """The largest total weight of a one-to-one matching of the rows and columns of weights [n, m] >= 0 (each row
  and column used at most once), by dynamic programming over the subsets of the smaller side: best[S] is the best
  weight of the rows seen so far matched to exactly the columns S. O(n m 2^min(n, m)), where enumerating the
  matchings costs n! / (n - m)! (8 modes on 5 experts: 6,720; 40 modes: 2.2 million)."""
  if weights.shape[0] < weights.shape[1]:
    weights = tf.transpose(weights)
  rows, columns = int(weights.shape[0]), int(weights.shape[1])
  subsets = np.arange(2**columns)
  best = tf.constant(np.where(subsets == 0, 0.0, -np.inf), tf.float32)
  for i in range(rows):
    options = [best]
    for j in range(columns):
      uses_j = (subsets >> j) & 1 == 1
      options.append(tf.where(uses_j, tf.gather(best, subsets ^ (1 << j)) + weights[i, j], -np.inf))
    best = tf.reduce_max(tf.stack(options), axis=0)
  return tf.reduce_max(best)


def _pairs(counts: tf.Tensor) -> tf.Tensor:
  """sum of C(n, 2) over `counts`."""
  return tf.reduce_sum(counts * (counts - 1.0)) / 2.0


def adjusted_rand_index(confusion: tf.Tensor) -> tf.Tensor:
  """Adjusted Rand index (Hubert and Arabie, 1985) of true modes vs chosen branches from the contingency table
  `confusion` [modes, branches]:

    ARI = (sum_ij C(n_ij, 2) - E) / ((sum_i C(a_i, 2) + sum_j C(b_j, 2)) / 2 - E),
    E = sum_i C(a_i, 2) sum_j C(b_j, 2) / C(n, 2),

  a, b the row and column sums. Invariant to relabelling branches, so no matching is needed; 0 in expectation for
  routing independent of the mode (everything on one branch scores 0). 1 when the denominator vanishes (both
  partitions trivial), as scikit-learn defines it.
  """
  confusion = tf.cast(confusion, tf.float64)
  index = _pairs(confusion)
  rows, columns = _pairs(tf.reduce_sum(confusion, axis=1)), _pairs(tf.reduce_sum(confusion, axis=0))
  expected = tf.math.divide_no_nan(rows * columns, _pairs(tf.reduce_sum(confusion)))
  denominator = (rows + columns) / 2.0 - expected
  ari = tf.where(tf.equal(denominator, 0.0), tf.constant(1.0, tf.float64),
                 tf.math.divide_no_nan(index - expected, denominator))
  return tf.cast(ari, tf.float32)
