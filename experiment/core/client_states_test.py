"""Tests the client-state store, the gathering of updated states (order, merge, worker memory) and FedEM's kept
mixture weights: numpy EM from the stored pi, positions, resume."""

import collections
import os
import subprocess
import sys

import numpy as np
from scipy import special
import tensorflow as tf
import tensorflow_federated as tff

from algorithms.core import client_state
from algorithms.core import learning_process
from algorithms.methods import fedem
from experiment.core import client_states
from experiment.core import run_directory
from models import multi_branch
from tasks import task as task_lib
from utils import execution_context

_SERVER_STEP = learning_process.ServerStep.named('adam', 0.1, 1e-3)


def _model_fn():
  extractor = tf.keras.Sequential([tf.keras.Input(shape=(3,)), tf.keras.layers.Dense(4, activation='tanh')])
  return multi_branch.build_multi_branch_model(extractor, 2, branch_units=3)


def _client(seed, size):
  rng = np.random.default_rng(seed)
  x = rng.normal(size=(size, 3)).astype(np.float32)
  y = rng.integers(0, 3, size).astype(np.int32)
  raw = tf.data.Dataset.from_tensor_slices(collections.OrderedDict(x=x, y=y))
  return x, y, task_lib.preprocess_client(raw, 0, tff.simulation.baselines.ClientSpec(1, 4), shuffle_seed=(0, seed))


def _numpy_em(model, x, y, pi, iterations):
  """Marfoq et al.'s E and M steps from `pi`, written out with scipy."""
  logits = model(x)['logits'].numpy()  # [N, K, C]
  losses = -(special.log_softmax(logits, axis=-1)[np.arange(len(y)), :, y])  # [N, K]
  log_pi = np.log(pi)
  for _ in range(iterations):
    log_q = special.log_softmax(log_pi - losses, axis=1)
    log_pi = special.logsumexp(log_q, axis=0) - np.log(len(y))
  return np.exp(log_pi)


# A child process that gathers argv[2] clients' elements of argv[3] floats with argv[1]'s pieces ('ours':
# `client_state.gather`; 'single': one stack growing by one element per client, the control) and prints how much the
# TFF worker's peak resident size (VmHWM) rose during the call, in MB.
_GATHER_CHILD = """
import collections, os, sys
import numpy as np
import tensorflow as tf
import tensorflow_federated as tff
from algorithms.core import client_state
from utils import execution_context

pieces, clients, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
execution_context.install()

@tff.tensorflow.computation(np.int32)
def element(i):
  return collections.OrderedDict(position=i, x=tf.fill([size], tf.cast(i, tf.float32)))

element_type = element.type_signature.result
stacked_type = client_state.gathered_type(element_type)

@tff.tensorflow.computation
def zero():
  return collections.OrderedDict(position=tf.zeros([0], tf.int32), x=tf.zeros([0, size]))

@tff.tensorflow.computation(stacked_type, element_type)
def accumulate(stacked, value):
  return collections.OrderedDict((key, tf.concat([stacked[key], value[key][tf.newaxis]], 0)) for key in stacked)

@tff.tensorflow.computation(stacked_type, stacked_type)
def merge(a, b):
  return collections.OrderedDict((key, tf.concat([a[key], b[key]], 0)) for key in a)

@tff.tensorflow.computation(stacked_type)
def report(stacked):
  return stacked

@tff.federated_computation(tff.FederatedType(np.int32, tff.CLIENTS))
def gathered(ids):
  elements = tff.federated_map(element, ids)
  if pieces == 'ours':
    return client_state.gather(elements)
  return tff.federated_aggregate(elements, zero(), accumulate, merge, report)

def status_mb(pid, field):
  with open(f'/proc/{pid}/status') as f:
    return next(int(line.split()[1]) for line in f if line.startswith(field)) / 1024

gathered([0])  # Starts the worker.
worker = execution_context.worker_pids(os.getpid())[0]
before = status_mb(worker, 'VmRSS')
result = gathered(list(range(clients)))
assert np.array_equal(result['position'], np.arange(clients))
print(status_mb(worker, 'VmHWM') - before)
"""


def _gathering_peak_mb(pieces: str, clients: int, size: int) -> float:
  env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), TF_CPP_MIN_LOG_LEVEL='3')
  return float(subprocess.run([sys.executable, '-c', _GATHER_CHILD, pieces, str(clients), str(size)], env=env,
                              capture_output=True, text=True, check=True).stdout.split()[-1])


class GatherTest(tf.test.TestCase):

  def _gathered(self, elements):
    element_type = tff.types.tensorflow_to_type(collections.OrderedDict(
        position=tf.TensorSpec([], tf.int32), x=tf.TensorSpec([3], tf.float32)))

    @tff.federated_computation(tff.FederatedType(element_type, tff.CLIENTS))
    def gathered(states):
      return client_state.gather(states)

    return gathered(elements)

  def test_gathered_elements_are_stacked_in_the_clients_order(self):
    rng = np.random.default_rng(0)
    for clients in (1, 31, 32, 33, 65, 97):  # Around and beyond the open stack's capacity (32).
      positions = rng.permutation(clients).astype(np.int32)
      values = rng.normal(size=(clients, 3)).astype(np.float32)
      result = self._gathered([collections.OrderedDict(position=p, x=v) for p, v in zip(positions, values)])
      self.assertAllEqual(result['position'], positions)
      self.assertAllEqual(result['x'], values)

  def test_merged_accumulators_equal_one_accumulation(self):
    # TFF merges accumulators when a round's clients run in several subrounds (workers); `merge` must keep order.
    element_type = tff.types.tensorflow_to_type(collections.OrderedDict(
        position=tf.TensorSpec([], tf.int32), x=tf.TensorSpec([2], tf.float32)))
    zero, accumulate, merge, report = client_state._collector(element_type)  # pylint: disable=protected-access
    rng = np.random.default_rng(1)
    elements = [collections.OrderedDict(position=np.int32(i), x=rng.normal(size=2).astype(np.float32))
                for i in range(100)]
    for split in (0, 5, 32, 40, 64, 100):
      parts = []
      for part in (elements[:split], elements[split:]):
        accumulator = zero()
        for element in part:
          accumulator = accumulate(accumulator, element)
        parts.append(accumulator)
      result = report(merge(*parts))
      self.assertAllEqual(result['position'], np.arange(100))
      self.assertAllEqual(result['x'], np.stack([element['x'] for element in elements]))

  def test_gathering_many_clients_keeps_the_workers_peak_memory_near_linear(self):
    # 330 clients of 16 KB: a single growing stack holds 0.5 m^2 elements' sizes at once (870 MB), ours about
    # m (16 + m / 64) elements (110 MB).
    single, ours = (_gathering_peak_mb(pieces, 330, 4000) for pieces in ('single', 'ours'))
    self.assertGreater(single, 500.0)
    self.assertLess(ours, 0.3 * single)


class ClientStateStoreTest(tf.test.TestCase):

  def test_new_clients_get_the_initial_state_and_updates_follow_positions(self):
    store = client_states.ClientStateStore({'pi': [0.5, 0.5]})
    self.assertAllClose(store.get('a')['pi'], [0.5, 0.5])
    # The round's states come back in any order; `position` says whose each is.
    store.update(['a', 'b', 'c'], {'position': np.array([2, 0]), 'pi': np.array([[0.1, 0.9], [0.7, 0.3]])})
    self.assertAllClose(store.get('c')['pi'], [0.1, 0.9])
    self.assertAllClose(store.get('a')['pi'], [0.7, 0.3])
    self.assertAllClose(store.get('b')['pi'], [0.5, 0.5])  # Not returned: unchanged.
    self.assertLen(store, 2)
    element = next(iter(store.datasets(['x', 'c'])[1]))
    self.assertEqual(int(element[client_state.POSITION]), 1)
    self.assertAllClose(element['pi'], [0.1, 0.9])

  def test_a_frozen_get_keeps_the_states_of_its_moment(self):
    store = client_states.ClientStateStore({'pi': [0.5, 0.5]})
    store.update(['a'], {'position': np.array([0]), 'pi': np.array([[0.1, 0.9]])})
    frozen = store.frozen_get()
    store.update(['a', 'b'], {'position': np.array([0, 1]), 'pi': np.array([[0.3, 0.7], [0.8, 0.2]])})
    self.assertAllClose(frozen('a')['pi'], [0.1, 0.9])
    self.assertAllClose(frozen('b')['pi'], [0.5, 0.5])  # Not there yet: the initial state.
    self.assertAllClose(store.get('a')['pi'], [0.3, 0.7])

  def test_snapshot_survives_a_checkpoint(self):
    for states in ({}, {'client_7': [0.2, 0.8], 'client_1': [0.6, 0.4]}):
      store = client_states.ClientStateStore({'pi': [0.5, 0.5]})
      ids = list(states)
      if ids:
        store.update(ids, {'position': np.arange(len(ids)), 'pi': np.array(list(states.values()))})
      checkpoints = run_directory.Checkpoints(self.create_tempdir().full_path)
      checkpoints.save({'process': np.zeros(2, np.float32), 'client_states': store.snapshot()}, 4)
      empty = client_states.ClientStateStore({'pi': [0.5, 0.5]})
      loaded, _, _ = checkpoints.load_latest({'process': np.zeros(2, np.float32), 'client_states': empty.snapshot()})
      restored = client_states.ClientStateStore({'pi': [0.5, 0.5]})
      restored.restore(loaded['client_states'])
      self.assertLen(restored, len(states))
      for client_id, pi in states.items():
        self.assertAllClose(restored.get(client_id)['pi'], pi)


class FedEmClientStateTest(tf.test.TestCase):

  def test_rounds_start_em_from_the_stored_weights(self):
    clients = [_client(seed, size) for seed, size in ((0, 9), (1, 6), (2, 11))]
    element_spec = clients[0][2].element_spec
    # Client learning rate 0: the losses of every round come from the same broadcast model.
    process = fedem.build_process(_model_fn, lambda batch: batch, element_spec, 0.0, _SERVER_STEP, num_branches=2,
                                  num_modes=1, em_iterations=2, keep_client_state=True)
    initial = learning_process.initial_weights(_model_fn, seed=3)
    state = process.set_model_weights(process.initialize(), initial)
    model = _model_fn()
    model.set_weights(list(initial.trainable))
    store = client_states.ClientStateStore(fedem.initial_client_state(2))
    ids = ['c0', 'c1', 'c2']
    expected = {client_id: np.array([0.5, 0.5]) for client_id in ids}
    for round_num in range(2):
      data = [collections.OrderedDict(dataset=dataset, client_state=state_dataset)
              for (_, _, dataset), state_dataset in zip(clients, store.datasets(ids))]
      output = process.next(state, data)
      measurements = dict(output.metrics['client_work'])
      store.update(ids, measurements.pop(client_state.CLIENT_STATES))
      for client_id, (x, y, _) in zip(ids, clients):
        expected[client_id] = _numpy_em(model, x, y, expected[client_id], iterations=2)
        self.assertAllClose(store.get(client_id)['pi'], expected[client_id], atol=1e-5,
                            msg=f'round {round_num}, {client_id}')
      self.assertIn('train_loss', measurements)
    # Two rounds of 2 iterations from the stored pi are 4 iterations from uniform, unlike 2 from uniform.
    x, y, _ = clients[0]
    self.assertAllClose(expected['c0'], _numpy_em(model, x, y, np.array([0.5, 0.5]), iterations=4), atol=1e-5)
    self.assertNotAllClose(expected['c0'], _numpy_em(model, x, y, np.array([0.5, 0.5]), iterations=2))


if __name__ == '__main__':
  execution_context.install()
  tf.test.main()
