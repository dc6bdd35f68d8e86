"""The constant tensors and datasets every round's client datasets are built from, made once and reused.

TensorFlow 2.14 under Python 3.11 keeps 16 bytes of Python memory (about 25 bytes resident) for every eager tensor
it ever made, freed or not: "Python >=3.11 TF memory leaks" (tensorflow/tensorflow#62551; TFF 0.87 pins TF 2.14.1).
The driver builds every client's dataset of every round eagerly, and each `tf.data` call converts its scalar
arguments (a count, a buffer size, a flag) to new eager tensors, so a long run's driver grows with the rounds
(building and serializing FedGMM's 30 client datasets a round left about 3,980 eager tensors a round, 930 with these
reused and its task's data draws traced, see `tasks.gaussian_mixture`; docs/reliability.md). A value
from a small set, one that recurs round after round (a domain index, a batch size, a buffer size, the run's seed, a
count of examples up to a client's size, the endless dataset of one domain index), is made here once and reused, so
the store is bounded by the run's data, not its rounds; passing an eager tensor where `tf.data` converts its
argument makes no new one. Datasets and tensors are immutable, so a shared one builds the same dataset graph, and
the same examples, as a fresh one.

Outside eager execution (tracing a `tf.function`, a `tf.Graph`), every call builds anew: a graph's tensors belong to
that graph. (A number converted for the first time also stays in TensorFlow's scalar cache, about 780 bytes, until
`utils.execution_context.release_eager_caches`, which the training loop calls every round.)
"""

from typing import Callable, Hashable, TypeVar

import tensorflow as tf

T = TypeVar('T')

_REUSED: dict[Hashable, object] = {}


def reused(key: Hashable, build: Callable[[], T]) -> T:
  """`build()`, made once per `key` while executing eagerly and returned again for the same `key`; `build()` anew
  in a graph. `key` must identify the value (include its dtype)."""
  if not tf.executing_eagerly():
    return build()
  if key not in _REUSED:
    _REUSED[key] = build()
  return _REUSED[key]


def constant(value: int | bool, dtype: tf.DType) -> tf.Tensor:
  """The scalar `tf.constant(value, dtype)`."""
  return reused(('constant', value, dtype), lambda: tf.constant(value, dtype))


def repeated(value: int, dtype: tf.DType) -> tf.data.Dataset:
  """The endless dataset of the scalar `value`: `Dataset.from_tensors(constant(value, dtype)).repeat()`."""
  return reused(('repeated', value, dtype), lambda: tf.data.Dataset.from_tensors(constant(value, dtype)).repeat())
