"""`client_training.single_element`: the element `get_single_element` reads, without the worker memory it keeps."""

import os
import subprocess
import sys

from absl.testing import absltest
import numpy as np
import tensorflow as tf

from algorithms.core import client_training

# A child process that sends 100 client datasets, each with a `map` traced on the driver (as label thinning's
# filter is), to TFF's worker in each of 9 calls; each client reads its data as one ragged batch with argv[1]'s
# reader ('iterator': `single_element`; 'get_single_element': the control). Prints the sum of every call's totals
# and the worker's resident growth after the first call, in MB.
_WORKER_CHILD = """
import os, sys
import numpy as np
import tensorflow as tf
import tensorflow_federated as tff
from algorithms.core import client_training
from tests import worker_calls
from utils import execution_context

execution_context.install()
arrays = [np.random.default_rng(i).normal(size=(60, 4)).astype(np.float32) for i in range(100)]

def client_dataset(array, call):
  return tf.data.Dataset.from_tensor_slices(array).map(lambda x: x * tf.cast(call, tf.float32)).batch(20)

sequence_type = tff.SequenceType(tff.TensorType(np.float32, [None, 4]))

@tff.tensorflow.computation(sequence_type)
def client_total(batches):
  ragged = batches.ragged_batch(1 << 30)
  if sys.argv[1] == 'iterator':
    return tf.reduce_sum(client_training.single_element(ragged).values)
  return tf.reduce_sum(client_training.without_rewrites(ragged).get_single_element().values)

total = worker_calls.federated_total(client_total, sequence_type)
grand_total = 0.0
for call in range(1, 10):
  grand_total += float(total([client_dataset(array, call) for array in arrays]))
  execution_context.release_eager_caches()
  if call == 1:
    worker = execution_context.worker_pids(os.getpid())[0]
    first = worker_calls.rss_mb(worker)
print(grand_total, worker_calls.rss_mb(worker) - first)
"""


class SingleElementTest(tf.test.TestCase):

  def _ragged_batch(self):
    examples = np.arange(14, dtype=np.float32).reshape(7, 2)
    return tf.data.Dataset.from_tensor_slices(examples).batch(3).ragged_batch(1 << 30), examples

  def test_reads_the_one_element_inside_a_tf_function(self):
    dataset, examples = self._ragged_batch()
    read = tf.function(client_training.single_element, autograph=False)(dataset)
    self.assertAllEqual(read.row_lengths(), [3, 3, 1])
    self.assertAllEqual(read.values, examples)

  def test_reads_the_one_element_in_a_graph_that_is_not_a_function(self):
    with tf.Graph().as_default():  # The graph TFF traces a `tff.tensorflow.computation` into.
      dataset, examples = self._ragged_batch()
      self.assertAllEqual(self.evaluate(client_training.single_element(dataset).values), examples)

  def test_worker_memory_stays_flat_over_client_datasets_with_driver_functions(self):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), TF_CPP_MIN_LOG_LEVEL='3')
    (ours_total, ours), (control_total, control) = (
        (float(value) for value in subprocess.run([sys.executable, '-c', _WORKER_CHILD, reader], env=env,
                                                  capture_output=True, text=True, check=True).stdout.split())
        for reader in ('iterator', 'get_single_element'))
    expected = sum(np.random.default_rng(i).normal(size=(60, 4)).astype(np.float32).sum() for i in range(100)) * 45
    self.assertAllClose([ours_total, control_total], [expected, expected], rtol=1e-4)
    self.assertGreater(control, 30.0)  # About 65 KB a client dataset kept (800 after the first call).
    self.assertLess(ours, 10.0)


if __name__ == '__main__':
  tf.test.main()
