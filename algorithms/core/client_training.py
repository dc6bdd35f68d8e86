"""Local training on one client: the loop every method's client work runs.

`local_training(model, optimizer, initial_weights, dataset, objective)` assigns the broadcast weights to the
client's Keras model, runs one optimizer step per batch on `objective(model_outputs, batch).loss` with a TFF optimizer
(`tff.learning.optimizers`), and returns the model update in TFF's convention, update = initial - trained (the
finalizer treats the aggregated update as a gradient), with the number of examples trained on and the metric sums.

Every loop over a client's batches inside a client computation is `fold(dataset, initial_state, step)`, the
meaning of `dataset.reduce` built from other ops, for speed: in TFF's worker every call of a `ReduceDataset` op
instantiates (and grappler-optimizes) its step function again (its function handle cache lives for one call), and
every iterator made over a dataset with TF's default options rewrites the dataset's graph first. Measured with
`perf` on the worker, Vanilla on the synthetic task: the per-call instantiation took 26% and the rewrites 14% of
the worker's CPU time, the model's own ops about 5%; with `fold` (an iterator `tf.while_loop`, TFF's
`LoopImplementation.DATASET_ITERATOR`, over the dataset with TF's default rewrites and autotuning off) the round went
from 0.092 to 0.035 s. The same ops run on the same batches in the same order, so results are unchanged (the
default run's metrics.csv is a golden file in `run_experiment_test`).

The suite's client and evaluation `tf.function`s are traced with `autograph=False`: they are written in TF ops
(`fold`, `tf.where`), so autograph's conversion only cost time, 18% of a short run's (py-spy on the method x
scenario matrix). A function that loops over a dataset in Python (`central_pretraining`) keeps autograph.

A client whose training is not finite (a non-finite update or loss) is left out of the round: it sends a zero
update with weight 0 (as TFF's own client work does), zero metric sums, and `nonfinite_clients` = 1, which the
server sums and reports. A method that computes more per client (clustering statistics) checks those too and
leaves the client out of them with `exclude_unless` (the same client must be left out of every aggregate).
"""

import collections
from typing import Callable, NamedTuple, Optional

import tensorflow as tf
import tensorflow_federated as tff

from algorithms.core import learning_process
from algorithms.core import objectives
from tasks import task as task_lib

Objective = Callable[[dict, dict], objectives.BatchResult]
Forward = Callable[[tf.keras.Model, dict], object]  # (model, batch) -> the outputs the objective reads.


def model_outputs(model: tf.keras.Model, batch: dict):
  """The default forward pass of training: the model on the batch's inputs."""
  return model(batch['x'], training=True)


class TrainingOutput(NamedTuple):
  """update: ModelWeights.trainable structure; num_examples: float32; metrics: OrderedDict of float32 sums;
  finite: bool scalar, False when the client was left out (update, weight and metrics are then zero)."""
  update: object
  num_examples: tf.Tensor
  metrics: dict
  finite: tf.Tensor


def without_rewrites(dataset: tf.data.Dataset) -> tf.data.Dataset:
  """`dataset` with no graph rewrites and no autotuning, which would run again for every client's iterator in every
  round (see the module docstring)."""
  options = tf.data.Options()
  options.experimental_optimization.apply_default_optimizations = False
  options.autotune.enabled = False
  return dataset.with_options(options)


def fold(dataset: tf.data.Dataset, initial_state, step: Callable):
  """`dataset.reduce(initial_state, step)` as an iterator `tf.while_loop` (see the module docstring): `step(state,
  element)` -> state of the same structure, shapes and dtypes, for every element in order; the final state.

  Unlike a `ReduceDataset` op, the iterator is not ordered after the function's earlier stateful ops: a client's
  shuffle (`reshuffle_each_iteration`) draws its order when an iterator reaches it, so a second loop over the same
  client data must be made under a control dependency on the end of the first (`local_training` makes its loop after
  the weight assignment, which follows any earlier use of the model), or the two loops' orders swap at random."""
  iterator = iter(without_rewrites(dataset))

  def body(element, state):
    state = step(state, element.get_value())
    return iterator.get_next_as_optional(), state

  # One iteration at a time: a step's variable updates finish before the next step reads the variables.
  _, state = tf.while_loop(lambda element, state: element.has_value(), body,
                           (iterator.get_next_as_optional(), initial_state), parallel_iterations=1)
  return state


def single_element(dataset: tf.data.Dataset):
  """The first element of `dataset` (a client's data read as one batch, a one-element state dataset), read
  through an iterator (in a `tf.function` of its own when the caller's graph is not one); `dataset` must have an
  element.

  Not `get_single_element`: in TFF's worker each `ToSingleElement` call keeps the function instances it made for
  functions its dataset brings from the driver (a `map` or `filter` traced there, e.g. label thinning's filter),
  tens of KB a client dataset that are never freed, whatever the batch; an iterator or `reduce` keeps nothing.
  ShiftEx's census rounds read every label-thinned party at once."""
  read = lambda dataset: iter(dataset).get_next()
  return (read if tf.inside_function() else tf.function(read, autograph=False))(without_rewrites(dataset))


def metric_sums(result: objectives.BatchResult) -> dict:
  """The summable metrics of a batch; routing counts only when the objective reports them."""
  sums = dict(loss_sum=result.loss_sum, num_correct=result.num_correct, num_examples=result.num_examples,
              num_predictions=result.num_predictions)
  if result.routing is not None:
    sums['routing'] = result.routing
  return sums


def finalize_train_metrics(sums) -> collections.OrderedDict:
  """train_loss, train_accuracy, train_examples and nonfinite_clients from the clients' summed metrics."""
  return collections.OrderedDict(
      train_loss=sums['loss_sum'] / tf.maximum(sums['num_examples'], 1.0),
      train_accuracy=sums['num_correct'] / tf.maximum(sums['num_predictions'], 1.0),
      train_examples=sums['num_examples'],
      nonfinite_clients=sums['nonfinite_clients'])


def zero_metric_sums(routing_shape=None) -> dict:
  sums = dict(loss_sum=tf.constant(0.0), num_correct=tf.constant(0.0), num_examples=tf.constant(0.0),
              num_predictions=tf.constant(0.0))
  if routing_shape is not None:
    sums['routing'] = tf.zeros(routing_shape)
  return sums


def all_finite(structure) -> tf.Tensor:
  """True when every float tensor of `structure` is finite (bool scalar)."""
  checks = [tf.reduce_all(tf.math.is_finite(value)) for value in tf.nest.flatten(structure)
            if value.dtype.is_floating]
  return tf.reduce_all(checks) if checks else tf.constant(True)


def exclude_unless(finite: tf.Tensor, structure):
  """`structure` when `finite`, else zeros of the same structure: what a left-out client contributes."""
  return tf.nest.map_structure(lambda value: tf.where(finite, value, tf.zeros_like(value)), structure)


def excluded_unless(output: TrainingOutput, finite: tf.Tensor) -> TrainingOutput:
  """`output` when `finite` (and its own training was finite), else the output of a left-out client."""
  finite = tf.logical_and(output.finite, finite)
  metrics = exclude_unless(finite, {key: value for key, value in output.metrics.items()
                                    if key != 'nonfinite_clients'})
  metrics['nonfinite_clients'] = 1.0 - tf.cast(finite, tf.float32)
  return TrainingOutput(update=exclude_unless(finite, output.update),
                        num_examples=exclude_unless(finite, output.num_examples), metrics=metrics, finite=finite)


def assign_weights(model: tf.keras.Model, weights: tff.learning.models.ModelWeights):
  """Sets `model`'s variables to `weights` (inside the caller's `tf.function`); returns the assignments."""
  variables = tff.learning.models.ModelWeights.from_model(model)
  return tf.nest.map_structure(lambda variable, value: variable.assign(value), variables, weights)


def proximal_term(trainable, initial_trainable, strength: float) -> tf.Tensor:
  """FedProx's (mu / 2) ||w - w^t||^2 over the trainable tensors (Li et al., 2020, Eq. 2; FedGMM's baseline)."""
  return 0.5 * strength * tf.add_n([tf.reduce_sum(tf.square(variable - initial))
                                    for variable, initial in zip(trainable, initial_trainable)])


def local_training(model: tf.keras.Model, optimizer: tff.learning.optimizers.Optimizer,
                   initial_weights: tff.learning.models.ModelWeights, dataset: tf.data.Dataset,
                   objective: Objective, proximal_strength: float = 0.0,
                   trained_mask: Optional[tuple[bool, ...]] = None,
                   forward: Forward = model_outputs) -> TrainingOutput:
  """Assigns `initial_weights` to `model`, trains on `dataset`, returns the update; runs inside a `tf.function`.

  With `proximal_strength` mu > 0 every step minimizes the objective's loss plus `proximal_term` to
  `initial_weights` (FedProx); the reported loss sums stay the objective's. With `trained_mask` (a bool per
  trainable tensor) only the marked tensors are trained, the others keep `initial_weights` (partial
  personalization, FedEvp). `forward(model, batch)` makes the outputs the objective reads (FedEvolve's pair batches
  run each tower on the rows that need it, `models.representation.two_tower_outputs`).

  The caller's `tf.function` must close over `model` (passing a Keras model as a `tf.function` argument makes the
  function see copies of its variables); its automatic control dependencies order the variable reads after
  training.
  """
  weights = tff.learning.models.ModelWeights.from_model(model)
  trainable = tuple(weights.trainable)
  specs = tuple(tf.TensorSpec(v.shape, v.dtype) for v in trainable)
  initial_trainable = tuple(initial_weights.trainable)

  def step(state, batch):
    optimizer_state, sums = state
    with tf.GradientTape() as tape:
      result = objective(forward(model, batch), batch)
      loss = result.loss
      if proximal_strength > 0:
        loss += proximal_term(trainable, initial_trainable, proximal_strength)
    if trained_mask is None:
      gradients = tape.gradient(loss, trainable)
    else:  # Differentiates the trained tensors only: the frozen ones' backward pass is never built.
      trained = iter(tape.gradient(loss, [v for v, t in zip(trainable, trained_mask) if t]))
      gradients = tuple(next(trained) if t else tf.zeros_like(v) for v, t in zip(trainable, trained_mask))
    optimizer_state, updated = optimizer.next(optimizer_state, trainable, gradients)
    for variable, value in zip(trainable, updated):
      variable.assign(value)
    sums = tf.nest.map_structure(tf.add, sums, metric_sums(result))
    return optimizer_state, sums

  with tf.control_dependencies(tf.nest.flatten(assign_weights(model, initial_weights))):
    _, sums = fold(dataset, (optimizer.initialize(specs), zero_metric_sums()), step)
  update = tf.nest.map_structure(tf.subtract, tuple(initial_weights.trainable), trainable)
  output = TrainingOutput(update=list(update), num_examples=sums['num_examples'], metrics=sums,
                          finite=tf.constant(True))
  return excluded_unless(output, all_finite((update, sums['loss_sum'])))


def build_train_fn(model: tf.keras.Model, optimizer: tff.learning.optimizers.Optimizer,
                   objective: Objective, proximal_strength: float = 0.0, forward: Forward = model_outputs
                   ) -> Callable[[tff.learning.models.ModelWeights, tf.data.Dataset], TrainingOutput]:
  """`local_training` as a `tf.function` (initial_weights, dataset) -> TrainingOutput; build it in a computation."""
  return tf.function(lambda initial_weights, dataset: local_training(model, optimizer, initial_weights, dataset,
                                                                    objective, proximal_strength, forward=forward),
                     autograph=False)


def objective_client_work(model_fn: learning_process.ModelFn, batch_fn: task_lib.BatchFn,
                          client_optimizer: tff.learning.optimizers.Optimizer, element_spec, objective: Objective,
                          proximal_strength: float = 0.0, uniform_weights: bool = False,
                          regroup: Optional[Callable[[tf.data.Dataset], tf.data.Dataset]] = None,
                          forward: Forward = model_outputs) -> tff.learning.templates.ClientWorkProcess:
  """The client work of a method that is local training on a per-batch `objective` and nothing else: reports
  (update, weight) and train metrics, summed. The weight is the number of examples the objective counted, or 1
  per client with `uniform_weights` (a plain average of the client models; a left-out client still weighs 0).
  `regroup` maps the client's model batches to the batches it trains on (`algorithms.core.stage_batches`);
  `forward` is `local_training`'s.

  `element_spec` is the spec of `tasks.task.preprocess_client` batches; `batch_fn` the task's.
  """
  weights_type = learning_process.model_weights_type(model_fn)
  data_type = learning_process.client_data_type(element_spec)

  @tff.tensorflow.computation(weights_type, data_type)
  def client_update(weights, dataset):
    train = build_train_fn(learning_process.client_model(model_fn), client_optimizer, objective, proximal_strength,
                           forward)
    batches = task_lib.model_batches(dataset, batch_fn)
    output = train(weights, batches if regroup is None else regroup(batches))
    weight = tf.cast(output.finite, tf.float32) if uniform_weights else output.num_examples
    return tff.learning.templates.ClientResult(update=output.update, update_weight=weight), output.metrics

  return learning_process.stateless_client_work(client_update, finalize_train_metrics)
