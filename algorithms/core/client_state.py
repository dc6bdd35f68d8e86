"""Client work for methods that keep state on their clients (FedEM's mixture weights; later FedGMM, ShiftEx).

A method's per-client state is a structure of float32 arrays, the same shape for every client (e.g. pi [K]). The
training loop keeps it in one store (`experiment.core.client_states`), keyed by client id and checkpointed with the run.
TFF's templates accept only sequences as client data, so each participating client receives its state as a
one-element dataset beside its training data:

  client data   OrderedDict(dataset=<the client's batches>,
                            client_state=<one element {'position', 'trains', 'census', **state}>)

where `position` is the client's index in the round's list, `trains` 1 for the round's participants and 0 for a
party that only reports (a census round's other parties: every party of the population reports its statistics
in such a round, for methods that ask for it, e.g. ShiftEx's window boundaries), and `census` 1 in a census
round. The updated states return through the client work's measurements: `client_states` = {'position': [m],
**state fields [m, ...]}, gathered with `federated_aggregate` and a concatenating accumulator. That is a per-client
value at the server, which the simulation needs to hand it back to the store (a deployment would keep it on the
client); no method may read it, and the training loop removes it from the metrics it writes.
"""

import collections
from typing import Callable

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from algorithms.core import client_training
from algorithms.core import learning_process

POSITION = 'position'
TRAINS = 'trains'
CENSUS = 'census'
CLIENT_STATES = 'client_states'
_OPEN_ROWS = 32  # Elements a gathering accumulator's `open` stack holds before it is sealed (`_collector`).


def element(state: dict, position: int, trains: bool = True, census: bool = False) -> collections.OrderedDict:
  """The client-state element of the client at `position` (numpy)."""
  return collections.OrderedDict([(POSITION, np.int32(position)), (TRAINS, np.float32(trains)),
                                  (CENSUS, np.float32(census))] +
                                 [(key, typed(value)) for key, value in state.items()])


def typed(value) -> np.ndarray:
  """A client-state field as an array of the suite's dtypes: float32 values, int32 counts and ids, bool flags."""
  value = np.asarray(value)
  if value.dtype.kind == 'f':
    return value.astype(np.float32)
  return value.astype(np.int32) if value.dtype.kind in 'iu' else value


def client_data_type(element_spec, initial_state: dict) -> tff.StructWithPythonType:
  """The TFF type of a stateful client's data: its batches and its one-element state dataset."""
  state_spec = collections.OrderedDict([(POSITION, tf.TensorSpec([], tf.int32)),
                                        (TRAINS, tf.TensorSpec([], tf.float32)),
                                        (CENSUS, tf.TensorSpec([], tf.float32))] + [
      (key, tf.TensorSpec(np.shape(value), tf.as_dtype(typed(value).dtype))) for key, value in initial_state.items()])
  return tff.StructWithPythonType(
      [('dataset', learning_process.client_data_type(element_spec)),
       ('client_state', tff.SequenceType(tff.types.tensorflow_to_type(state_spec)))], collections.OrderedDict)


def read(state_dataset: tf.data.Dataset) -> dict:
  """The client's state element from its one-element dataset (inside the client's `tf.function`)."""
  return client_training.single_element(state_dataset)


def gathered_type(element_type: tff.Type) -> tff.StructWithPythonType:
  """The type of elements of `element_type` from every client, stacked: {key: [m, ...]} (`gather`)."""
  return tff.StructWithPythonType(
      [(key, tff.TensorType(value.dtype, [None] + list(value.shape))) for key, value in tff.structure.iter_elements(
          element_type)], collections.OrderedDict)


def _collector(element_type: tff.Type):
  """federated_aggregate pieces that stack the clients' elements into {key: [m, ...]}, in the clients' order.

  TFF's C++ executor accumulates the clients one after another and keeps every intermediate accumulator alive until
  the aggregate's result is released (a call's result holds its argument). A single stack growing by one element
  per client would hold 1 + 2 + ... + m elements, 0.5 m^2 element sizes: 3.5 GB on the worker for 660 clients of
  16 KB each. So the accumulator is two stacks, `sealed` and `open`: a client's element is appended to `open`, and
  when `open` holds `_OPEN_ROWS` elements it is appended to `sealed` (which otherwise passes through uncopied). The
  intermediates then hold about m (`_OPEN_ROWS` / 2 + m / (2 `_OPEN_ROWS`)) elements: 26 m for 660 clients, 1/13
  of the single stack. The stacked result (`sealed` then `open`) is the single stack's, element for element.
  """
  stacked_type = gathered_type(element_type)
  keys = [key for key, _ in tff.structure.iter_elements(element_type)]
  accumulator_type = tff.StructWithPythonType([('sealed', stacked_type), ('open', stacked_type)],
                                              collections.OrderedDict)

  def joined(*stacks):
    return collections.OrderedDict((key, tf.concat([stack[key] for stack in stacks], axis=0)) for key in keys)

  @tff.tensorflow.computation
  def zero():
    empty = collections.OrderedDict((key, tf.zeros([0] + list(value.shape), value.dtype))
                                    for key, value in tff.structure.iter_elements(element_type))
    return collections.OrderedDict(sealed=empty, open=empty)

  @tff.tensorflow.computation(accumulator_type, element_type)
  def accumulate(accumulator, value):
    sealed, open_stack = accumulator['sealed'], joined(
        accumulator['open'], collections.OrderedDict((key, value[key][tf.newaxis]) for key in keys))
    empty = collections.OrderedDict((key, tensor[:0]) for key, tensor in open_stack.items())
    return tf.cond(tf.shape(open_stack[keys[0]])[0] < _OPEN_ROWS,
                   lambda: collections.OrderedDict(sealed=sealed, open=open_stack),
                   lambda: collections.OrderedDict(sealed=joined(sealed, open_stack), open=empty))

  @tff.tensorflow.computation(accumulator_type, accumulator_type)
  def merge(a, b):
    return collections.OrderedDict(sealed=joined(a['sealed'], a['open'], b['sealed']), open=b['open'])

  @tff.tensorflow.computation(accumulator_type)
  def report(accumulator):
    return joined(accumulator['sealed'], accumulator['open'])

  return zero, accumulate, merge, report


def gather(states):
  """The clients' updated state elements (CLIENTS-placed), stacked at the server as {key: [m, ...]}: the value of
  the `client_states` measurement. Call inside a `tff.federated_computation`."""
  zero, accumulate, merge, report = _collector(states.type_signature.member)
  return tff.federated_aggregate(states, zero(), accumulate, merge, report)


def with_gathered(metrics, states):
  """Server-placed `metrics` (a struct) with the clients' gathered states added under `client_states`, for a client
  work whose measurements the training loop reads. Call inside a `tff.federated_computation`."""
  collected = gather(states)

  @tff.tensorflow.computation(metrics.type_signature.member, collected.type_signature.member)
  def merge(values, stacked):
    return collections.OrderedDict(values, **{CLIENT_STATES: stacked})

  return tff.federated_map(merge, (metrics, collected))


def client_work(client_update: tff.Computation,
                metrics_fn: Callable[[dict], dict]) -> tff.learning.templates.ClientWorkProcess:
  """The client work of a method with client state and no server state of its own.

  `client_update` is a TFF computation (weights, client data of `client_data_type`) -> (ClientResult, metric sums,
  updated state element with its `position`). The sums are aggregated with `federated_sum` and finalized by
  `metrics_fn` (TF) at the server; the updated states are gathered into the `client_states` measurement, beside
  the metrics.
  """
  weights_type, data_type = client_update.type_signature.parameter
  _, sums_type, element_type = client_update.type_signature.result
  report = _collector(element_type)[3]

  @tff.tensorflow.computation(sums_type, report.type_signature.result)
  def finalize(sums, states):
    return collections.OrderedDict(metrics_fn(sums), **{CLIENT_STATES: states})

  initialize = learning_process.empty_server_state()

  @tff.federated_computation(initialize.type_signature.result, tff.FederatedType(weights_type, tff.CLIENTS),
                             tff.FederatedType(data_type, tff.CLIENTS))
  def next_fn(state, weights, client_data):
    result, sums, states = tff.federated_map(client_update, (weights, client_data))
    collected = gather(states)
    measurements = tff.federated_map(finalize, (tff.federated_sum(sums), collected))
    return tff.templates.MeasuredProcessOutput(state, result, measurements)

  return tff.learning.templates.ClientWorkProcess(initialize, next_fn)


def summed_statistics_work(initial_state, client_round: tff.Computation,
                           server_update: tff.Computation) -> tff.learning.templates.ClientWorkProcess:
  """The client work of a method whose server state (a clustering model) is updated from the clients' sums.

  `client_round` is a TFF computation (weights, server state, client data) -> (ClientResult, statistics, metric
  sums[, updated client-state element]); `server_update` (server state, summed statistics, summed metric sums) ->
  (new server state, metrics). Per round: broadcast the state, run the clients, `federated_sum` their statistics
  and sums, update the state at the server; with a fourth client output, the updated client states are gathered
  into the `client_states` measurement (`with_gathered`).
  """
  weights_type, state_type, data_type = client_round.type_signature.parameter
  with_client_states = len(client_round.type_signature.result) == 4

  @tff.federated_computation
  def initialize():
    return tff.federated_value(initial_state, tff.SERVER)

  @tff.federated_computation(tff.FederatedType(state_type, tff.SERVER), tff.FederatedType(weights_type, tff.CLIENTS),
                             tff.FederatedType(data_type, tff.CLIENTS))
  def next_fn(state, weights, client_data):
    outputs = tff.federated_map(client_round, (weights, tff.federated_broadcast(state), client_data))
    new_state, metrics = tff.federated_map(server_update, (state, tff.federated_sum(outputs[1]),
                                                           tff.federated_sum(outputs[2])))
    if with_client_states:
      metrics = with_gathered(metrics, outputs[3])
    return tff.templates.MeasuredProcessOutput(new_state, outputs[0], metrics)

  return tff.learning.templates.ClientWorkProcess(initialize, next_fn)


def gathered_reports_work(initial_state, next_round: tff.Computation, client_round: tff.Computation,
                          server_update: tff.Computation) -> tff.learning.templates.ClientWorkProcess:
  """The client work of a method whose server decides from each client's report (CFL's split, ShiftEx's
  assignment), the methods' own protocols, which send per-client values to the server.

  `next_round` (TF: server state -> (state for this round, what the clients receive)); `client_round` (weights,
  received value, client data) -> (ClientResult, report, metric sums[, updated client-state element]);
  `server_update` (state, the reports stacked {key: [m, ...]}, summed metric sums) -> (new state, metrics). With a
  fourth client output, the updated client states are gathered into the `client_states` measurement.
  """
  weights_type, _, data_type = client_round.type_signature.parameter
  with_client_states = len(client_round.type_signature.result) == 4

  @tff.federated_computation
  def initialize():
    return tff.federated_value(initial_state, tff.SERVER)

  @tff.federated_computation(initialize.type_signature.result, tff.FederatedType(weights_type, tff.CLIENTS),
                             tff.FederatedType(data_type, tff.CLIENTS))
  def next_fn(state, weights, client_data):
    counted = tff.federated_map(next_round, state)
    outputs = tff.federated_map(client_round, (weights, tff.federated_broadcast(counted[1]), client_data))
    new_state, metrics = tff.federated_map(server_update, (counted[0], gather(outputs[1]),
                                                           tff.federated_sum(outputs[2])))
    if with_client_states:
      metrics = with_gathered(metrics, outputs[3])
    return tff.templates.MeasuredProcessOutput(new_state, outputs[0], metrics)

  return tff.learning.templates.ClientWorkProcess(initialize, next_fn)
