"""Per-batch training objectives and metric sums on the multi-branch model's outputs.

A `BatchResult` carries the loss to minimize (a mean over the batch's prediction units) and the sums from which
loss and accuracy are finalized after aggregation: over examples for classification.
"""

from typing import NamedTuple

import tensorflow as tf

from models import multi_branch


class BatchResult(NamedTuple):
  """loss: scalar to minimize; loss_sum, num_correct, num_examples: float32 sums for metrics."""
  loss: tf.Tensor
  loss_sum: tf.Tensor
  num_correct: tf.Tensor
  num_examples: tf.Tensor


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
