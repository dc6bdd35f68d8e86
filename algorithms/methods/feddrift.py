"""FedDrift (Jothimurugesan, Hsieh, Wang, Joshi and Gibbons, AISTATS 2023), a baseline of ShiftEx (Bhope et al., 2025).

The ShiftEx paper compares ShiftEx with FedDrift ("local drift detection plus clustering of clients by loss to
assign multiple models"); the method is FedDrift's paper and its authors' code
(microsoft/FedDrift, `FedAvgEnsDataLoader.cluster_hierarchical`, read to understand, not copied). Clients are
clustered, one model per cluster, and the clustering changes at every time step (here: every window of
`window_rounds` rounds):

- Local drift detection. At its first round in a new time step, client c scores every model on its new data,
  s_c(w_k) (accuracy, or minus the loss), and takes the best, k* = argmax_k s_c(w_k). It has drifted when

    s_c^ref - s_c(w_k*) > delta,

  where s_c^ref is the score of its model on its data when it last measured it. A client that has not drifted
  joins k*; one that has drifted is isolated on a new model, a copy of w_k* (the code's `find_unused_model_lru`
  with `original_model`), which only it trains.
- Hierarchical clustering. Between the models, the cluster distance is

    D(i, j) = max(S_ii - S_ij, S_jj - S_ji, 0),   S_ij = the score of model j on cluster i's data   (distance A),

  and complete-linkage agglomeration (`algorithms.core.linkage`) merges the models while the closest groups are
  within delta'; a merged model is the average of its members weighted by the examples each trained on. A model
  created in a time step is isolated from merging until the next one (W = 1).

The authors' FedDrift setting (their README: `H_A_F_1_06_0`) is distance A, complete linkage, W = 1,
delta = delta' = 0.06 on accuracy; those are the defaults.

How the suite realizes it (documented choices):
- Models are the K = `--num_branches` networks of a `build_multi_network_model` (slots), all from one seed; slot 0
  is the first model. A new model takes a free slot, or else evicts the slot least recently trained before this
  time step (the code's LRU), or, when every slot was trained in this time step, the client stays on k*
  (`exhausted` counts them). Clients carry a model id (client state); the server maps ids to slots, so the clients
  of a merged model follow it and those of an evicted one choose again.
- Partial participation (the code has every client in every time step): a client detects at its first round in
  a new window; its reference s_c^ref is the score it measured at the start of its last round (before local
  training), in an earlier window. A client that drifts sits out of that round's aggregate; the server gives it a
  slot, which it trains from its next round. `--feddrift_new_models=window` is FedDrift-Eager (the code's
  `mmacc`): all the clients that drift in one window share one new model, and models are never merged.
- Cluster data: FedDrift's S_ij uses all the data assigned to cluster i so far; the suite's clients hold only the
  current round's data, so S_ij averages, over the window's participants of cluster i, the scores they measured
  at the start of their rounds (weighted by examples). Merging runs in the last round of each window.
- `--feddrift_statistic`: `accuracy` (the code) or `loss` (the paper states the rules with losses; then
  s = -loss and delta, delta' are in nats).

Evaluation: a test batch is scored by the active model whose predictions on it are the most certain (largest mean
KL to uniform, `algorithms.core.certainty`): no label and no true domain is read. With `--oracle_test_domains` a
domain's test data are scored instead by the models its clients were assigned to, weighted by a decaying count of
the clients seen per domain and model (what the authors' code measures, each client's model on its concept's test
data; it reads each batch's true domain, an oracle marked in reports), the most certain model for a domain no client
has held yet. With `--oracle_test_labels` the most certain model becomes the one with the best score on the batch's
labels (the client rule applied to test data: an oracle, marked in reports).

Metrics: `num_models`, `created`, `evicted`, `exhausted`, `merged`; against the true domains (simulation only):
`true_shifts` / `detected_shifts` (clients whose domain changed since their reference, and those flagged) and
`stable_checks` / `false_alarms`; `train_routing_accuracy` / `train_routing_ari` of the clients' models against
their domains.
"""

import collections
import dataclasses
from typing import NamedTuple

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from algorithms.core import client_state
from algorithms.core import client_training
from algorithms.core import certainty
from algorithms.core import evaluation
from algorithms.core import learning_process
from algorithms.core import linkage
from algorithms.core import method
from algorithms.core import network_pool
from algorithms.core import objectives
from algorithms.core import per_tensor_mean
from algorithms.core import routing
from models import multi_branch
from tasks import task as task_lib

NAME = 'feddrift'
# Its models start from one draw of the run's seed (`identical_networks_fn`).
SEEDED_BUILD = True
SENDS = method.Sends(
    method_sums=('slot_examples', 'cluster_scores'),
    simulation_only=('routing', 'true_shifts', 'detected_shifts', 'stable_checks', 'false_alarms'),
    client_state=('drifted', 'best', 'model_id', 'ref_score', 'ref_window', 'checked_window', 'ref_domain'),
    own_aggregation=True)
DEFAULTS = method.Defaults(
    method.PARAMETER_AVERAGING,
    source=('Jothimurugesan et al., "Federated Learning under Distributed Concept Drift", 2023 (each global model is '
            "trained by FedAvg, McMahan et al., 2017, on the clients of its cluster)"),
    scenario='concept_drift')
STATISTICS = ('accuracy', 'loss')
NEW_MODELS = ('client', 'window')
ASSIGNMENT_DECAY = 0.9  # Per round, of the domain x model counts of the evaluation (as ShiftEx's).
MAX_MODEL_IDS = 1024
NO_ID = -1.0


@dataclasses.dataclass(frozen=True)
class Config:
  delta: float = method.setting(0.06, 'FedDrift: a client drifts when its best model scores this much below its '
                                'reference on its new data.')
  merge_delta: float = method.setting(0.06, 'FedDrift: delta\', models whose cluster distance is at most this '
                                      'are merged.')
  statistic: str = method.setting('accuracy', 'FedDrift: the score of a model on a client\'s data: accuracy (the '
                                  'authors\' code) or loss (the paper\'s text; s = -loss).')
  new_models: str = method.setting('client', 'FedDrift: a new model per drifted client, merged by hierarchical '
                                   'clustering (client), or one per window for all its drifted clients, never '
                                   'merged (window: FedDrift-Eager).')
  window_rounds: int = 32
  num_branches: int = 4

  def validate(self) -> None:
    method.check_settings(self, NAME, choices={'statistic': STATISTICS, 'new_models': NEW_MODELS})
    if self.delta < 0 or self.merge_delta < 0:
      raise ValueError(f'--feddrift_delta and --feddrift_merge_delta must be >= 0; got {self.delta:g}, '
                       f'{self.merge_delta:g}.')
    if self.num_branches < 2:
      raise ValueError(f'feddrift needs --num_branches >= 2 (room for a second model); got {self.num_branches}.')


# Where each setting's default comes from (`algorithms.registry` checks one per setting; docs/running.md
# shows them).
SETTING_SOURCES = {
    'delta': ("suite choice: the FedDrift authors' README setting H_A_F_1_06_0 (delta = 0.06 on accuracy); the "
              'ShiftEx paper states none'),
    'merge_delta': "suite choice: the FedDrift authors' README setting H_A_F_1_06_0 (delta' = 0.06)",
    'statistic': ("suite choice: accuracy, the FedDrift authors' code; the FedDrift paper's text states the rules "
                  'with losses (--feddrift_statistic=loss)'),
    'new_models': ('paper: FedDrift (Jothimurugesan et al., 2023), a new model per drifted client merged by '
                   'hierarchical clustering; window is FedDrift-Eager'),
}


def initial_client_state() -> dict:
  """A client before its first round (the fields it keeps between rounds, `client_state`): on model id 0 (slot 0),
  no reference score (ref_window -1), never checked, no reference domain (simulation only)."""
  return {'model_id': np.int32(0), 'ref_score': np.float32(0), 'ref_window': np.int32(-1),
          'checked_window': np.int32(-1), 'ref_domain': np.int32(-1)}


class ServerState(NamedTuple):
  """The server's pool of K model slots and its bookkeeping (the client work's state)."""
  round_num: np.int32  # Rounds so far.
  active: np.ndarray  # [K] bool: the slot holds a model.
  id_slot: np.ndarray  # [MAX_MODEL_IDS] int32: the slot of a model id, -1 for none.
  slot_id: np.ndarray  # [K] int32: the model id a slot holds, -1 for none.
  next_id: np.int32  # The next model id to give.
  created_window: np.ndarray  # [K] int32: the window a slot's model was created in, -1 for none.
  trained_window: np.ndarray  # [K] int32: the last window a slot was trained in (its LRU key), -1 for never.
  window_slot: np.int32  # FedDrift-Eager: the slot of this window's new model, -1 for none.
  cluster_scores: np.ndarray  # [K, K] float32: this window's S_ij sums, weighted by examples.
  cluster_examples: np.ndarray  # [K] float32: this window's examples behind each row of cluster_scores.
  examples_seen: np.ndarray  # [K] float32: examples each slot trained on (the weights of a merge).
  domain_slots: np.ndarray  # [modes, K] float32: decaying counts of clients by true domain and slot (evaluation).
  mixing: np.ndarray  # [K, K] float32: this round's copies and merges of the networks (`network_pool`).
  created: np.int32  # This round's new models.
  evicted: np.int32  # This round's models evicted for a new one.
  exhausted: np.int32  # This round's drifted clients left without a new model.
  merged: np.int32  # Models merged into another at this window's end.


def initial_server_state(num_modes: int, config: Config) -> ServerState:
  k = config.num_branches
  return ServerState(
      round_num=np.int32(0), active=np.arange(k) == 0,
      id_slot=np.array([0] + [-1] * (MAX_MODEL_IDS - 1), np.int32), slot_id=np.array([0] + [-1] * (k - 1), np.int32),
      next_id=np.int32(1), created_window=np.full([k], -1, np.int32), trained_window=np.full([k], -1, np.int32),
      window_slot=np.int32(-1), cluster_scores=np.zeros([k, k], np.float32), cluster_examples=np.zeros([k], np.float32),
      examples_seen=np.zeros([k], np.float32), domain_slots=np.zeros([num_modes, k], np.float32),
      mixing=np.eye(k, dtype=np.float32), created=np.int32(0), evicted=np.int32(0), exhausted=np.int32(0),
      merged=np.int32(0))


class RoundView(NamedTuple):
  """What the clients receive: the round and the pool's slots and ids."""
  round_num: tf.Tensor
  active: tf.Tensor
  id_slot: tf.Tensor
  slot_id: tf.Tensor


def model_scores(logits: tf.Tensor, examples: dict, statistic: str) -> tf.Tensor:
  """s(w_k) [K] of every model on a client's examples (logits [N, K, C]): accuracy, or minus the mean loss."""
  results = [objectives.classification_result(logits[:, k], examples) for k in range(logits.shape[1])]
  if statistic == 'accuracy':
    return tf.stack([tf.math.divide_no_nan(r.num_correct, r.num_predictions) for r in results])
  return -tf.stack([tf.math.divide_no_nan(r.loss_sum, r.num_examples) for r in results])


def build_client_round(model: tf.keras.Model, optimizer, batch_fn: task_lib.BatchFn, config: Config,
                       num_modes: int):
  """The client's round as a `tf.function` (weights, broadcast state, dataset, stored state) -> (ClientResult with
  per-tensor weights, report for the server, metric sums)."""
  k_slots = config.num_branches
  trainable_index, non_trainable_index = network_pool.network_index(model, k_slots)

  @tf.function(autograph=False)
  def run(weights, state, dataset, stored):
    examples, batches, _ = routing.client_examples(task_lib.model_batches(dataset, batch_fn))
    window = method.window_of(state.round_num, config.window_rounds)
    client_training.assign_weights(model, weights)
    scores = model_scores(model(examples['x'], training=False)[multi_branch.LOGITS], examples, config.statistic)
    best = tf.argmax(tf.where(state.active, scores, -np.inf), output_type=tf.int32)

    # Drift detection at the client's first round of a window after the one of its reference.
    ref_window = stored['ref_window']
    new_window = stored['checked_window'] < window
    check = new_window & (window >= 1) & (ref_window >= 0) & (ref_window < window)
    drifted = check & (stored['ref_score'] - scores[best] > config.delta)
    model_id = stored['model_id']
    stored_slot = tf.where(model_id >= 0, tf.gather(state.id_slot, tf.maximum(model_id, 0)), -1)
    slot = tf.where(new_window | (stored_slot < 0), best, stored_slot)
    domain = routing.client_mode(examples)  # Simulation only: scores the detector, never decides.
    truly = tf.not_equal(domain, stored['ref_domain'])
    detection = collections.OrderedDict(
        true_shifts=tf.cast(check & truly, tf.float32), detected_shifts=tf.cast(drifted & truly, tf.float32),
        stable_checks=tf.cast(check & ~truly, tf.float32), false_alarms=tf.cast(drifted & ~truly, tf.float32))

    output = network_pool.train_network(model, optimizer, weights, batches, slot, trainable_index,
                                        non_trainable_index, k_slots)
    sent = output.num_examples * tf.cast(output.finite & ~drifted, tf.float32)
    result = network_pool.pool_result(output.update, slot, sent, trainable_index, len(weights.trainable))
    sums = routing.training_sums(
        output, domain, slot, num_modes, k_slots, slot_examples=tf.one_hot(slot, k_slots) * sent,
        cluster_scores=tf.one_hot(slot, k_slots)[:, tf.newaxis] * scores[tf.newaxis] * sent, **detection)
    report = collections.OrderedDict(
        position=stored[client_state.POSITION], drifted=drifted, best=best,
        model_id=tf.gather(state.slot_id, slot), ref_score=scores[slot], ref_window=window,
        checked_window=tf.maximum(window, stored['checked_window']), ref_domain=domain)
    return result, report, sums

  return run


def allocate(state: ServerState, reports: dict, window: tf.Tensor, config: Config) -> tuple[ServerState, tf.Tensor]:
  """New models for the round's drifted clients (reports {drifted [m], best [m]}), in report order: a free slot,
  else the slot least recently trained before this window (LRU); with `new_models=window`, one per window, shared
  by its drifted clients. A new model copies the drifted client's best model. Returns (state, every reporting
  client's model id [m] for its next round: the new model's, or for a drifted client left without one, its best
  model's)."""
  k = config.num_branches
  drifted, best = reports['drifted'], reports['best']
  stays = tf.where(drifted, tf.gather(state.slot_id, best), reports['model_id'])
  free = ~state.active
  available = free | (state.trained_window < window)
  priority = tf.where(free, -2.0, tf.cast(state.trained_window, tf.float32))
  order = tf.argsort(tf.where(available, priority, np.inf), stable=True)
  num_available = tf.reduce_sum(tf.cast(available, tf.int32))
  if config.new_models == 'client':
    rank = tf.cumsum(tf.cast(drifted, tf.int32)) - 1
    granted = drifted & (rank < num_available)
    for r in range(k):
      client = tf.argmax(tf.cast(granted & tf.equal(rank, r), tf.int32), output_type=tf.int32)
      state = _open_slot(state, order[r], best[client], tf.reduce_any(granted & tf.equal(rank, r)), window)
    new_slot = tf.gather(order, tf.clip_by_value(rank, 0, k - 1))
  else:
    open_slot = tf.maximum(state.window_slot, 0)
    current = (state.window_slot >= 0) & tf.equal(state.created_window[open_slot], window) & state.active[open_slot]
    need = tf.reduce_any(drifted) & ~current & (num_available > 0)
    first = tf.argmax(tf.cast(drifted, tf.int32), output_type=tf.int32)
    state = _open_slot(state, order[0], best[first], need, window)
    state = state._replace(window_slot=tf.where(need, order[0], state.window_slot))
    granted = drifted & (current | need)
    new_slot = tf.fill(tf.shape(best), tf.maximum(state.window_slot, 0))
  state = state._replace(exhausted=tf.reduce_sum(tf.cast(drifted & ~granted, tf.int32)))
  return state, tf.where(granted, tf.gather(state.slot_id, new_slot), stays)


def _open_slot(state: ServerState, slot: tf.Tensor, source: tf.Tensor, use: tf.Tensor,
               window: tf.Tensor) -> ServerState:
  """With `use`: slot becomes a new model, a copy of slot `source` (mixing row), created in
  `window`, under a fresh id (the ids of the model it held, if any, map to no slot: its clients choose again)."""
  k = int(state.active.shape[0])
  at = tf.equal(tf.range(k), slot) & use
  # The next id no live model holds (ids wrap after MAX_MODEL_IDS models; a client still holding a reused id of
  # an old model is sent to the new one until its next window's choice).
  candidates = (state.next_id + tf.range(k + 1)) % MAX_MODEL_IDS
  taken = tf.reduce_any(tf.equal(candidates[:, tf.newaxis], state.slot_id[tf.newaxis]), 1)
  new_id = candidates[tf.argmin(tf.cast(taken, tf.int32), output_type=tf.int32)]
  id_slot = tf.where(use & tf.equal(state.id_slot, slot), -1, state.id_slot)
  return state._replace(
      id_slot=tf.where(use & tf.equal(tf.range(MAX_MODEL_IDS), new_id), slot, id_slot),
      slot_id=tf.where(at, new_id, state.slot_id),
      next_id=tf.where(use, (new_id + 1) % MAX_MODEL_IDS, state.next_id),
      evicted=state.evicted + tf.cast(use & state.active[slot], tf.int32),
      created=state.created + tf.cast(use, tf.int32), active=at | state.active,
      mixing=tf.where(at[:, tf.newaxis], tf.one_hot(source, k), state.mixing),
      created_window=tf.where(at, window, state.created_window),
      trained_window=tf.where(at, window, state.trained_window),
      examples_seen=tf.where(at, 0.0, state.examples_seen))


def cluster_distances(cluster_scores: tf.Tensor, cluster_examples: tf.Tensor) -> tf.Tensor:
  """D [K, K], D(i, j) = max(S_ii - S_ij, S_jj - S_ji, 0) with S_ij = cluster_scores[i, j] / cluster_examples[i]
  (FedDrift's distance A)."""
  scores = tf.math.divide_no_nan(cluster_scores, cluster_examples[:, tf.newaxis])
  own = tf.linalg.diag_part(scores)
  return tf.maximum(tf.maximum(own[:, tf.newaxis] - scores, own[tf.newaxis, :] - tf.transpose(scores)), 0.0)


def merge_models(state: ServerState, window: tf.Tensor, config: Config) -> ServerState:
  """FedDrift's hierarchical clustering at a window's end: the models trained in this window and created before it
  are merged by complete linkage of D while within delta'; a group becomes its lowest slot, the average of its
  members weighted by the examples each trained on, and its members' clients follow it."""
  k = config.num_branches
  eligible = state.active & (state.created_window < window) & (state.cluster_examples > 0)
  label = linkage.complete_linkage(cluster_distances(state.cluster_scores, state.cluster_examples), eligible,
                                   max_distance=config.merge_delta)
  slots = tf.range(k)
  members = tf.equal(label[tf.newaxis, :], slots[:, tf.newaxis])  # [group (its base slot), slot]
  weighted = tf.cast(members, tf.float32) * state.examples_seen[tf.newaxis]
  total = tf.reduce_sum(weighted, 1)
  rows = tf.where(total[:, tf.newaxis] > 0, weighted / tf.maximum(total, 1e-12)[:, tf.newaxis],
                  tf.math.divide_no_nan(tf.cast(members, tf.float32),
                                        tf.reduce_sum(tf.cast(members, tf.float32), 1, keepdims=True)))
  grouped = tf.reduce_sum(tf.cast(members, tf.int32), 1) > 1
  joins = eligible & tf.not_equal(label, slots)  # Slots merged into a lower one.
  target = tf.where(joins, label, slots)
  return state._replace(
      mixing=tf.where(grouped[:, tf.newaxis], rows, state.mixing), active=state.active & ~joins,
      id_slot=tf.where(state.id_slot >= 0, tf.gather(target, tf.maximum(state.id_slot, 0)), state.id_slot),
      slot_id=tf.where(joins, -1, state.slot_id),
      examples_seen=tf.where(grouped, total, tf.where(joins, 0.0, state.examples_seen)),
      merged=tf.reduce_sum(tf.cast(joins, tf.int32)))


def server_update(state: ServerState, reports: dict, sums: dict, config: Config) -> tuple[ServerState, tf.Tensor]:
  """The server's round after the clients' reports: the models' bookkeeping, new models for the drifted clients
  and, at a window's end, the merges. Returns (state, the reporting clients' model ids [m])."""
  window = method.window_of(state.round_num, config.window_rounds)
  trained = sums['slot_examples'] > 0
  state = state._replace(
      trained_window=tf.where(trained, window, state.trained_window),
      examples_seen=state.examples_seen + sums['slot_examples'],
      cluster_scores=state.cluster_scores + sums['cluster_scores'],
      cluster_examples=state.cluster_examples + sums['slot_examples'],
      domain_slots=ASSIGNMENT_DECAY * state.domain_slots + sums['routing'],
      created=tf.constant(0), evicted=tf.constant(0), merged=tf.constant(0))
  state, model_ids = allocate(state, reports, window, config)
  if config.new_models == 'client':
    window_end = (window >= 1) & tf.equal(state.round_num % config.window_rounds, 0)
    merged = merge_models(state, window, config)
    state = tf.nest.map_structure(lambda after, before: tf.where(window_end, after, before), merged, state)
  return state, model_ids


def pool_step(trainable_index, non_trainable_index, num_slots: int):
  """The server step after the finalizer (`network_pool.with_server_step`): the round's copies and merges applied to
  the networks."""

  def step(learning_state):
    state = learning_state.client_work
    edited = network_pool.mixed_state(learning_state, trainable_index, non_trainable_index, state.mixing)
    return edited._replace(client_work=state._replace(mixing=tf.eye(num_slots))), collections.OrderedDict(
        num_models=tf.reduce_sum(tf.cast(state.active, tf.int32)))

  return step


def build_client_work(model_fn, batch_fn: task_lib.BatchFn, client_optimizer, element_spec, num_modes: int,
                      config: Config) -> tff.learning.templates.ClientWorkProcess:
  """FedDrift's client work: detection and scores at the clients, new models and merges at the server."""
  weights_type = learning_process.model_weights_type(model_fn)
  data_type = client_state.client_data_type(element_spec, initial_client_state())
  state_value = initial_server_state(num_modes, config)
  state_type = learning_process.struct_type(state_value)

  @tff.tensorflow.computation(state_type)
  def next_round(state):
    """The state with the round counted (and the window's cluster scores reset at its start), and what the clients
    receive: the round and the models."""
    round_num = state.round_num + 1
    starts = tf.equal((round_num - 1) % config.window_rounds, 0)
    state = state._replace(
        round_num=round_num,
        cluster_scores=tf.where(starts, tf.zeros_like(state.cluster_scores), state.cluster_scores),
        cluster_examples=tf.where(starts, tf.zeros_like(state.cluster_examples), state.cluster_examples))
    return state, RoundView(round_num, state.active, state.id_slot, state.slot_id)

  view_type = next_round.type_signature.result[1]

  @tff.tensorflow.computation(weights_type, view_type, data_type)
  def client_round(weights, view, data):
    run = build_client_round(learning_process.client_model(model_fn), client_optimizer, batch_fn, config, num_modes)
    return run(weights, view, data['dataset'], client_state.read(data['client_state']))

  report_type, sums_type = client_round.type_signature.result[1:]

  @tff.tensorflow.computation(state_type, client_state.gathered_type(report_type), sums_type)
  def finish(state, reports, sums):
    new_state, model_ids = server_update(state, reports, sums, config)
    client_states = collections.OrderedDict(
        [(client_state.POSITION, reports[client_state.POSITION])] + [
            (key, model_ids if key == 'model_id' else reports[key]) for key in initial_client_state()])
    metrics = collections.OrderedDict(
        client_training.finalize_train_metrics(sums),
        **routing.train_routing_metrics(sums['routing'], best_matching=True),
        **{key: sums[key] for key in ('true_shifts', 'detected_shifts', 'stable_checks', 'false_alarms')},
        created=new_state.created, evicted=new_state.evicted, exhausted=new_state.exhausted, merged=new_state.merged,
        **{client_state.CLIENT_STATES: client_states})
    return new_state, metrics

  return client_state.gathered_reports_work(state_value, next_round, client_round, finish)


def build_process(task: task_lib.Task, element_spec, hparams: method.Hyperparameters, config: Config):
  """(model_fn, the learning process)."""
  config.validate()
  model_fn = learning_process.identical_networks_fn(lambda: task.model_fn(1), config.num_branches, hparams.seed)
  with tf.Graph().as_default():
    trainable_index, non_trainable_index = network_pool.network_index(model_fn(), config.num_branches)
  client_work = build_client_work(model_fn, task.batch_fn,
                                  tff.learning.optimizers.build_sgdm(hparams.client_learning_rate), element_spec,
                                  task.num_modes, config)
  process = learning_process.compose(model_fn, client_work, hparams.server_step,
                                     per_tensor_mean.PerTensorWeightedMeanFactory())
  process = network_pool.with_server_step(process, pool_step(trainable_index, non_trainable_index,
                                                             config.num_branches))
  return model_fn, process


def evaluation_objective(config: Config, num_modes: int, oracle_test_labels: bool, oracle_test_domains: bool):
  """objective(outputs, batch, active [K] bool, domain_slots [modes, K]): a test batch scored by the active model
  most certain on it (with `oracle_test_labels`: the one best scored on its labels); with `oracle_test_domains`, a
  batch of a domain some client has held by that domain's clients' models, weighted by their counts."""

  def objective(outputs, batch, active, domain_slots):
    if oracle_test_labels:
      scores = model_scores(outputs[multi_branch.LOGITS], batch, config.statistic)
    else:
      scores = tf.reduce_mean(certainty.branch_certainty(outputs, batch), axis=0)
    best = tf.one_hot(tf.argmax(tf.where(active, scores, -np.inf)), config.num_branches)
    share = routing.assigned_share(domain_slots, batch, best) if oracle_test_domains else best
    return routing.shared_result(outputs, batch, share, num_modes)

  return objective


def build_algorithm(task: task_lib.Task, element_spec, hparams: method.Hyperparameters,
                    evaluator: evaluation.Evaluator, config: Config) -> method.Algorithm:
  model_fn, process = build_process(task, element_spec, hparams, config)
  num_modes = task.num_modes
  objective = evaluation_objective(config, num_modes, hparams.oracle_test_labels, hparams.oracle_test_domains)
  evaluate = evaluation.routed_evaluation(
      evaluator.with_model(model_fn()), objective, lambda state: (state.active, state.domain_slots),
      [num_modes, config.num_branches], best_matching=True)
  return method.Algorithm(process, evaluate, initial_client_state=initial_client_state(),
                          model_fn=model_fn)
