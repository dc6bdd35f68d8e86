"""Per-batch training objectives and metric sums on the multi-branch model's outputs.

A `BatchResult` carries the loss to minimize (a mean over the batch's prediction units) and the sums from which
loss and accuracy are finalized after aggregation: over examples for classification.

`selected_branch` is the training objective of Eq. 4 for a client routed to branch k*:

  L_i(w) = CE(g_{k*}(w, x), y) + lambda * CE(g_{other}(w, x), s(eps, y)),   s(eps, y) = eps / C + (1 - eps) y.

Eq. 4 is written for K = 2. For K > 2 the regularizer is the mean of that cross-entropy over the K - 1 other
branches, so lambda keeps its meaning (the weight of the whole regularizer). With K = 1 there is no other branch
and the regularizer is 0.
"""

from typing import NamedTuple, Optional

import tensorflow as tf

from models import multi_branch


class BatchResult(NamedTuple):
  """loss: scalar to minimize; loss_sum, num_correct, num_examples: float32 sums for metrics; routing: optional
  counts [modes, branches] of examples by true mode and the branch they were routed to (evaluation)."""
  loss: tf.Tensor
  loss_sum: tf.Tensor
  num_correct: tf.Tensor
  num_examples: tf.Tensor
  routing: Optional[tf.Tensor] = None


def classification_result(logits: tf.Tensor, labels: tf.Tensor) -> BatchResult:
  """Cross-entropy and accuracy of logits [B, C] against integer labels [B]."""
  labels = tf.cast(labels, tf.int32)
  per_example = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
  correct = tf.equal(tf.argmax(logits, axis=-1, output_type=tf.int32), labels)
  return BatchResult(
      loss=tf.reduce_mean(per_example),
      loss_sum=tf.reduce_sum(per_example),
      num_correct=tf.reduce_sum(tf.cast(correct, tf.float32)),
      num_examples=tf.cast(tf.size(labels), tf.float32))


def averaged_branches(outputs: dict, batch: dict) -> BatchResult:
  """Vanilla / No-Dist-Shift: the prediction is the mean of all branches' logits."""
  return classification_result(multi_branch.average_branch_logits(outputs[multi_branch.LOGITS]), batch['y'])


def selected_branch(branch: tf.Tensor, smoothing_weight: float, smoothing_epsilon: float):
  """The Eq. 4 objective for a client routed to `branch` (int32 scalar); returns objective(outputs, batch).

  Metrics (accuracy, loss) are those of the selected branch alone.
  """

  def objective(outputs: dict, batch: dict) -> BatchResult:
    logits = outputs[multi_branch.LOGITS]  # [B, K, C]
    num_branches, num_classes = tf.shape(logits)[1], tf.shape(logits)[-1]
    result = classification_result(tf.gather(logits, branch, axis=1), batch['y'])
    labels = tf.one_hot(tf.cast(batch['y'], tf.int32), num_classes)
    smoothed = smoothing_epsilon / tf.cast(num_classes, tf.float32) + (1.0 - smoothing_epsilon) * labels
    per_branch = tf.nn.softmax_cross_entropy_with_logits(
        labels=tf.repeat(smoothed[:, tf.newaxis], num_branches, axis=1), logits=logits)  # [B, K]
    others = 1.0 - tf.one_hot(branch, num_branches)  # [K]
    regularizer = tf.reduce_sum(tf.reduce_mean(per_branch, axis=0) * others) / tf.maximum(
        tf.reduce_sum(others), 1.0)
    return result._replace(loss=result.loss + smoothing_weight * regularizer)

  return objective
