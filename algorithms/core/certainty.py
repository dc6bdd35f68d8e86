"""Test-time branch choice by prediction certainty, for methods without a clustering model (SCSGD, Min-Loss).

Section 4, "Baselines": "we select the models according to the certainty of their predictions, measured by
evaluating the KLD between the prediction and a uniform distribution over all labels":

  KL(p_k || u) = sum_c p_k(c) log(p_k(c) C) = log C - H(p_k),   p_k = softmax(g_k(w, x)),

averaged over a sequence's non-padding positions for next-word prediction. The branch of a test minibatch is the
one with the largest mean KL over the batch (default), or each example's own (`routing='sample'`).
"""

import tensorflow as tf

from algorithms.core import evaluation
from algorithms.core import objectives
from algorithms.core import routing
from models import multi_branch

ROUTINGS = ('batch', 'sample')


def kl_to_uniform(logits: tf.Tensor, mask: tf.Tensor) -> tf.Tensor:
  """KL(softmax(logits) || uniform) per example [B] for logits [B, ..., C], masked mean over positions."""
  log_p = tf.nn.log_softmax(logits)
  num_classes = tf.cast(tf.shape(logits)[-1], tf.float32)
  kl = tf.reduce_sum(tf.exp(log_p) * log_p, axis=-1) + tf.math.log(num_classes)
  return objectives.per_example_mean(kl, mask)


def branch_certainty(outputs: dict, batch: dict) -> tf.Tensor:
  """KL to uniform of every branch's prediction, [B, K]."""
  logits = outputs[multi_branch.LOGITS]
  loss_mask, _ = objectives.label_masks(batch)
  return tf.stack([kl_to_uniform(logits[:, k], loss_mask) for k in range(logits.shape[1])], axis=1)


def evaluation_objective(num_modes: int, num_branches: int, routing_rule: str):
  """objective(outputs, batch): the most certain branch per test batch (or per example)."""

  def objective(outputs, batch):
    certainty = branch_certainty(outputs, batch)
    if routing_rule == 'batch':
      branches = routing.batch_branches(batch, tf.argmax(tf.reduce_mean(certainty, axis=0)))
    else:
      branches = tf.argmax(certainty, axis=-1, output_type=tf.int32)
    return routing.routed_result(outputs, batch, branches, num_modes, num_branches)

  return objective


def routed_evaluation(evaluator: evaluation.Evaluator, num_modes: int, num_branches: int,
                      routing_rule: str):
  """The test evaluation of a method that routes by certainty (SCSGD, Min-Loss): routing accuracy under the best
  matching of modes to branches (they have no temporal prior to name the modes)."""
  return evaluation.routed_evaluation(evaluator, evaluation_objective(num_modes, num_branches, routing_rule),
                                      lambda state: (), [num_modes, num_branches], best_matching=True)
