"""Centralized test evaluation of a multi-branch model, per mode and over all modes.

Test data is centralized (as in the paper), so evaluation runs in plain TensorFlow outside TFF. A method supplies
the per-batch `objective` that turns model outputs into predictions (Vanilla: the mean of the branches; clustering
methods: the branch their clustering model selects). Accuracy over all modes pools the per-mode sums, so it is
the accuracy on the union test set.

Scenarios with per-client held-out data (`periodic_shift.scenario.Scenario.evaluation_plans`, e.g. the FedGMM paper's
test split of every client) add `HeldOutData`: test batches that each hold one client's examples (with the client's
index, `client` [B]) and the same clients' personalization data; their metrics (`<name>_accuracy`, `<name>_loss`,
e.g. `personalized_accuracy`) are example-weighted over all clients and are not pooled into the union test set.

Mixed test batches (`mixed_datasets`, `tasks.task.Task.mixed_test_dataset`) hold both modes of a two-mode task in a
given proportion q in every batch, the test clients of a round with q(t) = q as a method that routes whole batches
sees them; their metrics `mixed_q<q>_{accuracy,loss}` (`mixed_name`) are reported beside the per-mode ones and are
not pooled into the union test set or its routing counts.

Test batches are the groups a method decides over (FedTEM and FedTKM route each test batch as one test client, the
paper's minibatches of at most 64), so their size is part of the metric. Inference can still run on larger batches
(`inference_groups` > 1): the model runs once on that many test batches together (`Dataset.ragged_batch`, [G,
(B), ...] flattened to [sum of B, ...]) and the objective is called on each batch's slice of the outputs, so every
metric is the same as with one batch at a time (up to float summation order). Measured on this 2-core CPU, model
only: EMNIST's LeNet 66.8 us per example in batches of 64, 55.1 in 1,024; CIFAR's ResNet-18 GN 263 and 479 (slower):
the default is 1 group, and larger inference batches are for accelerators.

Methods with client mixture weights (FedGMM, FedEM) personalize before those tests (`Personalization`): with every
shared parameter frozen, each client's weights pi_c over the method's M mixture entries are fitted by EM on its
personalization data (`fit_client_log_weights`), and the objective receives the table log pi [clients, M] to
gather each example's client row from (Wu et al., 2023, Algorithm 1 lines 6 and 8 with the shared parameters fixed, the
paper's adaptation of unseen clients, Section 4.6).
"""

import collections
import dataclasses
from typing import Callable, NamedTuple, Optional

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from algorithms.core import client_training
from algorithms.core import learning_process
from algorithms.core import metric_names
from algorithms.core import novelty
from algorithms.core import objectives
from algorithms.core import routing
from models import multi_branch

Objective = Callable[[dict, dict], objectives.BatchResult]


def mixed_name(share: float) -> str:
  """The metric prefix of mixed test batches with share q of domain 0: `mixed_q0.25`."""
  return f'{metric_names.MIXED_PREFIX}{share:g}'


class HeldOutData(NamedTuple):
  """Clients' own held-out data (`tasks.task.Task.held_out_dataset` of `scenario.HeldOutClients`): `test` batches
  and `personalization` batches, both with `client` [B] indices below `num_clients`; `client_data(i)` gives client
  i's (test, personalization) batches alone, the latter in shuffled training batches (for `LocalTuning`);
  `client_ids[i]` is client i's id in the scenario (the key of its training state, for `ClientWeights`)."""
  test: tf.data.Dataset
  personalization: tf.data.Dataset
  num_clients: int
  client_data: Optional[Callable[[int], tuple[tf.data.Dataset, tf.data.Dataset]]] = None
  client_ids: tuple[str, ...] = ()


class Personalization(NamedTuple):
  """A method's client mixture weights: `log_terms(outputs, batch, *objective_args)` [B, M] are each example's
  log-likelihood terms of the M mixture entries under the frozen shared parameters (FedGMM: log N(z; mu, Sigma) +
  log P_theta(y | x); FedEM: log P_theta_k(y | x)); `em_steps` EM steps fit pi_c from uniform."""
  log_terms: Callable
  em_steps: int


class LocalTuning(NamedTuple):
  """Per-client training before each held-out client's test (the FedGMM paper's FedAvg+ and Local baselines, the
  FedEvolve paper's FedEvp): from the client's weights (the evaluated weights, or its `ClientWeights`) for `epochs`
  passes over the client's personalization batches (`HeldOutData.client_data`: shuffled, seeded), one SGD step of
  `learning_rate` per batch on `objective`'s loss (`client_training.local_training`), of the trainable tensors
  `trained_mask` marks (None: all)."""
  objective: Objective
  epochs: int
  learning_rate: float
  trained_mask: Optional[tuple[bool, ...]] = None


# A held-out client's own model weights from its scenario id (FedRep: the global representation with the client's
# stored head).
ClientWeights = Callable[[str], tff.learning.models.ModelWeights]


def fit_client_log_weights(log_terms: tf.Tensor, clients: tf.Tensor, num_clients: int, steps: int) -> tf.Tensor:
  """log pi [num_clients, M] by EM from uniform, for per-example terms l [N, M] of clients c [N]:

    E  log q_i = log softmax(log pi_{c_i} + l_i)        M  pi_c = mean over i of client c of q_i

  (Wu et al., 2023, Eqs. (E) and (M) for pi alone). A client without examples keeps the uniform weights."""
  num_entries = log_terms.shape[-1]
  log_pi = tf.fill([num_clients, num_entries], -tf.math.log(float(num_entries)))
  counts = tf.math.unsorted_segment_sum(tf.ones_like(clients, tf.float32), clients, num_clients)[:, tf.newaxis]
  for _ in range(steps):
    q = tf.nn.softmax(tf.gather(log_pi, clients) + log_terms, axis=-1)
    pi = tf.math.unsorted_segment_sum(q, clients, num_clients) / tf.maximum(counts, 1.0)
    log_pi = tf.where(counts > 0, tf.math.log(tf.maximum(pi, 1e-30)), log_pi)
  return log_pi


@dataclasses.dataclass
class _TestData:
  """An evaluator's data, shared by the evaluators derived from it (`with_model`, `held_out_only`), so that one
  `rebind` gives them all another run's data."""
  test_datasets: dict[str, tf.data.Dataset]
  held_out: dict[str, HeldOutData]
  novelty: Optional[tf.data.Dataset]
  mixed: dict[str, tf.data.Dataset]


class Evaluator:
  """Evaluates model weights on a task's per-mode test sets."""

  def __init__(self, model: tf.keras.Model, test_datasets: dict[str, tf.data.Dataset],
               held_out: Optional[dict[str, HeldOutData]] = None,
               novelty_dataset: Optional[tf.data.Dataset] = None,
               mixed_datasets: Optional[dict[str, tf.data.Dataset]] = None, inference_groups: int = 1):
    """`test_datasets`: mode name -> batched test dataset (`tasks.task.Task.test_dataset`); `held_out`: name ->
    clients' own held-out data; `novelty_dataset`: batches of novel examples (`tasks.task.Task.novelty_dataset`),
    scored against the test datasets' (`algorithms.core.novelty`); `mixed_datasets`: `mixed_name(q)` -> batches
    mixing the modes (`tasks.task.Task.mixed_test_dataset`); `inference_groups`: test batches the model runs on at
    once (module docstring)."""
    if inference_groups < 1:
      raise ValueError(f'inference_groups must be at least 1; got {inference_groups}.')
    self._init(model, _TestData(test_datasets, held_out or {}, novelty_dataset, mixed_datasets or {}),
               inference_groups, held_out_only=False)

  def _init(self, model: tf.keras.Model, data: _TestData, inference_groups: int, held_out_only: bool) -> None:
    self._inference_groups = inference_groups
    self._model = model
    self._data = data
    self._held_out_only = held_out_only
    self._weights = tff.learning.models.ModelWeights.from_model(model)
    self._evaluate_sums = tf.function(self._sums, autograph=False)
    self._collect_per_example = tf.function(self._collect, autograph=False)
    self._tuners = {}
    self._untuned = None

  def _derived(self, model: tf.keras.Model, held_out_only: bool) -> 'Evaluator':
    derived = Evaluator.__new__(Evaluator)
    derived._init(model, self._data, self._inference_groups, held_out_only)  # pylint: disable=protected-access
    return derived

  @property
  def _test_datasets(self) -> dict[str, tf.data.Dataset]:
    return {} if self._held_out_only else self._data.test_datasets

  @property
  def _held_out(self) -> dict[str, HeldOutData]:
    return self._data.held_out

  @property
  def _novelty(self) -> Optional[tf.data.Dataset]:
    return None if self._held_out_only else self._data.novelty

  @property
  def _mixed(self) -> dict[str, tf.data.Dataset]:
    return {} if self._held_out_only else self._data.mixed

  def with_model(self, model: tf.keras.Model) -> 'Evaluator':
    """An evaluator of the same test data for another network (a method whose model is not the task's)."""
    return self._derived(model, self._held_out_only)

  def held_out_only(self) -> 'Evaluator':
    """An evaluator of the held-out clients alone (no centralized test sets, no novelty data): a method without a
    global model (Local)."""
    return self._derived(self._model, held_out_only=True)

  def structure(self) -> tuple:
    """What a method's build may read of the evaluator: the names of its test sets, held-out sets and mixed sets,
    whether it has novelty data, and its inference groups (not the data itself)."""
    return (tuple(self._test_datasets), tuple(self._held_out), tuple(self._mixed), self._novelty is not None,
            self._inference_groups, self._held_out_only)

  def rebind(self, other: 'Evaluator') -> None:
    """This evaluator and every evaluator derived from it evaluate on `other`'s data from now on (another run's, of
    the same `structure()`): a method built for one run evaluates another's (`experiment.core.built_methods`)."""
    if other.structure() != self.structure():
      raise ValueError(f'cannot rebind an evaluator of {self.structure()} to one of {other.structure()}.')
    self._data.__dict__.update(other._data.__dict__)  # pylint: disable=protected-access

  def evaluate_personal(self, weights: tff.learning.models.ModelWeights, objective: Objective,
                        local_tuning: Optional[LocalTuning] = None,
                        client_weights: Optional[ClientWeights] = None) -> dict:
    """`evaluate` with every held-out client tested on its own model (its `client_weights`, after `local_tuning`:
    FedAvg+, FedEvp, FedRep), plus the held-out clients' metrics of the global model `weights` as
    `<name>_server_<metric>`."""
    metrics = self.evaluate(weights, objective, local_tuning=local_tuning, client_weights=client_weights)
    if self._held_out:
      self._untuned = self._untuned or self.held_out_only()
      metrics.update(server_view(self._untuned.evaluate(weights, objective), self.held_out_names))
    return metrics

  @property
  def held_out_names(self) -> tuple[str, ...]:
    return tuple(self._held_out)

  def held_out_clients(self, name: str) -> int:
    return self._held_out[name].num_clients

  def collect_personalization(self, weights: tff.learning.models.ModelWeights, name: str, per_example: Callable,
                              dtypes: tuple) -> tuple[tf.Tensor, ...]:
    """`per_example(outputs, batch)`'s tensors of `dtypes` over held-out `name`'s personalization data, with
    `weights`, concatenated, followed by the examples' client indices [N] (for client-specific objective
    arguments, `evaluate(..., client_args=...)`)."""
    tf.nest.map_structure(lambda variable, value: variable.assign(value), self._weights, weights)
    return self._collect_per_example(self._held_out[name].personalization, per_example, (),
                                     tuple(dtypes) + (tf.int32,), with_client=True)

  def _client_sums(self, data: HeldOutData, weights, objective: Objective, tuning: Optional[LocalTuning],
                   client_weights: Optional[ClientWeights]) -> dict:
    """Summed test metrics of every client of `data`, each tested with its own weights (`client_weights` of its
    id, else `weights`) after `tuning` (when given)."""
    if data.client_data is None or (client_weights is not None and len(data.client_ids) != data.num_clients):
      raise ValueError('per-client evaluation needs held-out data with client_data and client_ids.')
    tune = None if tuning is None else self._tuner(tuning)
    total = None
    for client in range(data.num_clients):
      test, personalization = data.client_data(client)
      start = weights if client_weights is None else client_weights(data.client_ids[client])
      if tuning is None:
        tf.nest.map_structure(lambda variable, value: variable.assign(value), self._weights, start)
      else:
        tune(start, personalization.repeat(tuning.epochs))
      sums = self._evaluate_sums(test, objective, None, ())
      total = sums if total is None else tf.nest.map_structure(tf.add, total, sums)
    tf.nest.map_structure(lambda variable, value: variable.assign(value), self._weights, weights)
    return total

  def _tuner(self, tuning: LocalTuning) -> Callable:
    """tune(initial weights, dataset) -> examples seen: `tuning`'s local training of the evaluated model, traced
    once per `tuning` and kept (a function traced anew at every evaluation would also leave its graph in
    TensorFlow's eager context for the rest of the run)."""
    if tuning not in self._tuners:
      optimizer = tff.learning.optimizers.build_sgdm(tuning.learning_rate)
      self._tuners[tuning] = tf.function(lambda initial, dataset: client_training.local_training(
          self._model, optimizer, initial, dataset, tuning.objective, trained_mask=tuning.trained_mask).num_examples,
          autograph=False)
    return self._tuners[tuning]

  def _fold_batches(self, dataset: tf.data.Dataset, initial_state, batch_step: Callable):
    """`client_training.fold` of batch_step(state, outputs, batch) -> state over `dataset`'s batches, `outputs` the
    model's on `batch`; the model runs on `inference_groups` batches at once, and `batch_step` sees each batch's
    slice of them, in order."""
    if self._inference_groups == 1:
      return client_training.fold(dataset, initial_state,
                                  lambda state, batch: batch_step(state, self._model(batch['x'], training=False),
                                                                  batch))

    def step(state, groups):
      splits = next(iter(groups.values())).row_splits  # [G + 1]
      flat = collections.OrderedDict((key, value.values) for key, value in groups.items())
      outputs = self._model(flat['x'], training=False)

      def group_step(index, state):
        take = lambda tensor: tensor[splits[index]:splits[index + 1]]
        return index + 1, batch_step(state, tf.nest.map_structure(take, outputs), tf.nest.map_structure(take, flat))

      return tf.while_loop(lambda index, _: index < tf.size(splits) - 1, group_step, (tf.constant(0), state))[1]

    return client_training.fold(dataset.ragged_batch(self._inference_groups), initial_state, step)

  def _collect(self, dataset: tf.data.Dataset, per_example: Callable, objective_args, dtypes: tuple,
               with_client: bool = False) -> tuple[tf.Tensor, ...]:
    """`per_example(outputs, batch, *objective_args)`'s [B, ...] tensor, or tuple of them, of `dtypes`, followed
    by the examples' `batch['client']` [B] when `with_client`, concatenated over `dataset`. Traced once per
    `per_example` (and `with_client`): callers pass the same function at every evaluation, never a new closure, or
    every evaluation would trace anew and leave a graph in TensorFlow's eager context for the rest of the run."""

    def step(arrays, outputs, batch):
      values = per_example(outputs, batch, *objective_args)
      values = tuple(values) if isinstance(values, (tuple, list)) else (values,)
      if with_client:
        values += (batch['client'],)
      return tuple(array.write(array.size(), value) for array, value in zip(arrays, values))

    arrays = tuple(tf.TensorArray(dtype, size=0, dynamic_size=True, infer_shape=False) for dtype in dtypes)
    return tuple(array.concat() for array in self._fold_batches(dataset, arrays, step))

  def _sums(self, dataset: tf.data.Dataset, objective: Objective, routing_shape, objective_args) -> dict:

    def step(sums, outputs, batch):
      result = objective(outputs, batch, *objective_args)
      return tf.nest.map_structure(tf.add, sums, client_training.metric_sums(result))

    return self._fold_batches(dataset, client_training.zero_metric_sums(routing_shape), step)

  def evaluate(self, weights: tff.learning.models.ModelWeights, objective: Objective, routing_shape=None,
               objective_args=(), personalization: Optional[Personalization] = None,
               novelty_score: Optional[Callable] = None, local_tuning: Optional[LocalTuning] = None,
               client_args: Optional[dict[str, tuple]] = None,
               client_weights: Optional[ClientWeights] = None) -> dict:
    """Returns test_loss, test_accuracy and test_<mode>_{loss,accuracy} for every mode (and for every mixed
    dataset).

    `objective(outputs, batch, *objective_args)` gives each batch's metrics; passing state such as a clustering
    model as `objective_args` (tensors) rather than in a closure lets the traced evaluation be reused. With
    `routing_shape` ([modes, branches]) the objective reports routing counts, returned summed over all test data
    as `test_routing` (numpy). With `personalization`, held-out tests call `objective(outputs, batch,
    *objective_args, client_log_weights)` with the fitted log pi [clients, M]. With a novelty dataset,
    `novelty_score(outputs, batch, *objective_args)` [B] (default `max_softmax_novelty`) scores it against the
    test datasets: `novelty_auroc`, `novelty_average_precision`, `novelty_max_f1`. With `client_weights`, each
    held-out client is tested with its own weights; with `local_tuning`, after its own tuning from them (or from
    `weights`) (`LocalTuning`). `client_args[name]` are objective arguments
    added for held-out `name` only (tables indexed by `batch['client']`).
    """
    tf.nest.map_structure(lambda variable, value: variable.assign(value), self._weights, weights)
    metrics, total = {}, None
    for name, dataset in self._test_datasets.items():
      sums = self._evaluate_sums(dataset, objective, routing_shape, tuple(objective_args))
      sums = {key: np.asarray(value) for key, value in sums.items()}
      metrics.update(_finalize(sums, prefix=f'test_{name}_'))
      total = sums if total is None else {key: total[key] + sums[key] for key in sums}
    if total is not None:
      metrics.update(_finalize(total, prefix='test_'))
    for name, dataset in self._mixed.items():
      sums = self._evaluate_sums(dataset, objective, routing_shape, tuple(objective_args))
      metrics.update(_finalize({key: np.asarray(value) for key, value in sums.items()}, prefix=f'{name}_'))
    for name, data in self._held_out.items():
      args = tuple(objective_args) + tuple((client_args or {}).get(name, ()))
      if personalization is not None:
        log_terms, clients = self._collect_per_example(data.personalization, personalization.log_terms, args,
                                                       (tf.float32, tf.int32), with_client=True)
        args += (fit_client_log_weights(log_terms, clients, data.num_clients, personalization.em_steps),)
      if local_tuning is not None or client_weights is not None:
        sums = self._client_sums(data, weights, objective, local_tuning, client_weights)
      else:
        sums = self._evaluate_sums(data.test, objective, routing_shape, args)
      metrics.update(_finalize({key: np.asarray(value) for key, value in sums.items()}, prefix=f'{name}_'))
    if self._novelty is not None and self._test_datasets:
      score = novelty_score or max_softmax_novelty
      args = tuple(objective_args)
      known = [self._collect_per_example(d, score, args, (tf.float32,))[0] for d in self._test_datasets.values()]
      novel = self._collect_per_example(self._novelty, score, args, (tf.float32,))[0]
      metrics.update(novelty.novelty_metrics(np.concatenate(known), novel.numpy()))
    if routing_shape is not None:
      metrics['test_routing'] = total['routing']
    return metrics


def server_view(held_out_metrics: dict, names: tuple[str, ...]) -> dict:
  """Held-out metrics `<name>_<metric>` of the global model, without personalization, renamed
  `<name>_server_<metric>` (the FedEvolve paper's "server accuracy" beside the personalized "client accuracy")."""
  renamed = {}
  for key, value in held_out_metrics.items():
    name = next((n for n in names if key.startswith(f'{n}_')), None)
    if name is not None:
      renamed[f'{name}_server_{key[len(name) + 1:]}'] = value
  return renamed


def max_softmax_novelty(outputs: dict, batch: dict, *objective_args) -> tf.Tensor:
  """1 - max_y softmax of the branch-averaged logits [B] (the max-softmax baseline; `algorithms.core.novelty`)."""
  del batch, objective_args  # Unused.
  logits = multi_branch.average_branch_logits(tf.convert_to_tensor(outputs[multi_branch.LOGITS]))
  return 1.0 - tf.reduce_max(tf.nn.softmax(logits), axis=-1)


def _finalize(sums: dict, prefix: str) -> dict[str, float]:
  return {f'{prefix}loss': float(sums['loss_sum']) / max(float(sums['num_examples']), 1.0),
          f'{prefix}accuracy': float(sums['num_correct']) / max(float(sums['num_predictions']), 1.0)}


def routed_evaluation(evaluator: Evaluator, objective: Objective, objective_args_fn: Callable[[object], tuple],
                      routing_shape, best_matching: bool,
                      personalization: Optional[Personalization] = None, novelty_score: Optional[Callable] = None):
  """evaluate(state) for a method that routes test examples to branches: the evaluator's metrics plus
  `routing_accuracy` (under the best matching of domains to branches when `best_matching`; otherwise in the method's
  own orientation, mode k on branch k, and `routing_accuracy_matched` under this evaluation's best matching beside
  it, so "finds the modes" and "orients them as its prior says" read apart), `routing_ari` and the counts they come
  from, `routing_count_<domain>_<branch>` (test examples; `experiment.core.routing_summary` scores them
  under one matching for the whole run).
  `objective_args_fn(client work state)` gives the objective's extra arguments (its clustering model)."""

  def evaluate(state):
    metrics = evaluator.evaluate(learning_process.global_model_weights(state), objective, routing_shape=routing_shape,
                                 objective_args=objective_args_fn(state.client_work),
                                 personalization=personalization, novelty_score=novelty_score)
    confusion = metrics.pop('test_routing').astype(np.float32)
    metrics['routing_accuracy'] = float(routing.routing_accuracy(confusion, best_matching=best_matching))
    if not best_matching:
      metrics['routing_accuracy_matched'] = float(routing.routing_accuracy(confusion, best_matching=True))
    metrics['routing_ari'] = float(routing.adjusted_rand_index(confusion))
    metrics.update({f'{metric_names.TEST_ROUTING_COUNT_PREFIX}{domain}_{branch}': float(count)
                    for (domain, branch), count in np.ndenumerate(confusion)})
    return metrics

  return evaluate
