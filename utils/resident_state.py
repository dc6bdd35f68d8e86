"""A learning process's state kept in TFF's worker between rounds: only a round's data and metrics cross.

TFF's synchronous context (`execution_context.install`) sends every argument of a call to its C++ worker and reads
the whole result back, so a round `process.next(state, data)` sends the state (the model, the server optimizer's
state, the method's state) out and takes the new one back: on CIFAR's ResNet-18 with FedAdam 3 x 45 MB each way,
every round. `ResidentRounds` makes the same calls through the executor that context uses
(`tff.framework.SyncExecutionContext.executor_factory`, TFF's `RemoteExecutor` on the local worker), keeping the
state on the worker as a value reference:

  round 1      the state goes to the worker once (`create_value`);
  round t      the call takes round t - 1's result state by reference with round t's data; the worker returns the
               round's metrics and one flag, whether every float of the new state is finite (the training loop's
               numeric check); the new state stays there;
  on demand    `state()` reads the state (evaluation and checkpoint rounds, a numeric fault, the end of the run).

TFF's C++ executor keeps a value's inputs alive with it (a call's result holds its argument), so a state passed by
reference round after round would keep every earlier round's state in the worker's memory (for a model of
CIFAR's ResNet-18 size, hundreds of MB a round, until the kernel kills the worker). So the state is sent
whole again every `resend_every` rounds (default 8, the training loop's default evaluation and checkpoint cadence,
on whose rounds the state is read anyway), which cuts that chain: the worker holds at most that many rounds'
states.

The worker runs the same computation, compiled the same way (`execution_context.compile_for_simulation`), on the
same values, so every result equals the context's call bit for bit (tested against it). The worker keeps one
executor per number of clients: a round with another number (a census round of every party) moves the state to
that executor, by reading it back and sending it once.

A worker that stops (killed, out of memory) takes the state with it. Where TFF's context restarts its worker and
retries the call with the arguments it still holds, `ResidentRounds` raises `WorkerLost` (after dropping the
executor, so that the next call starts a new worker), and the training loop resumes from its newest checkpoint.
"""

import asyncio
import collections
import weakref

import tensorflow as tf
import tensorflow_federated as tff
# pylint: disable=g-direct-tensorflow-import
from tensorflow_federated.python.core.impl.executors import cardinalities_utils  # Not public in 0.87.
from tensorflow_federated.python.core.impl.executors import executors_errors  # Not public in 0.87.
from tensorflow_federated.python.core.impl.types import type_conversions  # Not public in 0.87.
# pylint: enable=g-direct-tensorflow-import

from utils import execution_context


class WorkerLost(RuntimeError):
  """TFF's worker stopped answering, and the state it held is gone."""


def _finite_flag_fn(state_type: tff.Type) -> tff.Computation:
  """(state) -> whether every float of it is finite, as a TF computation on the state's member type."""

  @tff.tensorflow.computation(state_type)
  def all_finite(state):
    leaves = [tf.convert_to_tensor(leaf) for leaf in tf.nest.flatten(state)]
    return tf.reduce_all([tf.reduce_all(tf.math.is_finite(leaf)) for leaf in leaves if leaf.dtype.is_floating])

  return all_finite


# The compiled round of each `next_fn` still in use: a run that reuses a build (`experiment.core.built_methods`)
# reuses its compilation too, which is most of what such a run's start costs.
_compiled_rounds: 'weakref.WeakKeyDictionary[tff.Computation, tff.Computation]' = weakref.WeakKeyDictionary()


def _compiled_round(next_fn: tff.Computation) -> tff.Computation:
  """`next_fn` followed by the finite flag of its new state, compiled as TFF's context compiles (module
  docstring); one compilation per `next_fn` (equal computations share it, as in TFF's own compiler cache)."""
  if next_fn not in _compiled_rounds:
    state_type, data_type = next_fn.type_signature.parameter
    finite = _finite_flag_fn(state_type.member)

    @tff.federated_computation(state_type, data_type)
    def round_with_check(state, client_data):
      output = next_fn(state, client_data)
      return output.state, output.metrics, tff.federated_map(finite, output.state)

    _compiled_rounds[next_fn] = execution_context.compile_for_simulation(round_with_check)
  return _compiled_rounds[next_fn]


def _executor_factory():
  """The executor factory of the current context (`execution_context.install`'s, on this process's worker)."""
  return tff.framework.get_context_stack().current.executor_factory


class ResidentRounds:
  """`next_fn(state, data) -> LearningProcessOutput(state, metrics)` called round after round with the state left on
  TFF's local worker and sent whole every `resend_every` rounds (module docstring); `state` is the first round's
  input, in Python."""

  def __init__(self, next_fn: tff.Computation, state, resend_every: int = 8):
    state_type, data_type = next_fn.type_signature.parameter
    self._computation = _compiled_round(next_fn)
    self._state_type, self._data_type = state_type, data_type
    self._metrics_type = next_fn.type_signature.result.metrics
    self._state, self._state_value = None, state  # The state on the worker (a value reference) or in Python.
    self._previous, self._previous_value = None, None  # The state before the last round, kept for a fault.
    self._executor, self._cardinalities, self._computation_value = None, None, None
    self._resend_every, self._rounds_since_sent = resend_every, 0
    self.finite = True  # Whether every float of the current state is finite.

  def next(self, client_data) -> collections.OrderedDict:
    """Runs one round on `client_data` (a list of datasets, one per client); returns its metrics."""
    return self._run(self._next(client_data))

  def state(self):
    """The current state, in Python (read from the worker once per round at most)."""
    if self._state_value is None:
      self._state_value = self._run(self._read(self._state))
    return self._state_value

  def previous_state(self):
    """The state before the last round, in Python."""
    if self._previous_value is None:
      self._previous_value = self._run(self._read(self._previous))
    return self._previous_value

  def _run(self, coroutine):
    try:
      return asyncio.run(coroutine)
    except executors_errors.RetryableError as error:  # What TFF's context retries after restarting its worker.
      if self._cardinalities is not None:
        _executor_factory().clean_up_executor(self._cardinalities)
      code = getattr(error, 'code', None)
      raise WorkerLost(f'TFF\'s worker stopped answering ({code().name if code else type(error).__name__})'
                       ) from error

  async def _next(self, client_data):
    data = tff.tensorflow.transform_args(client_data)
    cardinalities = cardinalities_utils.infer_cardinalities(data, self._data_type)
    executor = _executor_factory().create_executor(cardinalities)
    if executor is not self._executor or self._rounds_since_sent >= self._resend_every:
      value = self._state_value if self._state_value is not None else await self._read(self._state)
      self._state, self._state_value, self._rounds_since_sent = await executor.create_value(
          value, self._state_type), value, 0
    if executor is not self._executor:
      self._computation_value = await executor.create_value(self._computation, self._computation.type_signature)
      self._executor, self._cardinalities = executor, cardinalities
    argument = await executor.create_struct(tff.structure.Struct([
        ('state', self._state), ('client_data', await executor.create_value(data, self._data_type))]))
    result = await executor.create_call(self._computation_value, argument)
    self._previous, self._previous_value = self._state, self._state_value
    self._state, self._state_value = await executor.create_selection(result, 0), None
    self._rounds_since_sent += 1
    metrics = await (await executor.create_selection(result, 1)).compute()
    self.finite = bool(await (await executor.create_selection(result, 2)).compute())
    return tff.tensorflow.transform_result(type_conversions.type_to_py_container(metrics, self._metrics_type))

  async def _read(self, reference):
    value = await reference.compute()
    return tff.tensorflow.transform_result(type_conversions.type_to_py_container(value, self._state_type))
