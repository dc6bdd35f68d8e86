"""Per-batch training objectives and metric sums on the multi-branch model's outputs.

A `BatchResult` carries the loss to minimize and the sums from which loss and accuracy are finalized after
aggregation. Labels `batch['y']` are [B] (classification) or [B, L] (next-word prediction); a task may add
per-label weights `batch['loss_mask']` and `batch['accuracy_mask']` (Stack Overflow: the loss ignores padding, the
accuracy also the special tokens). The loss of an example is the masked mean over its labels; the batch loss is the
mean over examples; accuracy is over the labels the accuracy mask counts (`num_predictions`).

`selected_branch` is the training objective of Eq. 4 for a client routed to branch k*:

  L_i(w) = CE(g_{k*}(w, x), y) + lambda * CE(g_{other}(w, x), s(eps, y)),   s(eps, y) = eps / C + (1 - eps) y.

Eq. 4 is written for K = 2. For K > 2 the regularizer is the mean of that cross-entropy over the K - 1 other
branches, so lambda keeps its meaning (the weight of the whole regularizer). With K = 1 there is no other branch
and the regularizer is 0.
"""

import dataclasses
from typing import NamedTuple, Optional

import tensorflow as tf

from models import multi_branch
from utils import settings


class BatchResult(NamedTuple):
  """loss: scalar to minimize; loss_sum (over examples), num_examples, num_correct, num_predictions: float32 sums
  for metrics; routing: optional counts [modes, branches] of examples by true mode and the branch they were routed
  to (evaluation)."""
  loss: tf.Tensor
  loss_sum: tf.Tensor
  num_correct: tf.Tensor
  num_examples: tf.Tensor
  num_predictions: tf.Tensor
  routing: Optional[tf.Tensor] = None


def label_masks(batch: dict) -> tuple[tf.Tensor, tf.Tensor]:
  """(loss mask, accuracy mask), float32 with the shape of batch['y']; ones when the task gives none."""
  loss_mask = batch.get('loss_mask')
  loss_mask = tf.ones_like(batch['y'], tf.float32) if loss_mask is None else tf.cast(loss_mask, tf.float32)
  accuracy_mask = batch.get('accuracy_mask')
  return loss_mask, loss_mask if accuracy_mask is None else tf.cast(accuracy_mask, tf.float32)


def per_example_mean(values: tf.Tensor, mask: tf.Tensor) -> tf.Tensor:
  """The masked mean of values [B, ...] over all axes but the first: [B] (values itself when rank 1)."""
  if values.shape.rank == 1:
    return values * mask
  axes = list(range(1, values.shape.rank))
  return tf.reduce_sum(values * mask, axis=axes) / tf.maximum(tf.reduce_sum(mask, axis=axes), 1.0)


def classification_result(logits: tf.Tensor, batch: dict) -> BatchResult:
  """Cross-entropy and accuracy of logits [B, ..., C] against integer labels batch['y'] [B, ...]."""
  labels = tf.cast(batch['y'], tf.int32)
  loss_mask, accuracy_mask = label_masks(batch)
  per_example = per_example_mean(
      tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits), loss_mask)
  correct = tf.cast(tf.equal(tf.argmax(logits, axis=-1, output_type=tf.int32), labels), tf.float32)
  return BatchResult(
      loss=tf.reduce_mean(per_example),
      loss_sum=tf.reduce_sum(per_example),
      num_correct=tf.reduce_sum(correct * accuracy_mask),
      num_examples=tf.cast(tf.shape(labels)[0], tf.float32),
      num_predictions=tf.reduce_sum(accuracy_mask))


def averaged_branches(outputs: dict, batch: dict) -> BatchResult:
  """Vanilla / No-Dist-Shift: the prediction is the mean of all branches' logits."""
  return classification_result(multi_branch.average_branch_logits(outputs[multi_branch.LOGITS]), batch)


@dataclasses.dataclass(frozen=True)
class LabelSmoothing:
  """The settings of Eq. 4 ("Diurnal or Nocturnal?", Zhu et al., 2022) for the methods that train the branch they
  route a client to (Min-Loss, FedTEM, FedTKM): their Configs derive from this, so the three share one flag each."""
  smoothing_weight: float = settings.setting(0.1, 'lambda of Eq. 4 (weight of the other branches) of min_loss, fedtem '
                                             'and fedtkm.', flag='label_smooth_w')
  smoothing_epsilon: float = settings.setting(0.5, 'epsilon of Eq. 4 (label smoothing) of min_loss, fedtem and fedtkm.',
                                              flag='label_smooth_eps')

  def validate(self) -> None:
    """Eq. 4's lambda (`--label_smooth_w`) and epsilon (`--label_smooth_eps`) in [0, 1]."""
    for name, value in (('label_smooth_w', self.smoothing_weight), ('label_smooth_eps', self.smoothing_epsilon)):
      if not 0.0 <= value <= 1.0:
        raise ValueError(f'--{name} must be in [0, 1]; got {value:g}.')


# Where each setting's default comes from (`algorithms.registry` checks one per setting; docs/running.md
# shows them).
SETTING_SOURCES = {
    'smoothing_weight': ('suite choice: Zhu et al. (2022), Section 4, grid-search lambda per dataset and state no '
                         'value'),
    'smoothing_epsilon': ('suite choice: Zhu et al. (2022), Section 4, grid-search epsilon per dataset and state no '
                          'value'),
}


def selected_branch(branch: tf.Tensor, smoothing_weight: float, smoothing_epsilon: float):
  """The Eq. 4 objective for a client routed to `branch` (int32 scalar); returns objective(outputs, batch).

  Metrics (accuracy, loss) are those of the selected branch alone.
  """

  def objective(outputs: dict, batch: dict) -> BatchResult:
    logits = outputs[multi_branch.LOGITS]  # [B, K, ..., C]
    num_branches, num_classes = tf.shape(logits)[1], tf.shape(logits)[-1]
    result = classification_result(tf.gather(logits, branch, axis=1), batch)
    labels = tf.one_hot(tf.cast(batch['y'], tf.int32), num_classes)
    smoothed = smoothing_epsilon / tf.cast(num_classes, tf.float32) + (1.0 - smoothing_epsilon) * labels
    per_branch = tf.nn.softmax_cross_entropy_with_logits(
        labels=tf.repeat(smoothed[:, tf.newaxis], num_branches, axis=1), logits=logits)  # [B, K, ...]
    loss_mask, _ = label_masks(batch)
    per_branch = tf.stack([per_example_mean(per_branch[:, k], loss_mask) for k in range(logits.shape[1])], axis=1)
    others = 1.0 - tf.one_hot(branch, num_branches)  # [K]
    regularizer = tf.reduce_sum(tf.reduce_mean(per_branch, axis=0) * others) / tf.maximum(
        tf.reduce_sum(others), 1.0)
    return result._replace(loss=result.loss + smoothing_weight * regularizer)

  return objective


def per_branch_losses(logits: tf.Tensor, batch: dict) -> tf.Tensor:
  """l_jk [B, K]: each branch's per-example loss (masked mean over positions for sequences)."""
  labels = tf.cast(batch['y'], tf.int32)
  loss_mask, _ = label_masks(batch)
  return tf.stack([per_example_mean(
      tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits[:, k]), loss_mask)
                   for k in range(logits.shape[1])], axis=1)
