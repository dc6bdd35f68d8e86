"""Class prototypes of time stages and the prototypical loss, the building blocks of FedEvolve and FedEvp.

Tan et al., "Federated Learning Under Evolving Distribution Shifts" (2024; FedEvolve, FedEvp; the formulas of the
text available to us are lost and reconstructed from its prose, marked [R])
compares a representation with class prototypes: the mean representation of a class in one domain (time stage).
Everything here works on one batch holding examples of several stages (`batch['stage']` [B], the time stage a
client knows of its data, `periodic_shift.domains.Domain.stage`), so prototypes are computed inside the autodiff
graph and gradients reach the network that made them (FedEvolve's psi is trained only through them).

- `stage_class_means`: c_{s,y} = mean of e(x) over the batch's examples of stage s and class y (Eq. 4 [R]) [S, C, d],
  with the counts [S, C] (a class absent from a stage has no prototype there).
- `distances`: d(a, c) = ||a - c||_2, the paper's "Euclidean distance", or ||a - c||^2 (Prototypical Networks).
- `prototype_nll`: the prototypical NLL of Eq. 5 [R],
    L^m = -(1 / |Q^{m+1}|) sum_{(x, y) in Q^{m+1}} log softmax_{y' in Y^m}(-d(q(x), c^m_{y'}))_y,
  for each example of stage s >= 1 against the prototypes of stage s - 1 over the classes present there; Q^{m+1}
  is the examples of stage m + 1 whose class has a prototype (an example of a class absent from the previous stage
  cannot be scored). The loss is sum_m L^m, the client objective of Eq. 5 summed over the consecutive stages in
  the batch, or with `stage_reduction` 'mean' its mean over the stages scored (`--fedevolve_stage_reduction` for
  mixed batches; FedEvp divides the sum by the stages in its batch itself, `algorithms.methods.fedevp`).
- `evolving_prototypes`: FedEvp's prototypes accumulated over stages (Eq. 6 [R]), c^s = running mean of the class
  means of stages 0..s (the 1/m weights of "averaging over all previous domains") or an exponential moving average
  from zero, c^s = (1 - beta) c^{s-1} + beta mean_s.
"""

from typing import Optional

import tensorflow as tf

from algorithms.core import objectives

DISTANCES = ('euclidean', 'squared')
STAGE_REDUCTIONS = ('sum', 'mean')
AVERAGES = ('running_mean', 'moving_average')
_NO_PROTOTYPE = -1e9  # The logit of a class without a prototype: never predicted, no probability mass.


def distances(embeddings: tf.Tensor, prototypes: tf.Tensor, distance: str) -> tf.Tensor:
  """d(e_i, c_j) [N, P] for embeddings [N, d] and prototypes [P, d]; `distance` 'euclidean' or 'squared'."""
  return _from_squared(tf.reduce_sum(tf.square(embeddings), axis=1, keepdims=True)
                       - 2.0 * tf.matmul(embeddings, prototypes, transpose_b=True)
                       + tf.reduce_sum(tf.square(prototypes), axis=1)[tf.newaxis], distance)


def _from_squared(squared: tf.Tensor, distance: str) -> tf.Tensor:
  squared = tf.maximum(squared, 0.0)
  return squared if distance == 'squared' else tf.sqrt(tf.maximum(squared, 1e-12))


def stage_class_means(embeddings: tf.Tensor, labels: tf.Tensor, stages: tf.Tensor, num_stages: int,
                      num_classes: int) -> tuple[tf.Tensor, tf.Tensor]:
  """(means [S, C, d], counts [S, C]) of embeddings [B, d] by (stage, label); a mean with count 0 is 0."""
  segments = tf.cast(stages, tf.int32) * num_classes + tf.cast(labels, tf.int32)
  size = num_stages * num_classes
  sums = tf.math.unsorted_segment_sum(embeddings, segments, size)
  counts = tf.math.unsorted_segment_sum(tf.ones_like(segments, tf.float32), segments, size)
  means = sums / tf.maximum(counts, 1.0)[:, tf.newaxis]
  return (tf.reshape(means, [num_stages, num_classes, -1]), tf.reshape(counts, [num_stages, num_classes]))


def evolving_prototypes(means: tf.Tensor, counts: tf.Tensor, average: str, momentum: float = 0.5,
                        include_first_stage: bool = True) -> tuple[tf.Tensor, tf.Tensor]:
  """FedEvp's prototypes after each stage (Eq. 6 [R]): (c [S, C, d], has_prototype [S, C]).

  running_mean:    c^s_y = mean of mean_{j,y} over the stages j <= s where class y is present (with every class in
                   every stage: c^s = ((s) / (s + 1)) c^{s-1} + (1 / (s + 1)) mean_s from c^{-1} = 0, Eq. 6);
  moving_average:  c^s_y = (1 - momentum) c^{s-1}_y + momentum mean_{s,y} where y is present, else c^{s-1}_y,
                   from c^{-1} = 0.
  `include_first_stage` False is Algorithm 2's skeleton read literally (the update sits under `if m >= 2`): stage
  0's class means never enter, as if they were 0, yet the 1/m weights still count the stage.
  """
  present = tf.cast(counts > 0, means.dtype)
  if not include_first_stage:
    means = tf.concat([tf.zeros_like(means[:1]), means[1:]], axis=0)
    present = tf.concat([tf.ones_like(present[:1]), present[1:]], axis=0)
  if average == 'running_mean':
    totals = tf.cumsum(means * present[..., tf.newaxis], axis=0)
    seen = tf.cumsum(present, axis=0)
    return totals / tf.maximum(seen, 1.0)[..., tf.newaxis], seen > 0
  prototypes, result = tf.zeros_like(means[0]), []
  for stage in range(means.shape[0]):
    mask = present[stage][:, tf.newaxis]
    prototypes = mask * ((1.0 - momentum) * prototypes + momentum * means[stage]) + (1.0 - mask) * prototypes
    result.append(prototypes)
  return tf.stack(result), tf.cumsum(present, axis=0) > 0


def prototype_logits(queries: tf.Tensor, prototypes: tf.Tensor, has_prototype: tf.Tensor,
                     distance: str) -> tf.Tensor:
  """-d(q_i, c_{i,y}) [B, C] for queries [B, d] against per-example prototypes [B, C, d] (or shared [C, d]) with
  `has_prototype` [B, C] (or [C]); classes without a prototype get a logit of -1e9."""
  queries, prototypes = tf.convert_to_tensor(queries), tf.convert_to_tensor(prototypes)
  if prototypes.shape.rank == 2:
    logits = -distances(queries, prototypes, distance)
  else:
    logits = -_from_squared(tf.reduce_sum(tf.square(queries), axis=1, keepdims=True)
                            - 2.0 * tf.einsum('bd,bcd->bc', queries, prototypes)
                            + tf.reduce_sum(tf.square(prototypes), axis=2), distance)
  has_prototype = tf.broadcast_to(tf.cast(has_prototype, tf.bool), tf.shape(logits))
  return tf.where(has_prototype, logits, _NO_PROTOTYPE)


def prototype_nll(queries: tf.Tensor, labels: tf.Tensor, stages: tf.Tensor, prototypes: tf.Tensor,
                  has_prototype: tf.Tensor, distance: str, stage_reduction: str = 'sum') -> objectives.BatchResult:
  """Eq. 5 [R] over consecutive stages: each example of stage s >= 1 (queries [B, d], labels [B], stages [B])
  against the prototypes of stage s - 1 (prototypes [S, C, d], has_prototype [S, C]).

  loss = sum_s (or, `stage_reduction` 'mean', the mean over the stages with scored examples of) the mean over the
  scored examples of stage s of their NLL; the metric sums count the scored examples
  (loss_sum, num_correct by nearest prototype, num_examples = num_predictions = their number).
  """
  labels = tf.cast(labels, tf.int32)
  stages = tf.cast(stages, tf.int32)
  num_stages, num_classes = prototypes.shape[0], prototypes.shape[1]
  previous = tf.maximum(stages - 1, 0)
  all_logits = -tf.reshape(distances(queries, tf.reshape(prototypes, [num_stages * num_classes, -1]), distance),
                           [-1, num_stages, num_classes])
  logits = tf.gather(all_logits, previous, batch_dims=1)
  available = tf.gather(has_prototype, previous)
  logits = tf.where(available, logits, _NO_PROTOTYPE)
  scored = tf.logical_and(stages >= 1, tf.gather(available, labels, batch_dims=1))
  weights = tf.cast(scored, tf.float32)
  nll = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits) * weights
  per_stage = tf.math.unsorted_segment_sum(weights, stages, num_stages)
  correct = tf.cast(tf.equal(tf.argmax(logits, axis=-1, output_type=tf.int32), labels), tf.float32) * weights
  loss = tf.reduce_sum(nll / tf.maximum(tf.gather(per_stage, stages), 1.0))
  if stage_reduction == 'mean':
    loss /= tf.maximum(tf.reduce_sum(tf.cast(per_stage > 0, tf.float32)), 1.0)
  return objectives.BatchResult(
      loss=loss,
      loss_sum=tf.reduce_sum(nll), num_correct=tf.reduce_sum(correct), num_examples=tf.reduce_sum(weights),
      num_predictions=tf.reduce_sum(weights))


def nearest_prototype_result(queries: tf.Tensor, labels: tf.Tensor, prototypes: tf.Tensor,
                             has_prototype: tf.Tensor, distance: str,
                             clients: Optional[tf.Tensor] = None) -> objectives.BatchResult:
  """Prediction by the nearest prototype (FedEvolve on the target domain): the loss and accuracy of
  softmax(-d(q, c_y)) for queries [B, d] against prototypes [C, d] with has_prototype [C], or, with `clients` [B],
  against each example's client's prototypes [clients, C, d] / [clients, C]."""
  if clients is not None:
    prototypes, has_prototype = tf.gather(prototypes, clients), tf.gather(has_prototype, clients)
  logits = prototype_logits(queries, prototypes, has_prototype, distance)
  return objectives.classification_result(logits, {'y': labels})
