"""A `tf.data` shuffle whose order is a function of the seeds it is given and nothing else.

`tf.data.Dataset.shuffle(buffer, seed=s)` draws its order from the pair (g, s), where g is TF's global seed at the
moment the dataset is built (`tf.random.get_seed`: g = 87654321 when no global seed is set). Two datasets built
from the same plan with the same `s` therefore hold different examples when the global seed changed in between:
a split cut before `tf.random.set_seed` and the same split cut after it are not the same split. Every split,
subset and order the suite draws goes through `shuffle` here, which passes the pair (seed, seed2) to TF's shuffle
op directly, so the order is the same whatever the global seed is and whenever the dataset is built.

`shuffle(dataset, b, (g, s), r)` gives exactly the order of `dataset.shuffle(b, seed=s, reshuffle_each_iteration=r)`
built under `tf.random.set_seed(g)` (tested), so results of runs that had global seed g reproduce.

TF's public API takes no seed pair for a dataset shuffle; this module builds the same op `Dataset.shuffle` builds
in eager mode (`shuffle_dataset_v3`, TensorFlow 2.14's `tensorflow/python/data/ops/shuffle_op.py`) with the pair.
"""

import tensorflow as tf
# pylint: disable=g-direct-tensorflow-import
from tensorflow.python.data.ops import dataset_ops
from tensorflow.python.ops import gen_dataset_ops
# pylint: enable=g-direct-tensorflow-import

from utils import eager_constants

# TF's global seed when none is set (`tensorflow.python.framework.random_seed.DEFAULT_GRAPH_SEED`): the first seed
# of the pair a `Dataset.shuffle(seed=s)` built without a global seed draws from.
DEFAULT_GLOBAL_SEED = 87654321

SeedPair = tuple[int, int]


class _SeededShuffleDataset(dataset_ops.UnaryUnchangedStructureDataset):
  """`Dataset.shuffle`'s eager-mode op with an explicit (seed, seed2)."""

  def __init__(self, input_dataset: tf.data.Dataset, buffer_size: int, seed: SeedPair, reshuffle_each_iteration: bool):
    self._input_dataset = input_dataset
    self._name = None
    first, second = (int(s) % (2**31 - 1) for s in seed)  # TF's truncation of a seed to 31 bits.
    if first == 0 and second == 0:
      second = 2**31 - 1  # TF's substitute for the pair (0, 0), which would ask the op for a random seed.
    variant_tensor = gen_dataset_ops.shuffle_dataset_v3(
        input_dataset._variant_tensor,  # pylint: disable=protected-access
        buffer_size=eager_constants.constant(buffer_size, tf.int64),
        seed=eager_constants.constant(first, tf.int64),  # The run's seed or a split's: a few values.
        seed2=tf.constant(second, tf.int64),
        seed_generator=gen_dataset_ops.dummy_seed_generator(),
        reshuffle_each_iteration=reshuffle_each_iteration,
        **self._common_args)
    super().__init__(input_dataset, variant_tensor)


def shuffle(dataset: tf.data.Dataset, buffer_size: int, seed: SeedPair,
            reshuffle_each_iteration: bool) -> tf.data.Dataset:
  """`dataset` shuffled with a `buffer_size` buffer in the order of `seed` = (seed, seed2) alone; with
  `reshuffle_each_iteration`, each pass (e.g. each epoch after `repeat`) takes the next order of the same stream."""
  return _SeededShuffleDataset(dataset, buffer_size, seed, reshuffle_each_iteration)
