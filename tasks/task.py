"""What a learning task provides to the suite, and the client preprocessing every task shares.

A task has K >= 2 mode populations (index 0 = day = the paper's mode 1, index 1 = night = mode 2, ...), each a
TFF `ClientData` whose elements are `OrderedDict(x=..., y=...)` after the task's `element_fn`; centralized test data
per mode; and a multi-branch `model_fn`.

Client preprocessing (`preprocess_client`), the same for every task and method: shuffle (seeded per round and
client, so a resumed run trains on the same batches), repeat for `num_epochs`, take `max_elements`, batch, and add
the client's true mode to every batch as `mode` [B]. The true mode is there for simulation-only metrics (routing
accuracy); no method may use it to decide anything.
"""

import collections
import dataclasses
from typing import Callable, Optional, Sequence

import tensorflow as tf
import tensorflow_federated as tff

ElementFn = Callable[[collections.OrderedDict], collections.OrderedDict]
ModelFn = Callable[[int], tf.keras.Model]

_SHUFFLE_BUFFER = 1000


@dataclasses.dataclass(frozen=True)
class Task:
  """A federated task with mode populations.

  Attributes:
    name: The registry name.
    train_data: One `ClientData` per mode, raw elements.
    client_sizes: Per mode, client id -> number of raw training examples; clients with none are excluded.
    test_data: One centralized test dataset per mode, raw unbatched elements.
    test_sizes: Examples in each mode's test dataset.
    element_fn: Maps a raw element to `OrderedDict(x=..., y=...)`; applied to train and test data.
    model_fn: num_branches -> a fresh, uncompiled multi-branch Keras model (see `models.multi_branch`).
    num_classes: Output classes (vocabulary size for next-word prediction).
    mode_names: A name per mode.
  """
  name: str
  train_data: Sequence[tff.simulation.datasets.ClientData]
  client_sizes: Sequence[dict[str, int]]
  test_data: Sequence[tf.data.Dataset]
  test_sizes: Sequence[int]
  element_fn: ElementFn
  model_fn: ModelFn
  num_classes: int
  mode_names: Sequence[str] = ('day', 'night')

  @property
  def num_modes(self) -> int:
    return len(self.train_data)

  def mode_client_ids(self) -> list[list[str]]:
    """Per mode, the ids of clients with at least one training example, sorted."""
    return [sorted(sizes) for sizes in self.client_sizes]

  def population_summary(self) -> dict:
    summary = {}
    for name, sizes, test_size in zip(self.mode_names, self.client_sizes, self.test_sizes):
      summary[name] = {'clients': len(sizes), 'train_examples': int(sum(sizes.values())),
                       'test_examples': int(test_size)}
    return summary

  def client_dataset(self, mode: int, client_id: str, client_spec: tff.simulation.baselines.ClientSpec,
                     shuffle_seed: int) -> tf.data.Dataset:
    """The preprocessed training batches of one client."""
    dataset = self.train_data[mode].create_tf_dataset_for_client(client_id)
    return preprocess_client(dataset, mode, self.element_fn, client_spec, shuffle_seed)

  def test_dataset(self, mode: Optional[int], batch_size: int) -> tf.data.Dataset:
    """Batched test data of one mode, or of all modes (mode None), each batch with its `mode` [B]."""
    modes = range(self.num_modes) if mode is None else [mode]
    combined = None
    for k in modes:
      dataset = self.test_data[k].map(self.element_fn, num_parallel_calls=tf.data.AUTOTUNE).map(
          lambda e, k=k: collections.OrderedDict(x=e['x'], y=e['y'], mode=tf.constant(k, tf.int32)))
      combined = dataset if combined is None else combined.concatenate(dataset)
    return combined.batch(batch_size).prefetch(tf.data.AUTOTUNE)


def preprocess_client(dataset: tf.data.Dataset, mode: int, element_fn: ElementFn,
                      client_spec: tff.simulation.baselines.ClientSpec, shuffle_seed: int) -> tf.data.Dataset:
  """shuffle -> repeat(num_epochs) -> take(max_elements) -> map(element_fn) -> batch -> add `mode`."""
  buffer_size = client_spec.shuffle_buffer_size or _SHUFFLE_BUFFER
  dataset = dataset.shuffle(buffer_size, seed=shuffle_seed, reshuffle_each_iteration=True)
  dataset = dataset.repeat(client_spec.num_epochs)
  if client_spec.max_elements is not None and client_spec.max_elements > 0:
    dataset = dataset.take(client_spec.max_elements)
  dataset = dataset.map(element_fn).batch(client_spec.batch_size)
  return dataset.map(lambda batch: collections.OrderedDict(
      x=batch['x'], y=batch['y'], mode=tf.fill(tf.shape(batch['y'])[:1], tf.constant(mode, tf.int32))))
