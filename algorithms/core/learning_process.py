"""Composes a method's client work with TFF's broadcast, the model aggregator and the server optimizer given to it.

Every method in the suite is a `tff.learning.templates.LearningProcess` made of four typed pieces
(`tff.learning.templates.compose_learning_process`):

  broadcast    `tff.learning.templates.build_broadcast_process` of the model weights;
  client work  the method's own `ClientWorkProcess`: its server state holds whatever the method adds to the model
               (clustering model, temporal-prior state), which it broadcasts, updates and reports itself;
  aggregator   the model aggregator given to the method (`ServerStep.model_aggregator`, a `tff.aggregators`
               factory: the example-weighted mean, TFF's DP-FedAvg or secure aggregator), or the method's own;
  finalizer    `tff.learning.templates.build_apply_optimizer_finalizer` with the server optimizer given to the
               method (`ServerStep.optimizer`, a `tff.learning.optimizers.Optimizer`: FedAdam by default, SGD with or
               without momentum, Adagrad, Yogi; `build_server_optimizer`).

As TFF's own builders take `server_optimizer_fn` and `model_aggregator`, a method never chooses these itself: the
assembler builds them from `--server_optimizer` and `--aggregator` and every method composes them.

A method whose round has an aggregation that depends on another (FedTEM: its threshold comes from the collected
ranking keys and decides a second sum) also offers the same round as two computations (`compose_split_round`), so
that TFF can run its clients on several workers.
"""

import collections
import dataclasses
import functools
from typing import Callable, NamedTuple, Optional
import weakref


import tensorflow as tf
import tensorflow_federated as tff
# pylint: disable=g-direct-tensorflow-import
from tensorflow_federated.python.aggregators import factory_utils  # as_weighted_aggregator: not public in 0.87.
# pylint: enable=g-direct-tensorflow-import

from models import multi_branch

ModelFn = Callable[[], tf.keras.Model]


class _ModelFacts(NamedTuple):
  weights_type: tff.types.StructWithPythonType
  feature_dim: Optional[int]  # D of a multi-branch model's features [B, D]; None for a model without them.


# One build per model function (a Keras model takes 0.1-0.3 s to build, and a method asks for these facts 2-4
# times). Weak keys: an entry goes with its function, so a process that runs many experiments keeps no task alive.
_MODEL_FACTS: 'weakref.WeakKeyDictionary[ModelFn, _ModelFacts]' = weakref.WeakKeyDictionary()


def _model_facts(model_fn: ModelFn) -> _ModelFacts:
  """The static facts of the Keras model built by `model_fn`, from one build in a throwaway graph."""
  facts = _MODEL_FACTS.get(model_fn)
  if facts is None:
    with tf.Graph().as_default():
      model = model_fn()
      weights = tff.learning.models.ModelWeights.from_model(model)
      specs = tf.nest.map_structure(lambda v: tf.TensorSpec(v.shape, v.dtype), weights)
      features = model.output_shape.get(multi_branch.FEATURES) if isinstance(model.output_shape, dict) else None
    facts = _ModelFacts(tff.types.tensorflow_to_type(specs), None if features is None else int(features[-1]))
    _MODEL_FACTS[model_fn] = facts
  return facts


def model_weights_type(model_fn: ModelFn) -> tff.types.StructWithPythonType:
  """The TFF type of `tff.learning.models.ModelWeights` of the Keras model built by `model_fn`."""
  return _model_facts(model_fn).weights_type


def client_data_type(element_spec) -> tff.SequenceType:
  """The TFF type of a client dataset whose elements have `element_spec`."""
  return tff.SequenceType(tff.types.tensorflow_to_type(element_spec))


def feature_dim(model_fn: ModelFn) -> int:
  """D of the multi-branch model's clustering features [B, D]."""
  return _model_facts(model_fn).feature_dim


def struct_type(value, dtype=None) -> tff.types.StructWithPythonType:
  """The TFF type of a structure of numpy arrays (a method's server state): every array of `dtype` when given (float32
  for a clustering model whose initial values numpy computes in float64), else of its own dtype."""
  return tff.types.tensorflow_to_type(
      tf.nest.map_structure(lambda a: tf.TensorSpec(a.shape, dtype or a.dtype), value))


def initial_weights(model_fn: ModelFn, seed: int) -> tff.learning.models.ModelWeights:
  """Model weights of a freshly built model, initialized reproducibly from `seed` (numpy arrays)."""
  tf.keras.utils.set_random_seed(seed)
  weights = tff.learning.models.ModelWeights.from_model(model_fn())
  return tf.nest.map_structure(lambda v: v.numpy(), weights)


def identical_networks_fn(network_fn: Callable[[], tf.keras.Model], num_networks: int, seed: int,
                          stack_features: bool = False) -> ModelFn:
  """The builder of `num_networks` copies of `network_fn`'s network side by side
  (`models.multi_branch.build_multi_network_model`), every copy initialized from `seed`, so all start from the same
  weights (CFL's clusters and ShiftEx's experts begin as one model)."""

  def network():
    tf.keras.utils.set_random_seed(seed)
    return network_fn()

  return lambda: multi_branch.build_multi_network_model(network, num_networks, stack_features=stack_features)


def _zeros_initial_value(next_creator, **kwargs):
  """A variable creator (`tf.variable_creator_scope`) that starts a variable of known shape at zeros."""
  shape, dtype = kwargs.get('shape'), kwargs.get('dtype')
  if shape is not None and tf.TensorShape(shape).is_fully_defined() and dtype is not None:
    kwargs['initial_value'] = lambda: tf.zeros(shape, tf.as_dtype(dtype).base_dtype)
  return next_creator(**kwargs)


def client_model(model_fn: ModelFn) -> tf.keras.Model:
  """`model_fn()` for a client computation that assigns all the model's weights before using it: its variables
  start at zeros instead of running their initializers, which a TFF computation does on every call, i.e. for every
  client of every round (ResNet-18's 11M truncated normals were 30% of the TFF worker's CPU in a CIFAR round). Only
  the model's own variables: anything else the computation creates keeps its initializer."""
  with tf.variable_creator_scope(_zeros_initial_value):
    return model_fn()


def global_model_weights(state: tff.learning.templates.LearningAlgorithmState) -> tff.learning.models.ModelWeights:
  """The model weights of a `compose`d process's state, read in Python.

  The same value as `process.get_model_weights(state)`, which is a TFF computation: it sends the whole state (the
  model, FedAdam's two moments, the method's state) to TFF's worker and back, seconds a call on a model of ResNet-18's
  size, once per round in the loop's finite check and once per evaluation.
  """
  return state.global_model_weights


def empty_server_state() -> tff.Computation:
  """The `initialize` of a client work without server state: () at the server."""

  @tff.federated_computation
  def initialize():
    return tff.federated_value((), tff.SERVER)

  return initialize


def stateless_client_work(client_update: tff.Computation,
                          metrics_fn: Callable[[dict], dict]) -> tff.learning.templates.ClientWorkProcess:
  """The client work of a method without server state of its own.

  `client_update` is a TFF computation (weights, dataset) -> (ClientResult, metric sums); the sums are aggregated
  with `federated_sum` and `metrics_fn` (TF, sums -> metrics) finalizes them at the server.
  """
  weights_type, data_type = client_update.type_signature.parameter
  finalize = tff.tensorflow.computation(metrics_fn, client_update.type_signature.result[1])
  initialize = empty_server_state()

  @tff.federated_computation(initialize.type_signature.result, tff.FederatedType(weights_type, tff.CLIENTS),
                             tff.FederatedType(data_type, tff.CLIENTS))
  def next_fn(state, weights, client_data):
    result, sums = tff.federated_map(client_update, (weights, client_data))
    measurements = tff.federated_map(finalize, tff.federated_sum(sums))
    return tff.templates.MeasuredProcessOutput(state, result, measurements)

  return tff.learning.templates.ClientWorkProcess(initialize, next_fn)


SERVER_OPTIMIZERS = ('adam', 'sgd', 'sgdm', 'adagrad', 'yogi')
AGGREGATORS = ('mean', 'dp', 'secure')


@functools.lru_cache(maxsize=None)
def build_server_optimizer(name: str, learning_rate: float, epsilon: float = 1e-3,
                           momentum: float = 0.9) -> tff.learning.optimizers.Optimizer:
  """The server optimizer `name` applied to the aggregated update Delta, built by TFF's optimizer builders:

    adam     FedAdam (Reddi et al., "Adaptive Federated Optimization", 2021; the server optimizer of "Diurnal or
             Nocturnal?", Zhu et al., 2022) with `epsilon`;
    sgd      w <- w - learning_rate * Delta; with learning rate 1, w becomes the clients' mean of their trained
             weights: FedAvg's parameter averaging, the server step of pFedEM (Eq. 5), FedGMM and FedEvolve;
    sgdm     the same with server momentum `momentum` (FedAvgM, Hsu et al., "Measuring the Effects of Non-Identical
             Data Distribution for Federated Visual Classification", 2019);
    adagrad  FedAdagrad and yogi FedYogi (Reddi et al., 2021), with `epsilon` as their adaptivity.

  One object per value in a process (cached), so that every finalizer built on it is built once
  (`_optimizer_finalizer`)."""
  if name == 'adam':
    return tff.learning.optimizers.build_adam(learning_rate=learning_rate, epsilon=epsilon)
  if name == 'sgd':
    return tff.learning.optimizers.build_sgdm(learning_rate=learning_rate)
  if name == 'sgdm':
    return tff.learning.optimizers.build_sgdm(learning_rate=learning_rate, momentum=momentum)
  if name == 'adagrad':
    return tff.learning.optimizers.build_adagrad(learning_rate=learning_rate, epsilon=epsilon)
  if name == 'yogi':
    return tff.learning.optimizers.build_yogi(learning_rate=learning_rate, epsilon=epsilon)
  raise ValueError(f'--server_optimizer must be one of {", ".join(SERVER_OPTIMIZERS)}; got {name!r}.')


# The example-weighted mean of the clients' model updates: the model aggregator of a run without --aggregator.
MEAN_AGGREGATOR = tff.aggregators.MeanFactory()


@functools.lru_cache(maxsize=None)
def build_model_aggregator(name: str, dp_noise_multiplier: float = 0.0,
                           clients_per_round: int = 1) -> tff.aggregators.WeightedAggregationFactory:
  """The aggregator `name` of the clients' model updates:

    mean    the example-weighted mean (`MEAN_AGGREGATOR`, `tff.aggregators.MeanFactory`);
    dp      TFF's DP-FedAvg aggregator, `tff.aggregators.DifferentiallyPrivateFactory.gaussian_adaptive`: each update
            clipped to an adaptively estimated norm C, Gaussian noise on the sum so that value and clip-count queries
            together have the effective noise multiplier `dp_noise_multiplier`, an unweighted mean over the expected
            `clients_per_round` (McMahan et al., "Learning Differentially Private Recurrent Language Models", 2018;
            Andrew et al., "Differentially Private Learning with Adaptive Clipping", 2021);
    secure  TFF's secure aggregator, `tff.learning.secure_aggregator` without its optional zeroing and norm clipping:
            the example-weighted mean whose sums are secure sums (Bonawitz et al., "Practical Secure Aggregation for
            Privacy-Preserving Machine Learning", 2017); each coordinate of an update is clipped to a bound estimated
            from the clients' values, 2 x their 95th percentile, and quantized to the sum's bit width
            (`utils.execution_context` simulates the sums).
  """
  if name == 'mean':
    return MEAN_AGGREGATOR
  if name == 'dp':
    # The clipped-count query's noise must exceed z / 2 for the value noise to reach an effective z; TFF's default
    # 0.05 m (m clients per round) is below that for small rounds.
    return factory_utils.as_weighted_aggregator(tff.aggregators.DifferentiallyPrivateFactory.gaussian_adaptive(
        dp_noise_multiplier, clients_per_round,
        clipped_count_stddev=max(0.05 * clients_per_round, dp_noise_multiplier)))
  if name == 'secure':
    return tff.learning.secure_aggregator(zeroing=False, clipping=False, weighted=True)
  raise ValueError(f'--aggregator must be one of {", ".join(AGGREGATORS)}; got {name!r}.')


@dataclasses.dataclass(frozen=True)
class ServerStep:
  """What the server does with the clients' model updates, given to a method as TFF's own builders take
  `server_optimizer_fn` and `model_aggregator`: `model_aggregator` combines the updates (initial - trained weights)
  into Delta, and `optimizer` applies Delta to the global model (`build_server_optimizer`,
  `build_model_aggregator`)."""
  optimizer: tff.learning.optimizers.Optimizer
  model_aggregator: tff.aggregators.WeightedAggregationFactory = MEAN_AGGREGATOR

  @classmethod
  def named(cls, optimizer: str, learning_rate: float, epsilon: float = 1e-3, momentum: float = 0.9,
            aggregator: str = 'mean', dp_noise_multiplier: float = 0.0, clients_per_round: int = 1) -> 'ServerStep':
    """The server step of the flags' names and values (`build_server_optimizer`, `build_model_aggregator`)."""
    return cls(build_server_optimizer(optimizer, learning_rate, epsilon, momentum),
               build_model_aggregator(aggregator, dp_noise_multiplier, clients_per_round))


def build_server_finalizer(server_step: ServerStep,
                           weights_type: tff.types.StructWithPythonType) -> tff.learning.templates.FinalizerProcess:
  """TFF's finalizer applying `server_step`'s optimizer to the global model of `weights_type`."""
  return _optimizer_finalizer(server_step.optimizer, weights_type)


@functools.lru_cache(maxsize=None)
def _optimizer_finalizer(optimizer: tff.learning.optimizers.Optimizer,
                         weights_type: tff.types.StructWithPythonType) -> tff.learning.templates.FinalizerProcess:
  """Built once per optimizer object (`build_server_optimizer` gives one per value) and weights type in a process: a
  finalizer is a pure function of both, and tests and benchmarks build hundreds of processes in one process."""
  return tff.learning.templates.build_apply_optimizer_finalizer(optimizer, weights_type)


def compose(model_fn: ModelFn, client_work: tff.learning.templates.ClientWorkProcess, server_step: ServerStep,
            aggregator_factory: Optional[tff.aggregators.WeightedAggregationFactory] = None,
            ) -> tff.learning.templates.LearningProcess:
  """broadcast + `client_work` + `server_step`'s model aggregator (or the method's own `aggregator_factory`, refused
  with any aggregator but the mean) + `server_step`'s optimizer, as one learning process.

  The initial weights of the returned process come from `model_fn`'s initializers in TF graph mode; callers that
  need a seeded initialization replace them with `process.set_model_weights(state, initial_weights(...))`.
  """

  @tff.tensorflow.computation
  def initial_model_weights_fn():
    return tff.learning.models.ModelWeights.from_model(model_fn())

  client_result_type = client_work.next.type_signature.result.result.member
  distributor, aggregator, finalizer = _server_pieces(model_fn, client_result_type, server_step, aggregator_factory)
  return tff.learning.templates.compose_learning_process(initial_model_weights_fn, distributor, client_work,
                                                         aggregator, finalizer)


def _server_pieces(model_fn: ModelFn, client_result_type, server_step: ServerStep,
                   aggregator_factory: Optional[tff.aggregators.WeightedAggregationFactory] = None) -> tuple:
  """(broadcast, aggregator, finalizer) of `compose` for client results of `client_result_type`."""
  weights_type = model_weights_type(model_fn)
  if aggregator_factory is not None and server_step.model_aggregator is not MEAN_AGGREGATOR:
    raise ValueError('--aggregator replaces the mean of one model update; this method aggregates its updates its own '
                     'way (per network of a pool, or with its statistics), so it runs with --aggregator=mean only.')
  aggregator = (aggregator_factory or server_step.model_aggregator).create(client_result_type.update,
                                                                           client_result_type.update_weight)
  return (tff.learning.templates.build_broadcast_process(weights_type), aggregator,
          build_server_finalizer(server_step, weights_type))


class SplitRound(NamedTuple):
  """One round of a composed process as two computations, for a method whose round has an aggregation that depends
  on another (TFF cannot split such a computation over workers, `utils.remote_workers`).

  first(state, client_data) -> (carry at SERVER, per-client values at CLIENTS);
  second(carry, per_client) -> the `LearningProcessOutput` of `process.next(state, client_data)`.
  Each has one level of aggregation and its clients' values as last argument. The per-client values stay
  CLIENTS-placed: between the calls the simulation holds them, as a deployment's clients would keep them; no
  server computation reads them.
  """
  first: tff.Computation
  second: tff.Computation

  def __call__(self, state, client_data):
    carry, per_client = self.first(state, client_data)
    return self.second(carry, per_client)


def compose_split_round(model_fn: ModelFn, process: tff.learning.templates.LearningProcess,
                        first_client_work: tff.Computation, second_client_work: tff.Computation,
                        server_step: ServerStep,
                        aggregator_factory: Optional[tff.aggregators.WeightedAggregationFactory] = None) -> SplitRound:
  """`process.next` as a `SplitRound`, where `process` is `compose` of a client work whose `next` is
  `second_client_work` after `first_client_work` (the same arguments otherwise):

    first_client_work   (client-work state, weights at CLIENTS, data at CLIENTS)
                          -> (ClientResult at CLIENTS, client-work carry at SERVER, per-client values at CLIENTS);
    second_client_work  (client-work carry, per-client values) -> (client-work state, measurements), at SERVER.

  Broadcast, the model update's aggregation and FedAdam run in the first computation (they do not wait for the
  second's aggregate).
  """
  client_result_type = first_client_work.type_signature.result[0].member
  distributor, aggregator, finalizer = _server_pieces(model_fn, client_result_type, server_step, aggregator_factory)
  state_type, data_type = process.next.type_signature.parameter

  @tff.federated_computation(state_type, data_type)
  def first(state, client_data):
    distributed = distributor.next(state.distributor, state.global_model_weights)
    client_output = first_client_work(state.client_work, distributed.result, client_data)
    result = client_output[0]
    aggregated = aggregator.next(state.aggregator, result.update, result.update_weight)
    finalized = finalizer.next(state.finalizer, state.global_model_weights, aggregated.result)
    carry = tff.federated_zip(collections.OrderedDict(
        global_model_weights=finalized.result, distributor=distributed.state, client_work=client_output[1],
        aggregator=aggregated.state, finalizer=finalized.state, distributor_measurements=distributed.measurements,
        aggregator_measurements=aggregated.measurements, finalizer_measurements=finalized.measurements))
    return carry, client_output[2]

  carry_type, per_client_type = first.type_signature.result

  @tff.federated_computation(carry_type, per_client_type)
  def second(carry, per_client):
    client_work_output = second_client_work(carry.client_work, per_client)
    new_state = tff.federated_zip(tff.learning.templates.LearningAlgorithmState(
        carry.global_model_weights, carry.distributor, client_work_output[0], carry.aggregator, carry.finalizer))
    metrics = tff.federated_zip(collections.OrderedDict(
        distributor=carry.distributor_measurements, client_work=client_work_output[1],
        aggregator=carry.aggregator_measurements, finalizer=carry.finalizer_measurements))
    return tff.learning.templates.LearningProcessOutput(new_state, metrics)

  return SplitRound(first, second)
