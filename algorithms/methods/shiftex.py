"""ShiftEx (Bhope, Jayaram, Venkateswaran and Venkatasubramanian, "Shift Happens: Mixture of Experts based
Continual Adaptation in Federated Learning", 2025): shift-aware mixture of experts for windows of covariate and
label shift.

Parties stream data in windows of `window_rounds` rounds. A pool of experts (full networks) serves them; each
party is assigned one expert. Per party and window (Algorithm 1), the party embeds its data with an encoder (the
penultimate layer, the task network's features), keeps a sample of the embeddings and its label histogram, and
compares them with the previous window's:

  covariate shift  <=>  MMD^2(P_t^c(X), P_{t-1}^c(X)) > delta_cov      (Eq. 1, `algorithms.core.drift_statistics`)
  label shift      <=>  JSD(y_t^c, y_{t-1}^c) > delta_label

The thresholds are the (1 - alpha) quantiles of null statistics collected in the bootstrap window W0 (each party
splits its window's sample in two halves and reports their MMD^2 and JSD; reconstructed from the paper's prose). At
the server (Algorithm 2), the profiles (mean embeddings) of the shifted parties are clustered by k-means with k by
the Davies-Bouldin index (`algorithms.core.kmeans`); a cluster of at least gamma parties reuses the expert whose
latent memory M^(k) is within epsilon,

  MMD(c_j, M^(k)) = sqrt(2 - 2 exp(-gamma_k ||c_j - M^(k)||^2)) <= epsilon    (Eq. 1 between the two profiles),

and moves that memory by an exponential moving average, M^(k) <- (1 - rho) M^(k) + rho c_j; otherwise it spawns a
new expert, Clone(theta_0), with memory c_j. At the end of every window, experts whose flattened parameters have
cosine similarity above tau are consolidated into their average weighted by the examples each has trained on.
Each expert is trained by federated averaging (the suite's FedAdam) on the parties assigned to it.

How the suite realizes it (documented choices; the paper gives no values):
- Experts are the networks of a `build_multi_network_model`: K = `--num_branches` slots, of which the last holds
  theta_0, the bootstrap expert frozen at the end of W0 (copied by the server step, `algorithms.core.network_pool`,
  with zero FedAdam moments so it never moves), and the others hold the pool (at most K - 1 experts). A spawn copies
  the frozen slot; a merge averages two slots. Parties carry an expert id (client state); the server maps ids to
  slots, so a party of a merged expert follows it.
- Partial participation: the scenario samples each round's parties, so a party detects at its first round in a new
  window, comparing with a sample of `--shiftex_samples` inputs and the label histogram it kept from its last
  round in an earlier window (Algorithm 1 reads D_{t-1}); the kept inputs are embedded anew with the current
  encoder, so the MMD compares data, not two states of a model in training. The shifted parties
  of the first `detection_rounds` rounds of a window are clustered together at the end of that period (their
  profiles are collected by the server, which Algorithm 2 receives); until then they sit out of training. A party
  that detects later, or has not been back since, takes the expert of the nearest cluster centroid at its next
  round. Parties of clusters smaller than gamma (|G_j| < gamma) keep their expert and fine-tune locally: they train
  without sending their update for the rest of the window (Algorithm 2 line 31).
- Encoder (`--shiftex_encoder`): `bootstrap` (default) embeds with the frozen theta_0, so thresholds, profiles and
  memories live in one space (an open choice of the paper); `assigned` embeds with the party's own expert (the seed's
  words), so profiles of parties on different experts live in different spaces. In W0 both use expert 1.
- Calibration at the detection's sample sizes: a null statistic compares two random halves of one window (the
  embedding sample's, all its labels'), and the detection compares a half of the current window with a half of
  the reference window, so the two have the same sample sizes and a threshold at the nulls' (1 - alpha) quantile
  is a test of level alpha (`null_statistics`, `detection_statistics`). Comparing whole windows instead would make
  the detection's statistics smaller than the nulls' under no shift (the JSD's by about half), a level far below
  alpha and a lower power; halves cost power too, but the level is the one asked for. Tested on stationary and
  shifted streams (tests/shiftex_calibration_test.py: false alarms within [alpha / 2, 2 alpha], power per shift).
- MMD: the V-statistic (`--shiftex_unbiased_mmd` for the U-statistic), gamma_k by the median heuristic.
- Matching: profiles are mean embeddings ("a single d-dimensional feature vector" per party, seed Sec. 5.4), so
  the matching MMD is that of two point masses, with gamma_k = 1 / the median squared distance between the parties'
  profiles in W0 (a moving average over its rounds): epsilon is in units of the spread of unshifted parties.
- k = 1 unless some k >= 2 has a Davies-Bouldin index below `--shiftex_split_index` (`algorithms.core.kmeans`).
- Consolidation is checked in the last round of each window after W0, greedily over disjoint pairs.
- FLIPS' label-balanced cohorts become aggregation weights (`flips_balance`): the scenario chooses the parties.
- Eq. 2 (facility location) of every assignment is reported, with the exact optimum when at most EXACT_PARTIES
  parties shifted (`algorithms.core.facility_location`); the heuristic does not use lambda and mu.

Evaluation (`--shiftex_evaluation`): `assigned` (default) scores a domain's test data with the experts its parties
are assigned to, weighted by a decaying count of the parties seen per domain and expert (the seed's measure: each
party's expert on its current-window data, the paper's Section 3.2; the true domain is used for this metric only), and
falls back to `memory` for a domain no party holds; `memory` sends a test batch to the active expert whose latent
memory is nearest to the batch's mean embedding (how a new party would be matched).

Metrics: `num_experts`, `spawned`, `reused`, `merged`, `match_mmd` (the mean over the window's trained clusters of
their MMD to the nearest memory, to set epsilon), `delta_cov`, `delta_label` (0 before calibration),
`assignment_objective` / `optimal_objective` / `solved_exactly` (Eq. 2), `label_clusters` (FLIPS'); scored
against the true domains (simulation only): `true_shifts` / `detected_shifts` (parties whose domain changed since
their reference, and those flagged) and `stable_checks` / `false_alarms`; `train_routing_accuracy` /
`train_routing_ari` of the parties' experts against their domains.
"""

import collections
import dataclasses

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from algorithms.core import client_state
from algorithms.core import client_training
from algorithms.core import drift_statistics
from algorithms.core import evaluation
from algorithms.core import facility_location
from algorithms.core import kmeans
from algorithms.core import learning_process
from algorithms.core import method
from algorithms.core import network_pool
from algorithms.core import per_tensor_mean
from algorithms.core import routing
from models import multi_branch
from tasks import task as task_lib

NAME = 'shiftex'
ENCODERS = ('bootstrap', 'assigned')
EVALUATIONS = ('assigned', 'memory')
ASSIGNMENT_DECAY = 0.9  # Per round, of the domain x expert counts of the `assigned` evaluation.
MAX_EXPERT_IDS = 256
EXACT_PARTIES = 5  # Assignments of at most this many shifted parties are also solved exactly (Eq. 2).
NULL_BUFFER = 512


@dataclasses.dataclass(frozen=True)
class Config:
  encoder: str = method.setting('bootstrap', 'ShiftEx: embeddings for detection and matching from the frozen '
                                'bootstrap expert (bootstrap) or the party\'s own expert (assigned).')
  samples: int = method.setting(32, 'ShiftEx: embeddings a party keeps per window (half enter each MMD).')
  alpha: float = method.setting(0.05, 'ShiftEx: false-positive level of delta_cov and delta_label (W0 nulls).')
  unbiased_mmd: bool = method.setting(False, 'ShiftEx: U-statistic MMD^2 (default: V-statistic).')
  detection_rounds: int = method.setting(8, 'ShiftEx: rounds at a window\'s start whose shifted parties are '
                                         'clustered together.')
  max_clusters: int = method.setting(4, 'ShiftEx: largest k of the k-means of shifted parties.')
  split_index: float = method.setting(1.0, 'ShiftEx: shifted parties form one cluster unless some k >= 2 has a '
                                      'Davies-Bouldin index below this.')
  epsilon: float = method.setting(0.5, 'ShiftEx: a cluster reuses an expert whose memory is within this MMD.')
  memory_rate: float = method.setting(0.5, 'ShiftEx: rate rho of the latent memories\' moving average.')
  min_cluster_size: int = method.setting(2, 'ShiftEx: gamma, the smallest cluster trained by FL.')
  merge_similarity: float = method.setting(0.999, 'ShiftEx: tau, experts more cosine-similar are merged.')
  new_expert_cost: float = method.setting(1.0, 'ShiftEx: lambda of Eq. 2, the cost of a new expert (reported '
                                          'objective only; the heuristic does not use it).')
  imbalance_weight: float = method.setting(1.0, 'ShiftEx: mu of Eq. 2, the weight of the experts\' label '
                                           'imbalance (reported objective only).')
  flips: bool = method.setting(True, 'ShiftEx: FLIPS label balance: a party\'s update weight is divided by its '
                               'label cluster\'s share of its expert\'s recent parties.')
  evaluation: str = method.setting('assigned', 'ShiftEx: a domain\'s test data are scored by the experts its '
                                   'parties are assigned to (assigned) or by the expert with the nearest memory '
                                   '(memory).')
  window_rounds: int = 32
  num_branches: int = 4
  clients_per_round: int = 10

  def validate(self) -> None:
    method.check_settings(self, NAME, choices={'encoder': ENCODERS, 'evaluation': EVALUATIONS},
                          at_least_one=('detection_rounds', 'max_clusters', 'min_cluster_size'),
                          positive=('epsilon', 'memory_rate', 'split_index'))
    if self.samples < 4:
      raise ValueError(f'--shiftex_samples must be >= 4; got {self.samples}.')
    if not 0 < self.alpha < 1 or not 0 < self.merge_similarity <= 1 or self.memory_rate > 1:
      raise ValueError(f'--shiftex_alpha must be in (0, 1), --shiftex_merge_similarity in (0, 1] and '
                       f'--shiftex_memory_rate in (0, 1]; got {self.alpha:g}, {self.merge_similarity:g}, '
                       f'{self.memory_rate:g}.')
    if self.num_branches < 2:
      raise ValueError(f'shiftex needs --num_branches >= 2 (the frozen bootstrap expert and at least one expert); '
                       f'got {self.num_branches}.')

  @property
  def bootstrap_slot(self) -> int:
    return self.num_branches - 1

  @property
  def pending_capacity(self) -> int:
    return self.clients_per_round * self.detection_rounds


def initial_client_state(input_shape: tuple, feature_dim: int, num_classes: int, config: Config) -> dict:
  """A party before its first round: expert id 0, no reference window (-1). The reference is a sample of the
  previous window's inputs (Algorithm 1 reads D_{t-1}), embedded anew with the current encoder when compared."""
  return {'expert_id': np.float32(0), 'pending': np.float32(0), 'local_window': np.float32(-1),
          'checked_window': np.float32(-1), 'ref_window': np.float32(-1),
          'profile': np.zeros([feature_dim], np.float32),
          'ref_inputs': np.zeros((config.samples,) + tuple(input_shape), np.float32),
          'ref_weights': np.zeros([config.samples], np.float32),
          'ref_label_half': np.zeros([num_classes], np.float32), 'ref_domain': np.float32(-1)}


def initial_server_state(feature_dim: int, num_modes: int, num_classes: int,
                         config: Config) -> collections.OrderedDict:
  k = config.num_branches
  return collections.OrderedDict(
      domain_slots=np.zeros([num_modes, k], np.float32),
      round_num=np.int32(0), active=np.eye(k, dtype=np.float32)[0], memory=np.zeros([k, feature_dim], np.float32),
      memory_count=np.float32(0), profile_gamma=np.float32(0), examples_seen=np.zeros([k], np.float32),
      id_slot=np.array([0] + [-1] * (MAX_EXPERT_IDS - 1), np.int32),
      slot_id=np.array([0] + [-1] * (k - 1), np.int32), next_id=np.int32(1),
      null_mmd=np.zeros([NULL_BUFFER], np.float32), null_jsd=np.zeros([NULL_BUFFER], np.float32),
      null_count=np.int32(0),
      pending_profiles=np.zeros([config.pending_capacity, feature_dim], np.float32), pending_count=np.int32(0),
      pending_histograms=np.zeros([config.pending_capacity, num_classes], np.float32),
      pending_sizes=np.zeros([config.pending_capacity], np.float32),
      objective=np.float32(0), optimal_objective=np.float32(0), solved_exactly=np.float32(0),
      label_centroids=np.zeros([config.max_clusters, num_classes], np.float32), num_label_clusters=np.int32(0),
      label_counts=np.zeros([k, config.max_clusters], np.float32),
      centroids=np.zeros([config.max_clusters, feature_dim], np.float32),
      centroid_id=np.full([config.max_clusters], -1, np.int32), num_centroids=np.int32(0),
      assigned_window=np.int32(-1), mixing=np.eye(k, dtype=np.float32),
      spawned=np.float32(0), reused=np.float32(0), match_mmd=np.float32(0))


def thresholds(state: dict, alpha: float) -> tuple[tf.Tensor, tf.Tensor]:
  """(delta_cov, delta_label): the (1 - alpha) quantiles of W0's null statistics (+inf before any)."""
  return (drift_statistics.null_threshold(state['null_mmd'], state['null_count'], alpha),
          drift_statistics.null_threshold(state['null_jsd'], state['null_count'], alpha))


def point_mmd(a: tf.Tensor, b: tf.Tensor, gamma_k) -> tf.Tensor:
  """MMD (Eq. 1) between point masses at a [..., D] and b [..., D]: sqrt(2 - 2 k(a, b))."""
  return tf.sqrt(tf.maximum(2.0 - 2.0 * tf.exp(-gamma_k * tf.reduce_sum(tf.square(a - b), -1)), 0.0))


def nearest_active(profile: tf.Tensor, memory: tf.Tensor, active: tf.Tensor) -> tf.Tensor:
  """The active slot whose memory is nearest (Euclidean, the order of the point-mass MMD) to profile [D] or to
  each of profiles [B, K, D] per slot."""
  distance = tf.reduce_sum(tf.square(profile - memory), -1)
  return tf.argmin(tf.where(active > 0, distance, np.inf), -1, output_type=tf.int32)


def sample_rows(rows: tf.Tensor, size: int, seed: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
  """Up to `size` rows of rows [N, ...] at random, zero-padded: (sample [size, ...], weights [size], 1 for real
  rows); the same `seed` picks the same rows."""
  order = tf.argsort(tf.random.stateless_uniform(tf.shape(rows)[:1], seed))[:size]
  taken = tf.gather(rows, order)
  padding = size - tf.shape(taken)[0]
  return (tf.ensure_shape(tf.pad(taken, [[0, padding]] + [[0, 0]] * (rows.shape.rank - 1)), [size] + rows.shape[1:]),
          tf.ensure_shape(tf.pad(tf.ones(tf.shape(order), tf.float32), [[0, padding]]), [size]))


def label_halves(labels: tf.Tensor, num_classes: int, seed: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
  """The normalized label histograms [C] of two random disjoint halves of a window's labels [n] (`seed` picks
  them; the first half holds ceil(n / 2))."""
  halves = drift_statistics.split_weights(tf.ones(tf.shape(labels)), seed + 4)
  return tuple(tf.ensure_shape(tf.math.divide_no_nan(
      tf.math.bincount(tf.cast(labels, tf.int32), half, num_classes, num_classes, tf.float32), tf.reduce_sum(half)),
                               [num_classes]) for half in halves)


def null_statistics(sample: tf.Tensor, sample_weights: tf.Tensor, labels: tf.Tensor, num_classes: int,
                    seed: tf.Tensor, unbiased: bool) -> tuple[tf.Tensor, tf.Tensor]:
  """One window's statistics under no shift, by construction: (MMD^2 between two random halves of its embedding
  sample [S, D] (weights [S], gamma_k by the median heuristic of the whole sample), JSD between the label
  histograms of two random halves of its labels [n]). `detection_statistics` compares halves of the same sizes, so
  the (1 - alpha) quantiles of these statistics are thresholds at the detection's sample sizes."""
  first, second = drift_statistics.split_weights(sample_weights, seed + 1)
  gamma = drift_statistics.median_heuristic_gamma(sample, sample_weights)
  return (drift_statistics.mmd_squared(sample, sample, gamma, first, second, unbiased),
          drift_statistics.jensen_shannon(*label_halves(labels, num_classes, seed)))


def detection_statistics(sample: tf.Tensor, sample_weights: tf.Tensor, reference: tf.Tensor,
                         reference_weights: tf.Tensor, label_half: tf.Tensor, reference_label_half: tf.Tensor,
                         seed: tf.Tensor, unbiased: bool) -> tuple[tf.Tensor, tf.Tensor]:
  """Algorithm 1's statistics between the current window and the reference (previous) one, each at the size of a
  null half: (MMD^2 between a random half of the current sample [S, D] and one of the reference's [S, D], gamma_k by
  the median heuristic of the two halves pooled; JSD between the histograms [C] of half of each window's labels)."""
  current_half, _ = drift_statistics.split_weights(sample_weights, seed + 2)
  reference_half, _ = drift_statistics.split_weights(reference_weights, seed + 3)
  gamma = drift_statistics.median_heuristic_gamma(tf.concat([sample, reference], 0),
                                                  tf.concat([current_half, reference_half], 0))
  return (drift_statistics.mmd_squared(sample, reference, gamma, current_half, reference_half, unbiased),
          drift_statistics.jensen_shannon(label_half, reference_label_half))


def build_client_round(model: tf.keras.Model, optimizer, batch_fn: task_lib.BatchFn, config: Config,
                       num_classes: int, num_modes: int):
  """The party's round as a `tf.function` (weights, broadcast state, dataset, stored state) ->
  (ClientResult with per-tensor weights, report for the server, metric sums, new client state)."""
  k_slots = config.num_branches
  trainable_index, non_trainable_index = network_pool.network_index(model, k_slots)

  @tf.function
  def run(weights, state, dataset, stored):
    examples, batches, _ = routing.client_examples(task_lib.model_batches(dataset, batch_fn))
    round_num, position = state['round_num'], tf.cast(stored[client_state.POSITION], tf.int32)
    window = method.window_of(round_num, config.window_rounds)
    seed = tf.stack([round_num, position])

    # Adoption: a pending party takes the expert of the nearest centroid of this window's assignment.
    expert_id = tf.cast(stored['expert_id'], tf.int32)
    pending, local_window = stored['pending'] > 0, tf.cast(stored['local_window'], tf.int32)
    adopt = pending & tf.equal(state['assigned_window'], window) & (state['num_centroids'] > 0)
    centroid = tf.argmin(tf.where(tf.range(config.max_clusters) < state['num_centroids'],
                                  tf.reduce_sum(tf.square(stored['profile'] - state['centroids']), -1), np.inf),
                         output_type=tf.int32)
    chosen_id = state['centroid_id'][centroid]
    expert_id = tf.where(adopt & (chosen_id >= 0), chosen_id, expert_id)
    local_window = tf.where(adopt & (chosen_id < 0), window, local_window)
    pending = pending & ~adopt
    slot = tf.clip_by_value(state['id_slot'][expert_id], 0, config.bootstrap_slot - 1)

    # Algorithm 1: embeddings, their sample and the label histogram.
    client_training.assign_weights(model, weights)
    features = model(examples['x'], training=False)[multi_branch.FEATURES]  # [N, K, D]
    encoder = slot if config.encoder == 'assigned' else tf.where(window >= 1, config.bootstrap_slot, slot)
    embeddings = tf.gather(features, encoder, axis=1)
    sample, sample_weights = sample_rows(embeddings, config.samples, seed)
    inputs, _ = sample_rows(tf.cast(examples['x'], tf.float32), config.samples, seed)
    histogram = drift_statistics.label_histogram(examples['y'], num_classes)
    profile = tf.reduce_mean(embeddings, 0)

    # Null statistics (W0): two random halves of the window's sample and of its labels.
    labels = tf.cast(examples['y'], tf.int32)
    null_mmd, null_jsd = null_statistics(sample, sample_weights, labels, num_classes, seed, config.unbiased_mmd)
    label_half = label_halves(labels, num_classes, seed)[0]  # What this window's detection compares (and keeps).

    # Detection: the first round of a window after the one of the party's reference statistics.
    delta_cov, delta_label = state['delta_cov'], state['delta_label']
    ref_window = tf.cast(stored['ref_window'], tf.int32)
    check = ((window >= 1) & (tf.cast(stored['checked_window'], tf.int32) < window) & (ref_window >= 0)
             & (ref_window < window) & tf.math.is_finite(delta_cov))
    reference = tf.gather(model(tf.cast(stored['ref_inputs'], model.inputs[0].dtype), training=False)[
        multi_branch.FEATURES], encoder, axis=1)  # The previous window's sample through today's encoder.
    mmd, jsd = detection_statistics(sample, sample_weights, reference, stored['ref_weights'], label_half,
                                    stored['ref_label_half'], seed, config.unbiased_mmd)
    shifted = check & ((mmd > delta_cov) | (jsd > delta_label))
    domain = routing.client_mode(examples)  # Simulation only: scores the detector, never decides.
    truly = tf.not_equal(domain, tf.cast(stored['ref_domain'], tf.int32))
    detection = collections.OrderedDict(
        true_shifts=tf.cast(check & truly, tf.float32), detected_shifts=tf.cast(shifted & truly, tf.float32),
        stable_checks=tf.cast(check & ~truly, tf.float32), false_alarms=tf.cast(shifted & ~truly, tf.float32))
    pending = pending | shifted

    output = network_pool.train_network(model, optimizer, weights, batches, slot, trainable_index,
                                         non_trainable_index, config.bootstrap_slot)
    sends = output.finite & ~pending & tf.not_equal(local_window, window)
    label_cluster, balance = flips_balance(histogram, slot, state, config)
    sent = output.num_examples * tf.cast(sends, tf.float32)
    result = network_pool.pool_result(output.update, slot, sent * balance, trainable_index, len(weights.trainable))
    label_counts = tf.one_hot(slot, k_slots)[:, tf.newaxis] * tf.one_hot(label_cluster, config.max_clusters)[
        tf.newaxis] * tf.cast(sends, tf.float32)
    slot_examples = tf.one_hot(slot, k_slots) * sent
    sums = routing.training_sums(output, domain, slot, num_modes, k_slots, slot_examples=slot_examples,
                                 label_counts=label_counts, **detection)
    report = collections.OrderedDict(
        valid=tf.cast(output.finite, tf.float32), shifted=tf.cast(shifted, tf.float32), profile=profile,
        histogram=histogram, size=tf.cast(tf.shape(examples['y'])[0], tf.float32),
        null_mmd=null_mmd, null_jsd=null_jsd)
    new_state = collections.OrderedDict(
        position=stored[client_state.POSITION], expert_id=tf.cast(expert_id, tf.float32),
        pending=tf.cast(pending, tf.float32), local_window=tf.cast(local_window, tf.float32),
        checked_window=tf.where(check, tf.cast(window, tf.float32), stored['checked_window']),
        ref_window=tf.cast(window, tf.float32), profile=tf.where(shifted, profile, stored['profile']),
        ref_inputs=inputs, ref_weights=sample_weights, ref_label_half=label_half, ref_domain=tf.cast(domain, tf.float32))
    return result, report, sums, new_state

  return run


def flips_balance(histogram: tf.Tensor, slot: tf.Tensor, state: dict, config: Config) -> tuple[tf.Tensor, tf.Tensor]:
  """FLIPS (Bhope et al., 2023; seed 003 Sec. 2.4, Algorithm 2 lines 19 and 23) as aggregation weights: (the
  party's label cluster, the factor of its update weight).

  FLIPS clusters parties by their label histograms and selects each round's participants so that every label
  cluster is equally represented. The suite's scenario chooses the participants, so the balance is made in the
  aggregate instead: a party of label cluster l training expert k weighs 1 / (L_k share_kl), where share_kl is
  cluster l's share of expert k's recent participants (a moving count, decay ASSIGNMENT_DECAY per round) and L_k the
  number of clusters among them; each cluster then carries the same total weight in expectation. Label clusters
  are those of W0's first `detection_rounds` rounds (k-means, k by Davies-Bouldin); factor 1 before them and with
  `--shiftex_flips=false`.
  """
  present = tf.range(config.max_clusters) < state['num_label_clusters']
  cluster = tf.argmin(tf.where(present, tf.reduce_sum(tf.square(histogram - state['label_centroids']), -1), np.inf),
                      output_type=tf.int32)
  counts = state['label_counts'][slot]
  share = tf.math.divide_no_nan(counts[cluster], tf.reduce_sum(counts))
  clusters = tf.reduce_sum(tf.cast(counts > 0, tf.float32))
  factor = tf.where((share > 0) & (state['num_label_clusters'] > 0), 1.0 / tf.maximum(clusters * share, 1e-6), 1.0)
  return cluster, factor if config.flips else tf.constant(1.0)


def _append(buffer: tf.Tensor, count: tf.Tensor, values: tf.Tensor, keep: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
  """Writes the kept rows of `values` after the first `count` rows of `buffer` (a ring: the oldest are replaced
  once it is full); returns (buffer, new count, capped at the buffer's size)."""
  capacity = tf.shape(buffer)[0]
  kept = tf.boolean_mask(values, keep)
  slots = (count + tf.range(tf.shape(kept)[0])) % capacity
  buffer = tf.tensor_scatter_nd_update(buffer, slots[:, tf.newaxis], kept)
  return buffer, tf.minimum(count + tf.shape(kept)[0], capacity)


def assign_clusters(state: dict, config: Config) -> dict:
  """Algorithm 2 lines 12-27 on the collected profiles of shifted parties: k-means (k by Davies-Bouldin), then per
  cluster reuse (memory within epsilon), spawn (a free slot gets Clone(theta_0)) or local fine-tuning (< gamma)."""
  mask = tf.range(config.pending_capacity) < state['pending_count']
  clustering = kmeans.cluster(state['pending_profiles'], mask, config.max_clusters, max_index=config.split_index)
  gamma_k = state['profile_gamma']
  active, memory, mixing = state['active'], state['memory'], state['mixing']
  id_slot, slot_id, next_id = state['id_slot'], state['slot_id'], state['next_id']
  centroid_id = tf.fill([config.max_clusters], -1)
  spawned = reused = match_total = tf.constant(0.0)
  slots = tf.range(config.num_branches)
  choices = []  # Per cluster, its expert in Eq. 2's numbering: a slot, K + b for the b-th new expert, -1 local.
  new_expert = tf.fill([config.num_branches], -1)  # b of the slots spawned in this assignment.
  for j in range(config.max_clusters):
    size = tf.reduce_sum(tf.cast(tf.equal(clustering.labels, j), tf.int32))
    exists = (j < clustering.num_clusters) & (size > 0)
    trained = exists & (size >= config.min_cluster_size)
    c = clustering.centroids[j]
    distance = tf.where(active > 0, point_mmd(c, memory, gamma_k), np.inf)
    best = tf.argmin(distance, output_type=tf.int32)
    free = (active <= 0) & (slots < config.bootstrap_slot)
    new_slot = tf.argmax(tf.cast(free, tf.int32), output_type=tf.int32)
    spawn = trained & (distance[best] > config.epsilon) & tf.reduce_any(free) & (next_id < MAX_EXPERT_IDS)
    reuse = trained & ~spawn
    moved = (1.0 - config.memory_rate) * memory[best] + config.memory_rate * c
    memory = tf.where((tf.equal(slots, best) & reuse)[:, tf.newaxis], moved, memory)
    memory = tf.where((tf.equal(slots, new_slot) & spawn)[:, tf.newaxis], c, memory)
    active = tf.where(tf.equal(slots, new_slot) & spawn, 1.0, active)
    clone_row = tf.one_hot(config.bootstrap_slot, config.num_branches)
    mixing = tf.where((tf.equal(slots, new_slot) & spawn)[:, tf.newaxis], clone_row, mixing)
    id_slot = tf.where(tf.equal(tf.range(MAX_EXPERT_IDS), next_id) & spawn, new_slot, id_slot)
    slot_id = tf.where(tf.equal(slots, new_slot) & spawn, next_id, slot_id)
    chosen = tf.where(spawn, next_id, tf.where(reuse, slot_id[best], -1))
    centroid_id = tf.where(tf.equal(tf.range(config.max_clusters), j), chosen, centroid_id)
    next_id += tf.cast(spawn, tf.int32)
    spawned += tf.cast(spawn, tf.float32)
    new_expert = tf.where(tf.equal(slots, new_slot) & spawn, tf.cast(spawned, tf.int32) - 1, new_expert)
    # A cluster that reuses an expert spawned for an earlier cluster of this assignment joins that new expert.
    reused_expert = tf.where(new_expert[best] >= 0, config.num_branches + new_expert[best], best)
    choices.append(tf.where(spawn, config.num_branches + tf.cast(spawned, tf.int32) - 1,
                            tf.where(reuse, reused_expert, -1)))
    reused += tf.cast(reuse, tf.float32)
    match_total += tf.where(trained, distance[best], 0.0)
  choice = tf.gather(tf.stack(choices), tf.maximum(clustering.labels, 0))
  scores = assignment_objectives(state, choice, mask, config)
  return dict(match_mmd=tf.math.divide_no_nan(match_total, spawned + reused), active=active, memory=memory,
              mixing=mixing, id_slot=id_slot, slot_id=slot_id, next_id=next_id, centroids=clustering.centroids,
              centroid_id=centroid_id, num_centroids=clustering.num_clusters, spawned=spawned, reused=reused,
              **scores)


ASSIGNMENT_KEYS = ('match_mmd', 'active', 'memory', 'mixing', 'id_slot', 'slot_id', 'next_id', 'centroids',
                   'centroid_id', 'num_centroids', 'spawned', 'reused', 'objective', 'optimal_objective',
                   'solved_exactly')


def assignment_objectives(state: dict, choice: tf.Tensor, mask: tf.Tensor, config: Config) -> dict:
  """Eq. 2 (`algorithms.core.facility_location`) of the heuristic's assignment `choice` [P] of the collected
  parties (-1: a small cluster's party, counted on its nearest existing expert, since the server does not know the
  expert it keeps), and when at most EXACT_PARTIES parties shifted, the exact optimum by exhaustive search."""
  profiles, active, memory = state['pending_profiles'], state['active'] > 0, state['memory']
  distance = tf.reduce_sum(tf.square(profiles[:, tf.newaxis] - memory[tf.newaxis]), -1)
  nearest = tf.argmin(tf.where(active[tf.newaxis], distance, np.inf), 1, output_type=tf.int32)
  choice = tf.where(choice < 0, nearest, choice)
  sizes = state['pending_sizes'] * tf.cast(mask, tf.float32)
  terms = dict(gamma_k=state['profile_gamma'], new_expert_cost=config.new_expert_cost,
               imbalance_weight=config.imbalance_weight)
  heuristic = facility_location.objective(choice[tf.newaxis], profiles, state['pending_histograms'], sizes, memory,
                                          active, **terms)[0]
  small = min(EXACT_PARTIES, config.pending_capacity)
  candidates = facility_location.assignments(small, config.num_branches)
  optimal, _ = facility_location.optimum(candidates, profiles[:small], state['pending_histograms'][:small],
                                         sizes[:small], memory, active, **terms)
  solved = tf.reduce_sum(tf.cast(mask, tf.int32)) <= small
  return dict(objective=heuristic, optimal_objective=tf.where(solved, optimal, 0.0),
              solved_exactly=tf.cast(solved, tf.float32))


def server_update(state: dict, reports: dict, sums: dict, config: Config):
  """The server's round after the parties' reports: W0's nulls and expert 1's memory, the window's collection of
  shifted profiles and, at the end of the detection period, the assignment (`assign_clusters`)."""
  state = dict(state)
  round_num = state['round_num']
  window = method.window_of(round_num, config.window_rounds)
  start = window * config.window_rounds + 1
  valid = reports['valid'] > 0
  in_bootstrap = tf.equal(window, 0)
  null_mmd, count = _append(state['null_mmd'], state['null_count'], reports['null_mmd'], valid & in_bootstrap)
  null_jsd, _ = _append(state['null_jsd'], state['null_count'], reports['null_jsd'], valid & in_bootstrap)
  state.update(null_mmd=null_mmd, null_jsd=null_jsd, null_count=count)
  w0 = tf.cast(valid & in_bootstrap, tf.float32)
  # W0: expert 1's memory and the matching bandwidth, moving averages of the rounds' profiles (rate rho).
  reporting = tf.reduce_sum(w0) > 0
  rate = tf.where(state['memory_count'] > 0, config.memory_rate, 1.0)
  round_profile = tf.math.divide_no_nan(tf.reduce_sum(w0[:, tf.newaxis] * reports['profile'], 0), tf.reduce_sum(w0))
  round_gamma = drift_statistics.median_heuristic_gamma(reports['profile'], w0)
  first_memory = tf.where(reporting, (1.0 - rate) * state['memory'][0] + rate * round_profile, state['memory'][0])
  state['memory'] = tf.tensor_scatter_nd_update(state['memory'], [[0]], first_memory[tf.newaxis])
  state['profile_gamma'] = tf.where(reporting, (1.0 - rate) * state['profile_gamma'] + rate * round_gamma,
                                    state['profile_gamma'])
  state['memory_count'] += tf.reduce_sum(w0)
  mixing = tf.eye(config.num_branches)
  if config.bootstrap_slot > 0:  # The end of W0 freezes expert 1 as theta_0.
    freeze = tf.equal(round_num, config.window_rounds)
    mixing = tf.where((tf.equal(tf.range(config.num_branches), config.bootstrap_slot) & freeze)[:, tf.newaxis],
                      tf.one_hot(0, config.num_branches), mixing)
  state['mixing'] = mixing
  collecting = (window >= 1) & (round_num < start + config.detection_rounds)
  pending_count = tf.where(tf.equal(round_num, start), 0, state['pending_count'])
  labelling = in_bootstrap & (round_num <= config.detection_rounds)  # W0's parties for FLIPS' label clusters.
  collected = valid & (((reports['shifted'] > 0) & collecting) | labelling)
  for key in ('histogram', 'size'):
    state[f'pending_{key}s'], _ = _append(state[f'pending_{key}s'], pending_count, reports[key], collected)
  profiles, pending_count = _append(state['pending_profiles'], pending_count, reports['profile'], collected)
  state.update(pending_profiles=profiles, pending_count=pending_count)
  for key in ('spawned', 'reused', 'match_mmd', 'objective', 'optimal_objective', 'solved_exactly'):
    state[key] = tf.constant(0.0)
  assign_round = (window >= 1) & tf.equal(round_num, start + min(config.detection_rounds, config.window_rounds) - 1)
  kept = {key: state[key] for key in ASSIGNMENT_KEYS}
  state.update(tf.cond(assign_round, lambda: assign_clusters(state, config), lambda: kept))
  state['assigned_window'] = tf.where(assign_round, window, state['assigned_window'])
  state['examples_seen'] += sums['slot_examples']
  state['domain_slots'] = ASSIGNMENT_DECAY * state['domain_slots'] + sums['routing']
  state['label_counts'] = ASSIGNMENT_DECAY * state['label_counts'] + sums['label_counts']
  label_round = in_bootstrap & tf.equal(round_num, min(config.detection_rounds, config.window_rounds))
  labels = tf.cond(label_round, lambda: kmeans.cluster(
      state['pending_histograms'], tf.range(config.pending_capacity) < state['pending_count'], config.max_clusters,
      max_index=config.split_index)[1:], lambda: (state['label_centroids'], state['num_label_clusters']))
  state['label_centroids'], state['num_label_clusters'] = labels
  return collections.OrderedDict((key, state[key]) for key in initial_server_state(1, 1, 1, config))


def merge_experts(weights: tff.learning.models.ModelWeights, state: dict, trainable_index, config: Config):
  """Algorithm 2 lines 36-40 in the last round of each window after W0: disjoint pairs of active experts whose
  flattened parameters have cosine similarity above tau, most similar first, become their average weighted by the
  examples each has trained on; returns (state with the merges' ids, memories and mixing rows, merges)."""
  k_slots = config.num_branches
  flat = tf.stack([tf.concat([tf.reshape(weights.trainable[i], [-1]) for i in trainable_index[k]], 0)
                   for k in range(k_slots)])
  unit = tf.math.l2_normalize(flat, 1)
  similarity = tf.matmul(unit, unit, transpose_b=True)
  round_num = state['round_num']
  window_end = (method.window_of(round_num, config.window_rounds) >= 1) & tf.equal(round_num % config.window_rounds, 0)
  candidates = (state['active'][:, None] > 0) & (state['active'][None] > 0) & (
      tf.range(k_slots)[:, None] < tf.range(k_slots)[None]) & window_end
  fresh = network_pool.changed_rows(state['mixing'])  # Spawned this round: their weights are not set yet.
  candidates = candidates & ~(fresh[:, None] | fresh[None])
  state = dict(state)
  mixing, merges = state['mixing'], tf.constant(0.0)
  for _ in range(k_slots // 2):
    score = tf.where(candidates, similarity, -np.inf)
    flat_best = tf.argmax(tf.reshape(score, [-1]), output_type=tf.int32)
    i, j = flat_best // k_slots, flat_best % k_slots
    merge = tf.reshape(score, [-1])[flat_best] > config.merge_similarity
    n_i, n_j = state['examples_seen'][i], state['examples_seen'][j]
    share = tf.math.divide_no_nan(n_i, n_i + n_j)
    share = tf.where(n_i + n_j > 0, share, 0.5)
    row = share * tf.one_hot(i, k_slots) + (1.0 - share) * tf.one_hot(j, k_slots)
    is_i = tf.equal(tf.range(k_slots), i) & merge
    is_j = tf.equal(tf.range(k_slots), j) & merge
    mixing = tf.where(is_i[:, None], row, mixing)
    state['memory'] = tf.where(is_i[:, None], share * state['memory'][i] + (1 - share) * state['memory'][j],
                               state['memory'])
    state['examples_seen'] = tf.where(is_i, n_i + n_j, tf.where(is_j, 0.0, state['examples_seen']))
    state['active'] = tf.where(is_j, 0.0, state['active'])
    state['id_slot'] = tf.where(merge & tf.equal(state['id_slot'], j), i, state['id_slot'])
    state['slot_id'] = tf.where(is_j, -1, state['slot_id'])
    involved = tf.equal(tf.range(k_slots), i) | tf.equal(tf.range(k_slots), j)
    candidates = candidates & ~(merge & (involved[:, None] | involved[None]))
    merges += tf.cast(merge, tf.float32)
  state['mixing'] = mixing
  return state, merges


def pool_step(config: Config, trainable_index, non_trainable_index):
  """The server step after the finalizer (`network_pool.with_server_step`): consolidation, then the round's edits
  of the pool (W0's freeze of theta_0, spawns, merges) applied to the networks."""

  def step(learning_state):
    state = dict(learning_state.client_work)
    state, merges = merge_experts(learning_state.global_model_weights, state, trainable_index, config)
    edited = network_pool.mixed_state(learning_state, trainable_index, non_trainable_index, state['mixing'])
    state['mixing'] = tf.eye(config.num_branches)
    client_work = collections.OrderedDict((key, state[key]) for key in learning_state.client_work)
    return edited._replace(client_work=client_work), collections.OrderedDict(
        merged=merges, num_experts=tf.reduce_sum(state['active']))

  return step


def build_client_work(model_fn, batch_fn: task_lib.BatchFn, client_optimizer, element_spec, input_shape: tuple,
                      feature_dim: int, num_classes: int, num_modes: int,
                      config: Config) -> tff.learning.templates.ClientWorkProcess:
  """ShiftEx's client work: detection at the parties, collection and assignment at the server."""
  weights_type = learning_process.model_weights_type(model_fn)
  data_type = client_state.client_data_type(element_spec, initial_client_state(input_shape, feature_dim, num_classes,
                                                                                  config))
  state_value = initial_server_state(feature_dim, num_modes, num_classes, config)
  state_type = tff.types.tensorflow_to_type(tf.nest.map_structure(
      lambda a: tf.TensorSpec(np.shape(a), tf.as_dtype(np.asarray(a).dtype)), state_value))

  @tff.tensorflow.computation(state_type)
  def next_round(state):
    """The state with the round counted, and what the parties receive: the round, the thresholds and this
    window's assignment."""
    state = collections.OrderedDict(state, round_num=state['round_num'] + 1)
    delta_cov, delta_label = thresholds(state, config.alpha)
    view = collections.OrderedDict(
        round_num=state['round_num'], delta_cov=delta_cov, delta_label=delta_label, centroids=state['centroids'],
        centroid_id=state['centroid_id'], num_centroids=state['num_centroids'],
        assigned_window=state['assigned_window'], id_slot=state['id_slot'],
        label_centroids=state['label_centroids'], num_label_clusters=state['num_label_clusters'],
        label_counts=state['label_counts'])
    return state, view

  view_type = next_round.type_signature.result[1]

  @tff.tensorflow.computation(weights_type, view_type, data_type)
  def client_round(weights, view, data):
    model = learning_process.client_model(model_fn)
    run = build_client_round(model, client_optimizer, batch_fn, config, num_classes, num_modes)
    return run(weights, view, data['dataset'], client_state.read(data['client_state']))

  report_type, sums_type = client_round.type_signature.result[1:3]

  @tff.tensorflow.computation(state_type, client_state.gathered_type(report_type), sums_type)
  def finish(state, reports, sums):
    new_state = server_update(state, reports, sums, config)
    delta_cov, delta_label = thresholds(new_state, config.alpha)
    metrics = collections.OrderedDict(
        client_training.finalize_train_metrics(sums),
        **routing.train_routing_metrics(sums['routing'], best_matching=True),
        **{key: sums[key] for key in ('true_shifts', 'detected_shifts', 'stable_checks', 'false_alarms')},
        spawned=new_state['spawned'], reused=new_state['reused'], match_mmd=new_state['match_mmd'],
        assignment_objective=new_state['objective'], optimal_objective=new_state['optimal_objective'],
        solved_exactly=new_state['solved_exactly'],
        label_clusters=tf.cast(new_state['num_label_clusters'], tf.float32),
        delta_cov=tf.where(tf.math.is_finite(delta_cov), delta_cov, 0.0),
        delta_label=tf.where(tf.math.is_finite(delta_label), delta_label, 0.0))
    return new_state, metrics

  return client_state.gathered_reports_work(state_value, next_round, client_round, finish)


def build_process(task: task_lib.Task, element_spec, hparams: method.Hyperparameters, config: Config):
  """(model_fn, the learning process, a party's initial client state)."""
  config.validate()
  k_slots = config.num_branches

  model_fn = learning_process.identical_networks_fn(lambda: task.model_fn(1), k_slots, hparams.seed,
                                                    stack_features=True)

  with tf.Graph().as_default():
    model = model_fn()
    feature_dim = int(model.output_shape[multi_branch.FEATURES][-1])
    input_shape = tuple(model.input_shape[1:])
    trainable_index, non_trainable_index = network_pool.network_index(model, k_slots)
  client_work = build_client_work(model_fn, task.batch_fn,
                                  tff.learning.optimizers.build_sgdm(hparams.client_learning_rate), element_spec,
                                  input_shape, feature_dim, task.num_classes, task.num_modes, config)
  process = learning_process.compose(model_fn, client_work, hparams.server_step,
                                     per_tensor_mean.PerTensorWeightedMeanFactory())
  process = network_pool.with_server_step(process, pool_step(config, trainable_index, non_trainable_index))
  return model_fn, process, initial_client_state(input_shape, feature_dim, task.num_classes, config)


def build_algorithm(task: task_lib.Task, element_spec, hparams: method.Hyperparameters,
                    evaluator: evaluation.Evaluator, config: Config) -> method.Algorithm:
  model_fn, process, initial_state = build_process(task, element_spec, hparams, config)
  k_slots = config.num_branches
  num_modes = task.num_modes

  def objective(outputs, batch, active, memory, domain_slots):
    """A test batch (one domain) scored by the experts of its domain's parties, weighted by their counts
    (`assigned`; a domain no party holds, or `memory`: the expert whose memory is nearest the batch's mean
    embedding)."""
    features = outputs[multi_branch.FEATURES]  # [B, K, D]
    if config.encoder == 'bootstrap':
      profile = tf.reduce_mean(features[:, config.bootstrap_slot], 0)
    else:
      profile = tf.reduce_mean(features, 0)
    share = tf.one_hot(nearest_active(profile, memory, active), k_slots)
    if config.evaluation == 'assigned':
      share = routing.assigned_share(domain_slots, batch, share)
    return routing.shared_result(outputs, batch, share, num_modes)

  evaluate = evaluation.routed_evaluation(
      evaluator.with_model(model_fn()), objective,
      lambda state: (state['active'], state['memory'], state['domain_slots']), [num_modes, k_slots],
      best_matching=True)
  return method.Algorithm(process, evaluate, shift_free=False,
                          initial_client_state=initial_state,
                          model_fn=model_fn)
