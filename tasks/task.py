"""What a learning task provides to the suite, and the client preprocessing every task shares.

A task has K >= 2 mode populations (index 0 = day = the paper's mode 1, index 1 = night = mode 2, ...), each a
TFF `ClientData` whose elements are `OrderedDict(x=..., y=...)` after the task's `batch_fn`; centralized test data
per mode; and a multi-branch `model_fn`.

Client data reaches a method's client work in two steps, split so that building a round's client datasets in
Python traces no TensorFlow function (which would cost more than the round's training on small models):

1. `preprocess_client` (Python, per round): shuffle (seeded per round and client, so a resumed run trains on the
   same batches; `utils.seeded_shuffle`: the order depends on the seeds given, not on TF's global seed), repeat
   for `num_epochs`, take `max_elements`, pair every element with the client's true mode, batch. Elements are
   `(raw_batch, mode [B])`.
2. `model_batches` (inside the TFF client computation, traced once): the task's `batch_fn` maps each raw batch to
   `OrderedDict(x=..., y=...)`, and `mode` is added.

The true mode is there for simulation-only metrics (routing accuracy); no method may use it to decide anything.

Shift scenarios (`periodic_shift.scenario`) say which examples a client holds in a round; `plan_dataset` builds
them. A task's domains (`periodic_shift.domains`) default to its base populations (modes) untransformed;
`with_domains` sets others (a base with a rotation, flip, inversion or label permutation), whose transform
`model_batches` applies after the task's `batch_fn`, inside the client computation and in evaluation. Examples
are labelled with their domain index, not their base. A client wholly of one domain gets exactly the
`client_dataset` pipeline; a mixed client gets, per part, a seeded random subset of its source client's examples,
each labelled with its domain, concatenated and then preprocessed like any client.

A task is a module, listed in `tasks.registry`, that owns
  NAME:        the name `--task` selects;
  DEFAULTS:    its default hyperparameters, flag name -> value (Table 2 of "Diurnal or Nocturnal?" for the paper's
               tasks), which fill every training setting left None;
  RAW_INPUT_SPACE: whether its raw inputs are points of a space where distances mean something (images, vectors;
               not token ids), so that a method may cluster them;
  READS_FILES: whether `create` reads dataset files (`DataFiles`), or makes its data itself;
  UNSUPPORTED: scenario name -> why the task cannot run it (one clause; the reasons below);
  Settings:    a frozen dataclass whose fields declared with `utils.settings.setting` are the binary's flags
               `--<task>_<field>`, and its `validate()`, raising a one-line ValueError naming the flag
               (`utils.settings.NoSettings` for a task without settings);
  create(settings, files, seed): the `Task`, reading its files from `files` (`DataFiles`), raising a one-line
               FileNotFoundError naming the flag when they are missing.
"""

import collections
import dataclasses
import functools
import zlib
from typing import Callable, NamedTuple, Optional, Sequence

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from models import representation as representation_lib
from periodic_shift import client_sampler
from periodic_shift import domains as domains_lib
from periodic_shift import scenario as scenario_lib
from utils import eager_constants
from utils import seeded_shuffle

BatchFn = Callable[[collections.OrderedDict], collections.OrderedDict]
ModelFn = Callable[[int], tf.keras.Model]

_SHUFFLE_BUFFER = 1000
_TEST_SHUFFLE_BUFFER = 10_000
# At most this much memory for a run's transformed test sets kept between evaluations (`Task.test_datasets`): the
# paper tasks' day and night test sets fit (EMNIST's 77,483 images and CIFAR's 2 x 10,000, about 245 MB each), a
# shared workstation keeps the rest.
TEST_SET_MEMORY = 512 << 20

# A client dataset's order: (the run's seed, a seed of the round and the client), see `utils.seeded_shuffle`.
ShuffleSeed = seeded_shuffle.SeedPair

# Why a task cannot run a scenario (its UNSUPPORTED), shared by tasks of the same shape.
ONE_BASE = 'it has one base population; the scenario needs two or more'
NOT_DAY_NIGHT = 'its bases are mixture components, not a day and a night mode'


class DataFiles(NamedTuple):
  """Where a task reads its files: TFF's cache layout (`--cache_dir`; None: ~/.tff, `tasks.tff_files`) and
  datasets prepared by tensorflow-datasets (`--tfds_data_dir`, `tasks.tfds_files`)."""
  cache_dir: Optional[str] = None
  tfds_data_dir: Optional[str] = None


@dataclasses.dataclass(frozen=True)
class Task:
  """A federated task with mode populations.

  Attributes:
    name: The registry name.
    train_data: One `ClientData` per mode, raw elements.
    client_sizes: Per mode, client id -> number of raw training examples; clients with none are excluded.
    test_data: One centralized test dataset per mode, raw unbatched elements.
    test_sizes: Examples in each mode's test dataset.
    batch_fn: Maps a batch of raw elements to `OrderedDict(x=..., y=...)`, optionally with per-label
      `loss_mask` and `accuracy_mask` (see `algorithms.core.objectives`); applied to train and test data.
    model_fn: num_branches -> a fresh, uncompiled multi-branch Keras model (see `models.multi_branch`).
    num_classes: Output classes (vocabulary size for next-word prediction).
    mode_names: A name per mode (base population).
    input_range: (lo, hi) of the model inputs `x`, or None for standardized inputs (what intensity inversion of a
      domain reflects about).
    domains: The domains examples are labelled with; None: one untransformed domain per mode.
    raw_label_key: The label's key in raw elements (what a part's `label_weights` select on).
    novelty_data: Raw unbatched examples of none of the task's populations (for novelty detection), or None.
    representation: The task's network split into representation tower and classifier head
      (`models.representation`), or None for the split of its multi-branch network at the extractor.
  """
  name: str
  train_data: Sequence[tff.simulation.datasets.ClientData]
  client_sizes: Sequence[dict[str, int]]
  test_data: Sequence[tf.data.Dataset]
  test_sizes: Sequence[int]
  batch_fn: BatchFn
  model_fn: ModelFn
  num_classes: int
  mode_names: Sequence[str] = ('day', 'night')
  input_range: Optional[tuple[float, float]] = None
  domains: Optional[tuple[domains_lib.Domain, ...]] = None
  raw_label_key: str = 'y'
  novelty_data: Optional[tf.data.Dataset] = None
  representation: Optional[representation_lib.Representation] = None
  _label_cache: dict = dataclasses.field(default_factory=dict, init=False, repr=False, compare=False)

  def representation_split(self) -> representation_lib.Representation:
    """The network split into a representation and a classifier (the FedEvolve paper's methods): the task's own, or its
    multi-branch network split at the shared extractor."""
    return self.representation or representation_lib.extractor_representation(self.model_fn, self.num_classes)

  @property
  def domain_list(self) -> tuple[domains_lib.Domain, ...]:
    return self.domains or domains_lib.plain_domains(self.mode_names)

  @property
  def num_modes(self) -> int:
    """K, the number of domains examples are labelled with (the modes, unless `with_domains` set others)."""
    return len(self.domain_list)

  @property
  def num_stages(self) -> int:
    """The time stages of the domains (`periodic_shift.domains.Domain.stage`); 1 when they have none."""
    return 1 + max(domain.stage for domain in self.domain_list)

  @property
  def domain_names(self) -> list[str]:
    return [domain.name for domain in self.domain_list]

  def with_domains(self, domains: Sequence[domains_lib.Domain]) -> 'Task':
    """This task with examples labelled by `domains` and transformed by them in `model_batches`."""
    image_only = {d.corruption for d in domains} & domains_lib.IMAGE_ONLY_CORRUPTIONS
    planes = max(d.rotation_planes for d in domains)
    if image_only or planes > 1:
      with tf.Graph().as_default():
        input_shape = self.model_fn(1).input_shape
      if image_only and len(input_shape) != 4:
        raise ValueError(f'the {", ".join(sorted(image_only))} corruption is defined for images; {self.name} has '
                         'vector inputs.')
      if planes > 1 and (len(input_shape) != 2 or 2 * planes > input_shape[-1]):
        raise ValueError(f'rotation_planes turns planes of vector inputs, at most half their dimension; {self.name} '
                         f'has inputs of shape {tuple(input_shape[1:])} and rotation_planes is {planes}.')
    transform = domains_lib.DomainTransform(domains, self.num_classes, self.input_range)
    batch_fn = self.batch_fn if transform.is_identity else DomainBatchFn(self.batch_fn, transform)
    return dataclasses.replace(self, domains=tuple(domains), batch_fn=batch_fn)

  def mode_client_ids(self) -> list[list[str]]:
    """Per mode, the ids of clients with at least one training example, sorted."""
    return [sorted(sizes) for sizes in self.client_sizes]

  def population(self) -> scenario_lib.Population:
    """What the task offers a scenario: its modes' client ids and sizes, its labels and whether its inputs are
    images."""
    with tf.Graph().as_default():
      images = len(self.model_fn(1).input_shape) == 4
    return scenario_lib.Population(self.mode_client_ids(), self.client_sizes, self.num_classes, images)

  def population_summary(self) -> dict:
    summary = {}
    for name, sizes, test_size in zip(self.mode_names, self.client_sizes, self.test_sizes):
      summary[name] = {'clients': len(sizes), 'train_examples': int(sum(sizes.values())),
                       'test_examples': int(test_size)}
    return summary

  def client_dataset(self, mode: int, client_id: str, client_spec: tff.simulation.baselines.ClientSpec,
                     shuffle_seed: ShuffleSeed) -> tf.data.Dataset:
    """One client's training batches `(raw_batch, mode)` of domain `mode` (a client of its base population),
    before `model_batches`."""
    dataset = self.train_data[self.domain_list[mode].base].create_tf_dataset_for_client(client_id)
    return preprocess_client(dataset, mode, client_spec, shuffle_seed)

  def plan_dataset(self, plan: scenario_lib.ClientPlan, client_spec: tff.simulation.baselines.ClientSpec,
                   shuffle_seed: ShuffleSeed) -> tf.data.Dataset:
    """One client's training batches `(raw_batch, domain)` for its plan in a round, before `model_batches`."""
    if len(plan.parts) == 1 and plan.parts[0].num_examples is None and plan.parts[0].label_weights is None:
      part = plan.parts[0]
      return self.client_dataset(part.domain, part.source_id, client_spec, shuffle_seed)
    return _preprocess_labelled(self._plan_examples(plan, shuffle_seed), client_spec, shuffle_seed)

  def _plan_examples(self, plan: scenario_lib.ClientPlan, shuffle_seed: Optional[ShuffleSeed]) -> tf.data.Dataset:
    """A plan's examples `(raw_element, domain)`, its parts concatenated in order, thinned by label where a part
    has `label_weights` (`_thinned`).

    A part takes its range of one seeded order of its source's examples: with `order_seed` o (fixed splits), the
    order of the pair (o, s(o)); otherwise that of the round's (shuffle_seed[0], s(shuffle_seed[1])), where
    s(x) = `derived_seed(x, base, crc32(source id))`. Both are functions of explicit seeds only
    (`utils.seeded_shuffle`): a split cut for evaluation and the same split cut for training hold the same
    examples, so disjoint ranges never share one. `shuffle_seed` None: every part must have an `order_seed`."""
    thinned = any(part.label_weights is not None for part in plan.parts)
    parts = []
    for index, part in enumerate(plan.parts):
      base = self.domain_list[part.domain].base
      source = self.train_data[base].create_tf_dataset_for_client(part.source_id)
      if thinned:  # Each example's position in its source: its thinning draw's key (zip: no rewrite, no trace).
        source = tf.data.Dataset.zip((_positions(), source))
      source_key = zlib.crc32(part.source_id.encode())  # One order per source: parts can split it disjointly.
      if part.order_seed is not None:
        stream, key = part.order_seed, part.order_seed
      elif shuffle_seed is not None:
        stream, key = shuffle_seed
      else:
        raise ValueError(f'a held-out plan\'s parts need an order_seed (fixed splits); {plan.client_id} has none.')
      source = seeded_shuffle.shuffle(source, _SHUFFLE_BUFFER, (stream, client_sampler.derived_seed(
          key, base, source_key)), reshuffle_each_iteration=False)  # The same subset in every epoch of the round.
      source = source.skip(eager_constants.constant(part.skip, tf.int64))
      if part.num_examples is not None:
        source = source.take(eager_constants.constant(part.num_examples, tf.int64))
      source = _with_mode(source, part.domain)
      if thinned:  # The part's index, and whether the example is the part's first (always kept).
        source = tf.data.Dataset.zip((source, eager_constants.repeated(index, tf.int32), _first_flags()))
      parts.append(source)
    examples = functools.reduce(tf.data.Dataset.concatenate, parts)
    return self._thinned(examples, plan) if thinned else examples

  def _source_labels(self, base: int, source_id: str) -> np.ndarray:
    """The labels client `source_id` of base population `base` holds (read once, then cached)."""
    key = (base, source_id)
    if key not in self._label_cache:
      labels = [element[self.raw_label_key] for element in
                self.train_data[base].create_tf_dataset_for_client(source_id).batch(1 << 20)]
      self._label_cache[key] = np.unique(np.concatenate(labels).astype(np.int64)) if labels else np.zeros([0], int)
    return self._label_cache[key]

  def _thinned(self, examples: tf.data.Dataset, plan: scenario_lib.ClientPlan) -> tf.data.Dataset:
    """Label thinning of the plan's examples `(((position, raw_element), domain), part, first)`: an example of label y in a
    part with weights w is kept with probability w[y] / max w over the labels its source holds (so the labels'
    shares move from the source's p(y) to p(y) w[y] / sum p w, and the source's most weighted label is always
    kept). The draw is a function of (the part's `label_seed`, the source, the example's position in the source):
    a source keeps the same examples in every round. A part's first example is always kept, so no part is empty
    (a part of a few examples, e.g. a window's chunk, may hold none of its source's most weighted label). One
    filter and one map for the whole plan: a round's datasets trace two small functions per client, not per part."""
    num_labels = max(len(part.label_weights) for part in plan.parts if part.label_weights is not None)
    keep = np.ones([len(plan.parts), num_labels], np.float32)
    seeds = np.zeros([len(plan.parts)], np.int64)
    for index, part in enumerate(plan.parts):
      if part.label_weights is not None:
        weights = np.asarray(part.label_weights, np.float32)
        held = self._source_labels(self.domain_list[part.domain].base, part.source_id)
        keep[index] = weights / (weights[held].max() if len(held) else 1.0)
        seeds[index] = client_sampler.derived_seed(part.label_seed, zlib.crc32(part.source_id.encode()))
    keep, seeds = tf.constant(keep), tf.constant(seeds)
    label_key = self.raw_label_key

    @tf.autograph.experimental.do_not_convert
    def kept(example, part, first):
      (position, element), _ = example
      return _kept_by_label(position, element[label_key], part, first, keep, seeds)

    return examples.filter(kept).map(_untransformed(_without_thinning_keys))

  def pooled_training_examples(self, seed: int) -> tf.data.Dataset:
    """Every training example of every domain once, `(raw_element, domain)`, domain after domain (each base's
    clients in `create_tf_dataset_from_all_clients(seed)`'s order), before batching and `model_batches`."""
    parts = [_with_mode(self.train_data[domain.base].create_tf_dataset_from_all_clients(seed=seed), index)
             for index, domain in enumerate(self.domain_list)]
    return functools.reduce(lambda pooled, part: pooled.concatenate(part), parts)

  def held_out_dataset(self, plans: Sequence[scenario_lib.ClientPlan], batch_size: int,
                       shuffle_seed: Optional[int] = None) -> tf.data.Dataset:
    """Batches `OrderedDict(x, y, mode, client)` of every client's held-out `plans` (fixed splits,
    `Part.order_seed`), `client` [B] the plan's index in `plans`; each batch holds examples of one client only,
    clients one after another. A client's examples come part after part (domain after domain), unless
    `shuffle_seed` s is given: then each client's examples are shuffled together, in the order of the pair
    (s, derived_seed(s, crc32(client id))), a new order each pass (training batches for local tuning: SGD over
    domain-ordered batches would end on the last domain)."""
    def examples(plan):
      dataset = self._plan_examples(plan, shuffle_seed=None)
      if shuffle_seed is None:
        return dataset
      return seeded_shuffle.shuffle(dataset, _SHUFFLE_BUFFER, (shuffle_seed, client_sampler.derived_seed(
          shuffle_seed, zlib.crc32(plan.client_id.encode()))), reshuffle_each_iteration=True)

    batched = [tf.data.Dataset.zip((examples(plan), eager_constants.repeated(index, tf.int32))).batch(batch_size)
               for index, plan in enumerate(plans)]
    while len(batched) > 1:  # A balanced tree of concatenations keeps the dataset graph shallow.
      batched = [functools.reduce(tf.data.Dataset.concatenate, batched[i:i + 2]) for i in range(0, len(batched), 2)]
    to_model_batch = lambda examples, client: collections.OrderedDict(
        _model_batch(*examples, self.batch_fn), client=client)
    return batched[0].map(_untransformed(to_model_batch)).prefetch(tf.data.AUTOTUNE)

  def novelty_dataset(self, batch_size: int) -> Optional[tf.data.Dataset]:
    """Batches `OrderedDict(x, y, mode)` of the task's novelty data (mode 0, never scored), or None."""
    if self.novelty_data is None:
      return None
    return model_batches(_with_mode(self.novelty_data, 0).batch(batch_size), self.batch_fn)

  def test_dataset(self, mode: Optional[int], batch_size: int, keep: bool = False) -> tf.data.Dataset:
    """Test batches `OrderedDict(x, y, mode)` of one domain (its base's test data, transformed); `keep`: computed
    at the first pass and kept in memory for the next ones."""
    dataset = model_batches(_with_mode(self.test_data[self.domain_list[mode].base], mode).batch(batch_size),
                            self.batch_fn)
    return (dataset.cache() if keep else dataset).prefetch(tf.data.AUTOTUNE)

  def test_datasets(self, batch_size: int) -> dict[str, tf.data.Dataset]:
    """Every domain's test batches by name. A transformed domain's batches are kept after their first pass when the
    transformed test sets fit `TEST_SET_MEMORY` together: a transform is a function of the example alone
    (`periodic_shift.domains`: even a random corruption draws from the example's fingerprint), so every evaluation
    would compute the same batches again."""
    keep = isinstance(self.batch_fn, DomainBatchFn) and self.transformed_test_bytes() <= TEST_SET_MEMORY
    return {name: self.test_dataset(mode, batch_size, keep) for mode, name in enumerate(self.domain_names)}

  def transformed_test_bytes(self) -> int:
    """The memory every domain's test inputs take as float32 model batches."""
    with tf.Graph().as_default():
      example_size = int(np.prod(self.model_fn(1).input_shape[1:]))
    return sum(4 * example_size * self.test_sizes[domain.base] for domain in self.domain_list)

  def mixed_test_dataset(self, share: float, batch_size: int, seed: int) -> tf.data.Dataset:
    """Test batches of both domains of a two-domain task: each holds round(share B) examples of domain 0 and the
    rest of domain 1 (the test clients of a round with q(t) = share, seen by a method that routes whole batches).
    Each domain's test data is shuffled once by `seed` (10,000-example buffer; the seed pair (TF's default global
    seed, seed + mode), the order earlier versions drew) so that a part of it is not one writer's; batches are full,
    so the batches stop where the domain that fills them faster runs out."""
    if len(self.domain_list) != 2:
      raise ValueError(f'mixed test batches need a task with 2 domains; this one has {len(self.domain_list)}.')
    day_count = int(round(share * batch_size))
    sizes = [(mode, count) for mode, count in ((0, day_count), (1, batch_size - day_count)) if count > 0]
    parts = [seeded_shuffle.shuffle(_with_mode(self.test_data[self.domain_list[mode].base], mode),
                                    _TEST_SHUFFLE_BUFFER, (seeded_shuffle.DEFAULT_GLOBAL_SEED, seed + mode),
                                    reshuffle_each_iteration=False)
             .batch(count, drop_remainder=len(sizes) > 1) for mode, count in sizes]
    if len(parts) == 1:
      dataset = parts[0]
    else:
      dataset = tf.data.Dataset.zip(tuple(parts)).map(_untransformed(
          lambda first, second: tf.nest.map_structure(lambda a, b: tf.concat([a, b], axis=0), first, second)))
    return model_batches(dataset, self.batch_fn).prefetch(tf.data.AUTOTUNE)


@tf.function(reduce_retracing=True, autograph=False)
def _kept_by_label(position, label, part, first, keep, seeds):
  """`_thinned`'s draw for one example: its part's first, or u < keep[part, label] with u ~ U[0, 1) drawn from the
  seed (seeds[part], position). One traced function for every plan (keep [P, L] and seeds [P] are arguments, not
  captures): each client's filter only calls it, instead of tracing the draw again."""
  draw = tf.random.stateless_uniform([], seed=tf.stack([seeds[part], position]))
  return first | (draw < keep[part, tf.cast(label, tf.int32)])


@tf.autograph.experimental.do_not_convert
def _without_thinning_keys(example, part, first):
  """`((position, raw_element), domain), part, first` -> `(raw_element, domain)`."""
  del part, first
  (_, element), domain = example
  return element, domain


def _with_mode(dataset: tf.data.Dataset, mode: int) -> tf.data.Dataset:
  """Pairs every element with `mode` (zip traces no function, unlike map)."""
  return tf.data.Dataset.zip((dataset, eager_constants.repeated(mode, tf.int32)))


def _positions() -> tf.data.Dataset:
  """0, 1, 2, ...: each example's position in its source."""
  return eager_constants.reused('positions', lambda: tf.data.Dataset.range(np.iinfo(np.int64).max))


def _first_flags() -> tf.data.Dataset:
  """True, then False forever: whether an example is its part's first."""
  return eager_constants.reused('first_flags', lambda: tf.data.Dataset.from_tensors(True).concatenate(
      tf.data.Dataset.from_tensors(False).repeat()))


def _shuffled_epochs(dataset: tf.data.Dataset, client_spec: tff.simulation.baselines.ClientSpec,
                     shuffle_seed: ShuffleSeed) -> tf.data.Dataset:
  """shuffle (a new order of `shuffle_seed`'s stream every epoch) -> repeat(num_epochs) -> take(max_elements)."""
  buffer_size = client_spec.shuffle_buffer_size or _SHUFFLE_BUFFER
  dataset = seeded_shuffle.shuffle(dataset, buffer_size, shuffle_seed, reshuffle_each_iteration=True)
  dataset = dataset.repeat(eager_constants.constant(client_spec.num_epochs, tf.int64))
  if client_spec.max_elements is not None and client_spec.max_elements > 0:
    dataset = dataset.take(eager_constants.constant(client_spec.max_elements, tf.int64))
  return dataset


def _batched(dataset: tf.data.Dataset, batch_size: int) -> tf.data.Dataset:
  """`dataset.batch(batch_size)`, its size and remainder flag the reused eager constants."""
  return dataset.batch(eager_constants.constant(batch_size, tf.int64),
                       drop_remainder=eager_constants.constant(False, tf.bool))


def preprocess_client(dataset: tf.data.Dataset, mode: int, client_spec: tff.simulation.baselines.ClientSpec,
                      shuffle_seed: ShuffleSeed) -> tf.data.Dataset:
  """shuffle -> repeat(num_epochs) -> take(max_elements) -> pair with mode -> batch."""
  return _batched(_with_mode(_shuffled_epochs(dataset, client_spec, shuffle_seed), mode), client_spec.batch_size)


def _preprocess_labelled(dataset: tf.data.Dataset, client_spec: tff.simulation.baselines.ClientSpec,
                         shuffle_seed: ShuffleSeed) -> tf.data.Dataset:
  """`preprocess_client` for elements already paired with their domain."""
  return _batched(_shuffled_epochs(dataset, client_spec, shuffle_seed), client_spec.batch_size)


class DomainBatchFn:
  """A task's `batch_fn` followed by the domain transform of each example (see `model_batches`)."""

  def __init__(self, batch_fn: BatchFn, transform: domains_lib.DomainTransform):
    self._batch_fn = batch_fn
    self.transform = transform

  def __call__(self, raw_batch: collections.OrderedDict) -> collections.OrderedDict:
    return self._batch_fn(raw_batch)


def _model_batch(raw_batch, mode, batch_fn: BatchFn) -> collections.OrderedDict:
  batch = batch_fn(raw_batch)
  if isinstance(batch_fn, DomainBatchFn):
    batch = batch_fn.transform(batch, mode)
  return collections.OrderedDict(batch, mode=mode)


def _untransformed(fn):
  """`fn` as a dataset function that autograph leaves as written: the suite's data functions use TF ops for
  control flow, and converting them again for every client dataset a run builds took 8% of a short run's time."""
  return tf.autograph.experimental.do_not_convert(fn)


def model_batches(dataset: tf.data.Dataset, batch_fn: BatchFn) -> tf.data.Dataset:
  """Maps batches `(raw_batch, mode)` to `OrderedDict(x, y, [loss_mask, accuracy_mask,] mode[, stage])` with the
  task's `batch_fn` (and, for a `DomainBatchFn`, each example's domain transform and time stage)."""
  return dataset.map(_untransformed(lambda raw_batch, mode: _model_batch(raw_batch, mode, batch_fn)))
