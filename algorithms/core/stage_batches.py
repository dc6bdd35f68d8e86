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
  Each example enters two pairs (as support and as query); FedEvolve runs psi on the support rows and phi on the
  query rows only (`algorithms.methods.fedevolve.pair_outputs`), so a pass costs each tower about one pass over the
  data.
- `stage_sweep` (FedEvp, Algorithm 2): one batch per domain m and step, the domains m = 0..S-1 in turn inside each
  local iteration (Algorithm 2's loop over m): the next b examples of stage m, the step's own, after a support of
  every earlier stage j < m: ceil(b / m) examples of each (`sweep_support_size`; its full batches of that size in
  turn, cycling, as `stage_pairs`' supports). Every example of every stage is the step's own exactly once per pass.
  FedEvp reads the own rows only (its prototypes accumulate over the sweep, `algorithms.methods.fedevp`), so the
  support rows are gathered and not used.
- `stage_strata` (FedEvp's option, one sweep of Algorithm 2's loop over m per step): each batch holds the next b
  examples of every stage; a stage that has run out contributes nothing. Every example appears exactly once per
  pass, in S b / B times fewer steps than batches of B.

A pass is one pass over the client's stream (`--client_epochs` passes are one stream). The stream is read once
into one batch, the steps' stream positions are computed beside it and every step's batch is gathered at once into
a ragged batch whose rows are the steps: no function runs inside the dataset. Functions inside a client's dataset
are instantiated again for every client (the cost `client_training.fold` avoids): filtering the stream per stage
made a FedEvolve round 8 times slower, and computing the positions inside a `flat_map` cost 120-190 ms a client
against 2-6 ms now (a client of 480 examples, 4 stages, b = 64, on this machine's CPU).
"""

import functools

import tensorflow as tf

from algorithms.core import client_training

_WHOLE_STREAM = 1 << 30  # A batch size no client's stream reaches: the stream as one batch.


def _chunks(indices: tf.Tensor, size: int, first: tf.Tensor) -> tf.Tensor:
  """[steps, size] stream positions: row k holds indices[first[k] + j] (int64 `indices` [n], `first` [steps]) for
  j < size where that exists, -1 elsewhere."""
  positions = first[:, tf.newaxis] + tf.range(size, dtype=tf.int64)[tf.newaxis]
  padded = tf.concat([indices, tf.constant([-1], tf.int64)], 0)  # Every position past the end reads the -1.
  return tf.gather(padded, tf.minimum(positions, tf.size(indices, out_type=tf.int64)))


def _support_chunks(support: tf.Tensor, size: int, step: tf.Tensor) -> tf.Tensor:
  """[steps, size] positions of a stage's support at each step: its full batches of `size` in turn, cycling, or
  the whole stage when none is full (no example: -1 throughout)."""
  count = tf.size(support, out_type=tf.int64)
  full = count // size
  return _chunks(support[:tf.where(full > 0, full * size, count)], size, (step % tf.maximum(full, 1)) * size)


def _in_iteration_order(rows: list, keys: list) -> tf.Tensor:
  """The rows of every stage's steps, ordered by local iteration, then stage (`keys`: step * S + stage)."""
  order = tf.argsort(tf.concat(keys, 0), stable=True)
  return tf.gather(tf.concat(rows, 0), order)


def _pair_rows(stages: tf.Tensor, num_stages: int, size: int) -> tf.Tensor:
  """Rows of stream positions, [steps, 2 size], of `stage_pairs`' batches in order (-1: no example)."""
  rows, keys = [], []
  for m in range(num_stages - 1):
    support = tf.where(tf.equal(stages, m))[:, 0]
    queries = tf.where(tf.equal(stages, m + 1))[:, 0]
    num_queries = tf.size(queries, out_type=tf.int64)
    steps = tf.where(tf.size(support) > 0, (num_queries + size - 1) // size, 0)
    step = tf.range(steps)
    rows.append(tf.concat([_support_chunks(support, size, step), _chunks(queries, size, step * size)], axis=1))
    keys.append(step * num_stages + m)  # Algorithm 1's order: every pair once per local iteration.
  return _in_iteration_order(rows, keys)


def sweep_support_size(stage: int, size: int) -> int:
  """Examples of each earlier stage in the support of a `stage_sweep` step of `stage` >= 1: ceil(size / stage), so
  the supports together hold about one batch."""
  return -(-size // stage)


def _sweep_rows(stages: tf.Tensor, num_stages: int, size: int) -> tf.Tensor:
  """Rows of stream positions of `stage_sweep`'s batches in order (-1: no example)."""
  members = [tf.where(tf.equal(stages, m))[:, 0] for m in range(num_stages)]
  widths = [size + (m * sweep_support_size(m, size) if m else 0) for m in range(num_stages)]
  rows, keys = [], []
  for m in range(num_stages):
    step = tf.range((tf.size(members[m], out_type=tf.int64) + size - 1) // size)
    supports = [_support_chunks(members[j], sweep_support_size(m, size), step) for j in range(m)]
    own = _chunks(members[m], size, step * size)
    padding = -tf.ones([tf.size(step), max(widths) - widths[m]], tf.int64)
    rows.append(tf.concat(supports + [own, padding], axis=1))
    keys.append(step * num_stages + m)  # Algorithm 2's order: every domain once per local iteration.
  return _in_iteration_order(rows, keys)


def _strata_rows(stages: tf.Tensor, num_stages: int, size: int) -> tf.Tensor:
  """Rows of stream positions, [steps, S size], of `stage_strata`' batches in order (-1: no example)."""
  members = [tf.where(tf.equal(stages, m))[:, 0] for m in range(num_stages)]
  steps = tf.reduce_max([(tf.size(indices, out_type=tf.int64) + size - 1) // size for indices in members])
  first = tf.range(steps) * size
  return tf.concat([_chunks(indices, size, first) for indices in members], axis=1)


def _one_batch(batches: tf.data.Dataset) -> dict:
  """The client's whole stream as one batch (a batch of 0 examples when the stream is empty)."""
  empty = tf.data.Dataset.from_tensors(tf.nest.map_structure(
      lambda spec: tf.zeros([0] + spec.shape[1:].as_list(), spec.dtype), batches.element_spec))
  return client_training.single_element(batches.unbatch().batch(_WHOLE_STREAM).concatenate(empty))


def _regrouped(batches: tf.data.Dataset, rows_fn) -> tf.data.Dataset:
  """A batch per row of `rows_fn(stages)` (stream positions, -1 for none), gathered from the stream; batches without
  time stages (a scenario without them) as they are."""
  if 'stage' not in batches.element_spec:
    return batches
  stream = _one_batch(batches)
  rows = rows_fn(tf.cast(stream['stage'], tf.int32))
  positions = tf.ragged.boolean_mask(rows, rows >= 0)  # [steps, (examples)]
  return tf.data.Dataset.from_tensor_slices(tf.nest.map_structure(lambda t: tf.gather(t, positions), stream))


def stage_pairs(batches: tf.data.Dataset, num_stages: int, stage_batch_size: int) -> tf.data.Dataset:
  """Batches of (b examples of stage m, the next b examples of stage m + 1), m = 0..S-2 in turn (module docstring);
  ends when every stage 1..S-1 has been a query once. Requires S >= 2."""
  return _regrouped(batches, lambda stages: _pair_rows(stages, num_stages, stage_batch_size))


def stage_sweep(batches: tf.data.Dataset, num_stages: int, stage_batch_size: int) -> tf.data.Dataset:
  """Batches of the next b examples of stage m after a support of every earlier stage, m = 0..S-1 in turn (module
  docstring); ends when every stage has run out."""
  return _regrouped(batches, lambda stages: _sweep_rows(stages, num_stages, stage_batch_size))


def stage_strata(batches: tf.data.Dataset, num_stages: int, stage_batch_size: int) -> tf.data.Dataset:
  """Batches of the next b examples of every stage (module docstring); ends when every stage has run out."""
  return _regrouped(batches, lambda stages: _strata_rows(stages, num_stages, stage_batch_size))


def regrouped(layout: str, num_stages: int, stage_batch_size: int):
  """The batches function of a layout: `packed` (the client's batches as they are), `stage_pairs`, `stage_sweep`
  or `stage_strata`."""
  if layout == 'packed':
    return None
  layouts = {'stage_pairs': stage_pairs, 'stage_sweep': stage_sweep, 'stage_strata': stage_strata}
  return functools.partial(layouts[layout], num_stages=num_stages, stage_batch_size=stage_batch_size)
