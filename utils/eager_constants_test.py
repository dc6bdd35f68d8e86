"""Tests for utils.eager_constants: reuse while eager, fresh graph tensors when tracing, the same client datasets,
and fewer eager tensors left behind per client dataset (the leak of TF 2.14 under Python 3.11 it works around)."""

import collections
import gc
import tracemalloc
from unittest import mock

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from periodic_shift import scenario
from tasks import task as task_lib
from utils import eager_constants


def _two_source_task() -> task_lib.Task:
  """Two clients of 300 examples, labels 0..3, x = the example's index."""
  data = {}
  for offset, client_id in enumerate(('a', 'b')):
    index = np.arange(300) + 1000 * offset
    data[client_id] = collections.OrderedDict(x=index.astype(np.float32)[:, None], y=(index % 4).astype(np.int32))
  return task_lib.Task(name='t', train_data=[tff.simulation.datasets.TestClientData(data)] * 2,
                       client_sizes=[{'a': 300, 'b': 300}] * 2, test_data=[], test_sizes=[], batch_fn=lambda b: b,
                       model_fn=None, num_classes=4, mode_names=('d0', 'd1'))


def _plan(round_num: int) -> scenario.ClientPlan:
  """Three parts over both sources and domains, one thinned by label: every kind of step a round's plan takes."""
  return scenario.ClientPlan('c', (
      scenario.Part(0, 'a', num_examples=40 + round_num % 7, skip=round_num % 5),
      scenario.Part(1, 'b', num_examples=30, skip=10, label_weights=(1.0, 0.5, 0.2, 0.9), label_seed=3),
      scenario.Part(1, 'a', num_examples=25, skip=100)))


_SPEC = tff.simulation.baselines.ClientSpec(num_epochs=2, batch_size=16, max_elements=100)


def _elements(dataset: tf.data.Dataset) -> list:
  return [(raw['x'].tolist(), raw['y'].tolist(), domain.tolist()) for raw, domain in dataset.as_numpy_iterator()]


def _never_reused(key, build):
  del key
  return build()


class ReusedTest(tf.test.TestCase):

  def test_eager_values_are_made_once_per_key(self):
    first = eager_constants.constant(7, tf.int64)
    self.assertIs(eager_constants.constant(7, tf.int64), first)
    self.assertIsNot(eager_constants.constant(7, tf.int32), first)
    self.assertEqual(first.dtype, tf.int64)
    self.assertEqual(first.numpy(), 7)
    repeated = eager_constants.repeated(3, tf.int32)
    self.assertIs(eager_constants.repeated(3, tf.int32), repeated)
    self.assertEqual(list(repeated.take(4).as_numpy_iterator()), [3, 3, 3, 3])

  def test_a_graph_gets_tensors_of_its_own(self):
    eager = eager_constants.constant(11, tf.int64)
    traced_values = []

    @tf.function
    def traced():
      value = eager_constants.constant(11, tf.int64)
      traced_values.append(value)
      return value + 1

    self.assertEqual(traced().numpy(), 12)
    self.assertIsNot(traced_values[0], eager)  # The cached eager tensor would be captured, not built in the trace.
    self.assertTrue(tf.is_symbolic_tensor(traced_values[0]))
    with tf.Graph().as_default() as graph:
      self.assertIs(eager_constants.constant(11, tf.int64).graph, graph)
    self.assertIs(eager_constants.constant(11, tf.int64), eager)


class ClientDatasetTest(tf.test.TestCase):

  def test_client_datasets_are_the_same_with_fresh_constants(self):
    task = _two_source_task()
    for round_num in range(4):
      shared = _elements(task.plan_dataset(_plan(round_num), _SPEC, (5, round_num)))
      with mock.patch.object(eager_constants, 'reused', _never_reused):
        fresh = _elements(task.plan_dataset(_plan(round_num), _SPEC, (5, round_num)))
      self.assertEqual(shared, fresh)
      self.assertLen(shared, 7)  # The first 100 examples of two epochs, in batches of 16.

  def test_fewer_eager_tensors_are_left_behind(self):
    # TF 2.14 under Python 3.11 keeps one 16-byte block of Python memory per eager tensor it made (traced by
    # tracemalloc): count those a client dataset leaves, its constants reused and (the control) made afresh.
    task = _two_source_task()

    def blocks_per_dataset(rounds) -> float:
      build = lambda r: task.plan_dataset(_plan(r), _SPEC, (5, 1000 + r))._as_serialized_graph()  # As TFF sends it.
      for round_num in rounds[:20]:  # Warm-up: the first datasets fill caches of their own.
        build(round_num)
      gc.collect()
      tracemalloc.start()
      before = tracemalloc.take_snapshot()
      for round_num in rounds[20:]:
        build(round_num)
      gc.collect()
      after = tracemalloc.take_snapshot()
      tracemalloc.stop()
      blocks = sum(stat.count_diff for stat in after.compare_to(before, 'lineno')
                   if stat.count_diff > 0 and 14 <= stat.size_diff / stat.count_diff <= 20)
      return blocks / len(rounds[20:])

    reused = blocks_per_dataset(list(range(220)))
    with mock.patch.object(eager_constants, 'reused', _never_reused):
      fresh = blocks_per_dataset(list(range(220, 440)))
    self.assertGreater(fresh, 50)  # The control: the leak is there to be avoided.
    self.assertLess(reused, 0.4 * fresh)  # Measured: 21 against 122.


if __name__ == '__main__':
  tf.test.main()
