"""Helpers shared by the benchmarks: a run's data as `run_experiment` builds it (the same sampled clients for every
implementation), timing, and an EMNIST-shaped workload (random 28x28 images, 62 classes, clients of 100-200
examples, the paper's EMNIST CNN)."""

import collections
import tempfile
import time
from typing import Callable, Optional

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff
# pylint: disable=g-direct-tensorflow-import
from tensorflow_federated.python.core.impl.executors import remote_executor_grpc_stub  # Not public in 0.87.
# pylint: enable=g-direct-tensorflow-import

from algorithms.core import client_state
from algorithms.core import learning_process
from algorithms.core import objectives
from experiment.core import assembly
from models import emnist_cnn
from periodic_shift import periodic
from periodic_shift import scenario as scenario_lib
from periodic_shift import scenarios
from tasks import task as task_lib
from utils import resident_state

BATCH_SIZE = 20
WARMUP_ROUNDS = 3
# run_experiment flags a method needs beyond its defaults: these need a scenario whose domains are time stages.
METHOD_FLAGS = {'local': ['--scenario=evolving_domains'], 'fedevolve': ['--scenario=evolving_domains']}


def run_data(task: str, scenario: str, scenario_settings, rounds: int, clients_per_round: int,
             batch_size: int = BATCH_SIZE, cache_dir: Optional[str] = None, **training) -> tuple[task_lib.Task, list]:
  """(the task with the scenario's domains, per round 1..`rounds` its participants' datasets) of the run
  `run_experiment` makes with these settings (seed 0; `training`: more `assembly.TrainingConfig` fields), built by
  `experiment.core.assembly.build_data`, the run's own data path."""
  with tempfile.TemporaryDirectory() as root:  # `resolve` reads the (absent) run directory; nothing is written.
    config = assembly.ExperimentConfig(
        task=assembly.TaskChoice(task=task, cache_dir=cache_dir),
        scenario=assembly.ScenarioChoice(scenario, settings=scenario_settings),
        training=assembly.TrainingConfig(total_rounds=rounds, clients_per_round=clients_per_round,
                                         client_batch_size=batch_size, seed=0, **training),
        outputs=assembly.OutputConfig(root_output_dir=root))
    data = assembly.build_data(assembly.resolve(config))
  return data.task, [data.round_datasets(round_num) for round_num in range(1, rounds + 1)]


def periodic_workload(name: str, rounds: int, clients_per_round: int) -> tuple[task_lib.Task, list]:
  """(task, per round its participants' datasets) under the periodic scenario's defaults, for a registered task
  (`run_data`) or `emnist_shaped` (`emnist_shaped_task`)."""
  if name == 'emnist_shaped':
    task = emnist_shaped_task()
    return task, round_datasets(task, rounds, clients_per_round)
  return run_data(name, 'periodic', None, rounds, clients_per_round)


def round_datasets(task, rounds, clients_per_round, batch_size=BATCH_SIZE, max_elements=None):
  """Per round, the participants' datasets of the periodic scenario (its defaults: linear shift, p = 1, T = 32) over
  `task`, a workload not in the task registry (`emnist_shaped_task`); `(raw_batch, mode)` elements."""
  scenario = scenarios.build('periodic', periodic.Settings(), task.population(),
                             scenario_lib.Schedule(clients_per_round, seed=0, total_rounds=rounds, period=32))
  spec = tff.simulation.baselines.ClientSpec(num_epochs=1, batch_size=batch_size, max_elements=max_elements)
  return [[task.plan_dataset(plan, spec, shuffle_seed=(0, round_num * 1000 + i))
           for i, plan in enumerate(scenario.round_plan(round_num).clients)] for round_num in range(1, rounds + 1)]


def seconds_per_round(step, rounds):
  """Mean seconds of `step(round)` over `rounds` after the first WARMUP_ROUNDS."""
  return wall_and_core_seconds_per_round(step, rounds)[0]


def wall_and_core_seconds_per_round(step, rounds, warmup: int = WARMUP_ROUNDS) -> tuple[float, float]:
  """(mean wall seconds, mean CPU seconds of this process's threads, all cores summed) of `step(round)` over
  `rounds` after the first `warmup`."""
  for datasets in rounds[:warmup]:
    step(datasets)
  started, started_cpu = time.perf_counter(), time.process_time()
  for datasets in rounds[warmup:]:
    step(datasets)
  timed = len(rounds) - warmup
  return (time.perf_counter() - started) / timed, (time.process_time() - started_cpu) / timed


def plain_tf_step(model_fn, batch_fn, rounds, learning_rate: float,
                  read_in_round: bool = False) -> tuple[Callable[[list], list], list]:
  """(step, its rounds): a round of the suite's client steps in plain TensorFlow, with no federation, and the
  rounds it takes. The step is an eager loop over each client's batches, one `tf.function` SGD step per batch on
  the suite's objective (`objectives.averaged_branches`) from the same initial weights, then the mean of the
  clients' deltas. Its rounds are `rounds`' client datasets as lists of batches materialized beforehand, or, with
  `read_in_round`, as input pipelines read inside the step, as the suite's worker reads them."""
  model = model_fn()
  variables = model.trainable_variables
  initial = [v.numpy() for v in variables]

  @tf.function
  def sgd_step(batch):
    with tf.GradientTape() as tape:
      loss = objectives.averaged_branches(model(batch['x'], training=True), batch).loss
    for variable, gradient in zip(variables, tape.gradient(loss, variables)):
      if isinstance(gradient, tf.IndexedSlices):  # An embedding's rows: a sparse step, as Keras's SGD takes it.
        variable.scatter_sub(tf.IndexedSlices(learning_rate * gradient.values, gradient.indices))
      else:
        variable.assign_sub(learning_rate * gradient)

  batch_rounds = [[task_lib.model_batches(d, batch_fn) for d in datasets] for datasets in rounds]
  if not read_in_round:
    batch_rounds = [[list(batches) for batches in clients] for clients in batch_rounds]

  def step(clients):
    deltas = []
    for batches in clients:
      for variable, value in zip(variables, initial):
        variable.assign(value)
      for batch in batches:
        sgd_step(batch)
      deltas.append([value - variable for variable, value in zip(variables, initial)])
    return [tf.reduce_mean(layer, axis=0) for layer in zip(*deltas)]

  return step, batch_rounds


def emnist_shaped_task(seed=0, clients_per_mode=60):
  rng = np.random.default_rng(seed)
  train_data, sizes = [], []
  for mode in range(2):
    clients = {}
    for i in range(clients_per_mode):
      n = int(rng.integers(100, 200))
      clients[f'{mode}_{i}'] = collections.OrderedDict(
          x=rng.uniform(size=(n, 28, 28, 1)).astype(np.float32), y=rng.integers(0, 62, n).astype(np.int32))
    train_data.append(tff.simulation.datasets.TestClientData(clients))
    sizes.append({client_id: len(data['y']) for client_id, data in clients.items()})
  test = tf.data.Dataset.from_tensor_slices(collections.OrderedDict(
      x=np.zeros((64, 28, 28, 1), np.float32), y=np.zeros(64, np.int32)))
  return task_lib.Task(name='emnist_shaped', train_data=train_data, client_sizes=sizes, test_data=[test, test],
                       test_sizes=[64, 64], batch_fn=lambda batch: batch, model_fn=emnist_cnn.create_model,
                       num_classes=62)


def ratio_line(workload: str, seconds: dict, base: str) -> str:
  """'<workload>  <method> <s> s (<ratio>x) ...' with every method's seconds per round over `base`'s."""
  return workload + '  ' + '  '.join(f'{name} {value:.3f} s ({value / seconds[base]:.2f}x)'
                                     for name, value in seconds.items())


def process_step(model_fn, process, state_on_worker: bool = True) -> Callable[[list], None]:
  """A round of a learning process's `next` as the training loop runs it, from its seeded initial weights: with the
  state kept on TFF's worker (`utils.resident_state`, the default) or going there and back every round."""
  state = process.set_model_weights(process.initialize(), learning_process.initial_weights(model_fn, 0))
  if state_on_worker:
    return resident_state.ResidentRounds(process.next, state).next
  states = [state]

  def step(datasets):
    states[0] = process.next(states[0], datasets).state

  return step


def process_seconds_per_round(model_fn, process, rounds, state_on_worker: bool = True):
  """`seconds_per_round` of `process_step`."""
  return seconds_per_round(process_step(model_fn, process, state_on_worker), rounds)


class WorkerTraffic:
  """Counts the bytes of the messages to TFF's worker and back (gRPC requests and responses of TFF's
  `RemoteExecutorGrpcStub`, the Python side of every worker call) while in its `with` block."""

  _METHODS = ('create_value', 'create_call', 'create_struct', 'create_selection', 'compute')

  def __init__(self):
    self.sent = self.received = 0

  def __enter__(self):
    self._originals = {name: getattr(remote_executor_grpc_stub.RemoteExecutorGrpcStub, name)
                       for name in self._METHODS}
    for name, original in self._originals.items():
      setattr(remote_executor_grpc_stub.RemoteExecutorGrpcStub, name, self._counting(original))
    return self

  def __exit__(self, *exc_info):
    for name, original in self._originals.items():
      setattr(remote_executor_grpc_stub.RemoteExecutorGrpcStub, name, original)

  def _counting(self, method):
    def counted(stub, request):
      response = method(stub, request)
      self.sent += request.ByteSize()
      self.received += response.ByteSize()
      return response
    return counted


def mebibytes_per_round(step: Callable[[list], None], datasets: list) -> tuple[float, float]:
  """(MiB sent to TFF's worker, MiB received from it) in one `step(datasets)` (`WorkerTraffic`)."""
  with WorkerTraffic() as traffic:
    step(datasets)
  return traffic.sent / 2**20, traffic.received / 2**20


def with_client_states(rounds, initial_state: dict):
  """Per round, each client's data with `initial_state` as its client state (the round's computation is the same
  whatever the state holds)."""
  return [[collections.OrderedDict(dataset=dataset, client_state=tf.data.Dataset.from_tensors(
      client_state.element(initial_state, position))) for position, dataset in enumerate(datasets)]
          for datasets in rounds]
