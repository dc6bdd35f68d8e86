"""A client's batches regrouped by time stage, so that every class prototype of a stage has support.

Tan et al., "Federated Learning Under Evolving Distribution Shifts" (FedEvolve, FedEvp; 2024) compare a domain's
representations with class prototypes of earlier domains: the class means of a batch of one time stage (the
domain's index, `batch['stage']`). A client's training batches mix its stages in one shuffled stream, so a batch of
B examples holds about B / (S C) examples of a class and stage (S stages, C classes): about two for B = 128 on the
synthetic task's 12 domains, and a prototype of two examples is noise. Both functions here take the client's model
batches (`tasks.task.model_batches`: dicts with `stage` [B]) and return batches made per stage, each stage's
examples in the order the client's stream gave them (its seeded shuffle), `stage_batch_size` b of a stage at a time:

- `stage_pairs` (FedEvolve, Algorithm 1): one batch per consecutive pair (m, m + 1) and step: the next b examples of
  stage m (the support, prototypes of Eq. 4) and of stage m + 1 (the queries of Eq. 5), the pairs m = 0..S-2 in turn
  (Algorithm 1's loop over m inside each local iteration). Every example of stages 1..S-1 is a query exactly once per
  pass; stage m's support cycles through its full batches of b (a stage with fewer examples than the next one is
  reused; its last partial batch is not a support; a stage with fewer than b examples is one support of all).
  Each example enters two pairs (as support and as query), so a pass computes about twice the forward and backward
  work of one pass over the data.
- `stage_strata` (FedEvp's option, one sweep of Algorithm 2's loop over m per step): each batch holds the next b
  examples of every stage; a stage that has run out contributes nothing. Every example appears exactly once per
  pass, in S b / B times fewer steps than batches of B.

A pass is one pass over the client's stream (`--client_epochs` passes are one stream).
"""

import functools

import tensorflow as tf


def _stage(examples: tf.data.Dataset, stage: int) -> tf.data.Dataset:
  return examples.filter(lambda example: tf.equal(tf.cast(example['stage'], tf.int32), stage))


def _concatenated(*batches):
  return tf.nest.map_structure(lambda *parts: tf.concat(parts, axis=0), *batches)


def _empty_batches(batched: tf.data.Dataset) -> tf.data.Dataset:
  """An endless dataset of batches with no example, of `batched`'s structure."""
  empty = tf.nest.map_structure(lambda spec: tf.zeros([0] + spec.shape[1:].as_list(), spec.dtype),
                                batched.element_spec)
  return tf.data.Dataset.from_tensors(empty).repeat()


def _full_batches(batched: tf.data.Dataset, batch_size: int) -> tf.data.Dataset:
  """The batches of `batched` that hold `batch_size` examples, or its first batch when that one does not (a stage
  with fewer examples: all of them)."""
  full = lambda index, batch: tf.logical_or(tf.equal(index, 0), tf.equal(
      tf.shape(tf.nest.flatten(batch)[0])[0], batch_size))
  return batched.enumerate().filter(full).map(lambda index, batch: batch)


def stage_pairs(batches: tf.data.Dataset, num_stages: int, stage_batch_size: int) -> tf.data.Dataset:
  """Batches of (b examples of stage m, the next b examples of stage m + 1), m = 0..S-2 in turn (module docstring);
  ends when every stage 1..S-1 has been a query once. Requires S >= 2."""
  examples = batches.unbatch()
  stages = [_stage(examples, stage).batch(stage_batch_size) for stage in range(num_stages)]
  pairs = [tf.data.Dataset.zip((_full_batches(stages[m], stage_batch_size).repeat(), stages[m + 1]))
           .map(_concatenated) for m in range(num_stages - 1)]
  order = tf.data.Dataset.range(num_stages - 1).repeat()
  return tf.data.Dataset.choose_from_datasets(pairs, order, stop_on_empty_dataset=False)


def stage_strata(batches: tf.data.Dataset, num_stages: int, stage_batch_size: int) -> tf.data.Dataset:
  """Batches of the next b examples of every stage (module docstring); ends when every stage has run out."""
  examples = batches.unbatch()
  stages = [_stage(examples, stage).batch(stage_batch_size) for stage in range(num_stages)]
  padded = [stage.concatenate(_empty_batches(stage)) for stage in stages]
  steps = tf.data.Dataset.zip(tuple(padded)).map(_concatenated)
  return steps.take_while(lambda batch: tf.shape(batch['stage'])[0] > 0)


def regrouped(layout: str, num_stages: int, stage_batch_size: int):
  """The batches function of a layout: `packed` (the client's batches as they are), `stage_pairs` or
  `stage_strata`."""
  if layout == 'packed':
    return None
  return functools.partial({'stage_pairs': stage_pairs, 'stage_strata': stage_strata}[layout],
                           num_stages=num_stages, stage_batch_size=stage_batch_size)
