"""FedTKM: federated k-means with a temporal prior, aggregation-only (Section 3.2, Algorithm 2, Eq. 11-13, 27).

One round, as one TFF computation (client work; broadcast, mean and FedAdam come from `learning_process`):

  server -> clients   network weights, centers c [K, D] and distance scalars alpha [K] (alpha_1 = 1).
  clients             1. with the broadcast weights, the scaled distances alpha_k ||f(w, x) - c_k|| of every
                         example; the client's cluster is argmin_k d_ik with d_ik their mean over D_i (Eq. 11), or
                         the cluster most of its examples are nearest to (`client_rule='majority_vote'`, the public
                         code's rule); branch k*_i = that cluster;
                      2. local training on Eq. 4 for branch k*_i (`objectives.selected_branch`, shared with FedTEM);
                      3. with the updated weights, the same rule again: r_i = onehot(cluster) (r_i1 = q_i(t)), and
                         the feature sum |D_i| f-bar_i.
  clients -> server   only aggregates: q-bar(t), the unweighted mean of r_i over the clients that take part (Eq. 12,
                      q-bar = its first entry: `federated_sum` of r_i over `federated_sum` of 1); `federated_sum` of
                      r_ik |D_i| f-bar_i and of r_ik |D_i|; the example-weighted mean of the model updates; summed
                      metrics. `aggregation_only.clients_to_server_intrinsics` lists how
                      values leave the clients, and a test proves every one is a sum or a mean.
  server              centers c_k = sum_i r_ik |D_i| f-bar_i / sum_i r_ik |D_i| (Eq. 12), a cluster with no client
                      keeps its center; the prior q~(t) (`algorithms.core.temporal_prior`); the step
                      eta_t = 2 |0.5 - q~(t)| eta_max (Eq. 27) or eta_max (`step_schedule='constant'`); and
                      alpha_2 <- exp(eta_t (q~(t) - q-bar(t))) alpha_2 (Eq. 13).

Eq. 13 moves alpha_2 against the gap between the prior and the observed share: when fewer clients than the prior
expects are nearest to c_1, alpha_2 grows, the distances to c_2 grow, and more clients go to cluster 1.

Choices where the paper is ambiguous (flags where a user may want the other reading):
- Ties d_i1 = d_i2 go to cluster 1 (argmin takes the first); the paper's q_i = 1[d_i1 < d_i2] sends them to 2.
  Ties have probability ~0 with float features.
- |D_i| and f-bar_i are over the examples the client trains on in the round (as FedTEM).
- A client whose training or features are not finite is left out of the round (`client_training`): r_i = 0 and
  it is not counted in q-bar's denominator.
- The temporal prior is defined for K = 2 (mode 1 = day = branch 1). With K > 2 only prior `none` is allowed: all
  alpha_k stay 1 and FedTKM is federated k-means of client feature means.
- Prior `soft` (Appendix A.3, written for FedTEM) is available: its observed ratio (Eq. 25) is the aggregated share
  of examples whose scaled distance is smallest to c_1.
- `center_decay` b (default 0.7; b = 0 is Eq. 12 exactly), for the reason FedTEM has `statistics_decay`: Eq. 12
  replaces c_k by this round's estimate, and near q~ = 0 or 1 one client of the rare mode sent to the other cluster
  becomes its center. Measured on the synthetic task (linear shift, T = 32, 256 rounds): with b = 0, seed 1's
  clusters swapped at round ~105 (q ~ 0) and stayed swapped (routing accuracy 0.0 from then on; alpha_2 alone did
  not swap them back). With b > 0 each center keeps a decayed mass and moves by the online k-means update
  (`online_average`).
- `alpha_leak` lambda (default 0: Eq. 13 exactly), a departure for a prior that does not match the true shift:
  log alpha_2 <- (1 - lambda) log alpha_2 + eta_t (q~(t) - q-bar(t)). Eq. 13 integrates the gap between the prior
  and the observed share without forgetting, the quantile estimator of Andrew et al. it follows. When the true
  q(t) = |2 (t mod T) / T - 1|^p has p != 1 and the prior is linear, the gap has a sign on average (p = 0.25: the
  prior averages 0.5 over a period, the truth about 0.8), so log alpha_2 winds up until a whole mode crosses the
  threshold, and Eq. 12 then moves the other cluster's center onto that mode: both centers sit on one mode and the
  separation is lost, found again later with either labelling. Measured on the synthetic task (linear shift, T = 32,
  p = 0.25, seed 0; `log_distance_ratio_<m>` and `center_distance` traces): the modes were separated at round 145
  (log(d_1 / d_2) of day clients -0.33, of night clients +0.49, ||c_1 - c_2|| 7.8) while log alpha_2 fell to -0.31;
  by round 169 day clients had crossed into cluster 2 and both modes sat at about 0 with ||c_1 - c_2|| 1.2; at round
  209 the modes were apart again with labels swapped (+0.33 / -0.37), and the test routing ended at 0.125 (adjusted
  Rand index 1.0: separated, swapped). With a leak the wind-up is bounded, about eta-bar * gap / lambda;
  docs/results/diurnal_or_nocturnal.md gives the runs with lambda = 0.2.
- `orientation` (default `paper`: Eq. 11-13 as written), a departure for the labels of the two clusters. The prior
  speaks of cluster 1 (q~(t) is the share the prior expects there), but nothing in Eq. 11-13 ties cluster 1 to the
  day mode: before the features separate the modes alpha_2, one threshold on log(d_i1 / d_i2), moves the whole
  population at once (q-bar is 0 or 1 whatever q~), and when they separate each mode keeps whichever center it is
  nearer to (Eq. 12 moves a center to the clients it holds); Eq. 13 then only shifts the threshold. Measured on real
  handwriting (the emnist task on scikit-learn's digits, night = the digits turned 90 degrees, linear shift, p = 1,
  T = 32, 320 rounds, 6 clients a round, seed 5; `log_distance_ratio_<m>` traces in
  docs/results/diurnal_or_nocturnal.md): the modes separate at round ~120 with day nearer c_2 (+0.98 / -1.18), from
  then on every test batch of a mode goes to the other mode's cluster (routing 0.00, 1.00 under the best matching)
  while alpha_2 oscillates in 0.67-1.25, short of the exp(0.6) = 1.8 that would move a mode across.
  `prior_anchored` relabels the clusters when the observed share follows the opposite of the prior: the server
  accumulates e = sum_t (2 q~(t) - 1)(2 q-bar(t) - 1) over each period of T rounds (e < 0 exactly when
  sum_t (q-bar - (1 - q~))^2 < sum_t (q-bar - q~)^2) and, at the period's end, if e < 0 swaps c_1 and c_2, their
  masses, alpha_2 -> 1 / alpha_2 (alpha_1 stays 1), and the branch each cluster trains and routes to
  (`branches`, a permutation, the identity at first). Every example keeps its partition and its branch: d_1 <=
  alpha_2 d_2 before the swap is alpha_2 d_2 <= d_1 after it with the labels exchanged (ties aside), so a swap
  changes no training step; it changes which cluster q~ speaks of, and with it Eq. 13's later steps. Only q-bar, an
  aggregate, enters. The prior orientation of routing (`routing_accuracy`, `train_routing_accuracy`: mode k in
  cluster k) is read on clusters, which under `paper` are the branches.
- Initialization: c_k ~ N(0, 0.1^2) per coordinate from the run's seed (the public code draws the same, unseeded);
  alpha = 1.
- Test-time routing (Section 3.2: "at test time, we use a minibatch to estimate d_ik"): the branch of each test
  minibatch is argmin of its mean scaled distances (Eq. 11 on the batch), or per sample (`eval_routing`). The
  distances are scaled by the learned alpha as in Eq. 11 (`eval_scaling='learned'`, as the public code's test);
  `eval_scaling='none'` uses alpha = 1, the counterpart of FedTEM's uniform pi on the balanced test set.

Simulation-only metrics (they use the true mode carried in the batches, which no decision uses):
`train_routing_accuracy`, `assignment_accuracy` (clients whose post-training cluster is their mode) and the test
`routing_accuracy`; for prior `none`, under the best matching of modes to branches; `log_distance_ratio_<m>`, the
mean over the round's clients of mode m of log(d_i1 / d_iK) with unscaled distances before training (a client joins
cluster 1 when log alpha_2 exceeds its value: the modes are separable by alpha_2 alone when the modes' values lie on
either side of it). `alpha_2`, `q_bar`, `prior` and `center_distance` (||c_1 - c_K||) are reported every round, and
with `prior_anchored` `clusters_swapped` (1 in a round whose period end swapped the labels).
"""

import collections
import dataclasses

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from algorithms.core import client_training
from algorithms.core import evaluation
from algorithms.core import learning_process
from algorithms.core import method
from algorithms.core import objectives
from algorithms.core import online_average
from algorithms.core import routing
from models import multi_branch
from algorithms.core import temporal_prior
from tasks import task as task_lib

NAME = 'fedtkm'
# Its initial clustering is drawn from the run's seed (its Config's `seed`, set from it).
SEEDED_BUILD = True
SENDS = method.Sends(
    method_sums=('assignment', 'weighted_count', 'weighted_feature_sum', 'participants', 'mode_one_count',
                 'pass_count'),
    simulation_only=('routing', 'mode_log_ratio', 'mode_clients'))
DEFAULTS = method.Defaults(
    {'server_optimizer': 'adam', 'client_epochs': 1},
    source=('Zhu et al., "Diurnal or Nocturnal? Federated Learning of Multi-branch Networks from Periodically '
            'Shifting Distributions", 2022, Table 2 (server optimizer Adam, one local epoch; its rate and epsilon '
            'per dataset are the tasks\' defaults)'))
PRIORS = temporal_prior.PRIORS + ('none',)
CLIENT_RULES = ('mean_distance', 'majority_vote')
STEP_SCHEDULES = ('prior_weighted', 'constant')
EVAL_ROUTINGS = ('batch', 'sample')
EVAL_SCALINGS = ('learned', 'none')
ORIENTATIONS = ('paper', 'prior_anchored')


@dataclasses.dataclass(frozen=True)
class Config(objectives.LabelSmoothing):
  """FedTKM's own hyperparameters (see the module docstring). The settings are flags by their first names (`--prior`
  is FedTEM's too); the other fields come from the shared hyperparameters (`method.with_shared`)."""
  prior: str = method.setting('linear', f'Temporal prior of FedTEM/FedTKM: one of {", ".join(PRIORS)}.',
                              flag='prior')
  eta_max: float = method.setting(0.1, 'FedTKM step of the distance-scalar update (Eq. 13, 27).', flag='eta_max')
  step_schedule: str = method.setting('prior_weighted', 'FedTKM eta_t: prior_weighted (Eq. 27, 2 |0.5 - q~(t)| '
                                      'eta_max) or constant (eta_max).', flag='eta_schedule')
  client_rule: str = method.setting('mean_distance', 'FedTKM client cluster: mean_distance (Eq. 11) or '
                                    'majority_vote (of the examples\' nearest centers, as the public code).',
                                    flag='client_rule')
  eval_scaling: str = method.setting('learned', 'FedTKM test distances: scaled by the learned alpha (Eq. 11) or '
                                     'none (alpha = 1).', flag='eval_scaling')
  center_decay: float = method.setting(0.7, 'FedTKM online k-means decay of the center masses; 0 is Eq. 12 exactly '
                                       '(see algorithms/methods/fedtkm.py).', flag='center_decay')
  alpha_leak: float = method.setting(0.0, 'FedTKM leak lambda of log alpha_2 toward 0 each round; 0 is Eq. 13 exactly '
                                     '(see algorithms/methods/fedtkm.py).', flag='alpha_leak')
  orientation: str = method.setting('paper', 'FedTKM cluster labels: paper (Eq. 11-13 as written) or prior_anchored '
                                    '(at each period\'s end, swap the two clusters if q-bar followed 1 - q~; see '
                                    'algorithms/methods/fedtkm.py).', flag='fedtkm_orientation')
  period: int = 32
  num_branches: int = 2
  eval_routing: str = 'batch'
  seed: int = 0

  def validate(self) -> None:
    method.check_settings(self, NAME, {'prior': PRIORS, 'client_rule': CLIENT_RULES,
                                       'step_schedule': STEP_SCHEDULES, 'eval_scaling': EVAL_SCALINGS,
                                       'orientation': ORIENTATIONS})
    if self.orientation == 'prior_anchored' and self.prior == 'none':
      raise ValueError('--fedtkm_orientation=prior_anchored needs a temporal prior; got --prior=none.')
    if self.num_branches < 2:
      raise ValueError(f'FedTKM needs at least 2 branches; got {self.num_branches}.')
    temporal_prior.check_modes(self.prior, self.num_branches)
    objectives.LabelSmoothing.validate(self)
    if self.eval_routing not in EVAL_ROUTINGS:
      raise ValueError(f'--eval_routing must be one of {", ".join(EVAL_ROUTINGS)}; got {self.eval_routing!r}.')
    if not 0.0 <= self.center_decay < 1.0:
      raise ValueError(f'--center_decay must be in [0, 1); got {self.center_decay}.')
    if not 0.0 <= self.alpha_leak < 1.0:
      raise ValueError(f'--alpha_leak must be in [0, 1); got {self.alpha_leak}.')
    if self.eta_max < 0.0:
      raise ValueError(f'--eta_max must be >= 0; got {self.eta_max}.')


# Where each setting's default comes from (`algorithms.registry` checks one per setting; docs/running.md
# shows them).
SETTING_SOURCES = {
    **objectives.SETTING_SOURCES,
    'prior': 'paper: Section 4, the linear temporal prior of the main results',
    'eta_max': "suite choice: Appendix A.4 gives Eq. 27's form, not eta_max's value",
    'step_schedule': 'paper: Appendix A.4, Eq. 27 (2 |0.5 - q~(t)| eta_max)',
    'client_rule': "paper: Eq. 11, the mean distance over the client's examples",
    'eval_scaling': 'paper: Eq. 11, distances scaled by the learned alpha',
    'center_decay': ("departure: Eq. 12 replaces the centers by the round's estimate (0); with 0 seed 1's clusters "
                     'swapped at round ~105 and stayed swapped, routing accuracy 0.0 from then on (synthetic task, '
                     'linear shift, T = 32, 256 rounds; algorithms/methods/fedtkm.py)'),
    'alpha_leak': 'paper: Eq. 13 as written (0)',
    'orientation': 'paper: Eq. 11-13 as written',
}


# ----------------------------------------------------------------------------------------------------------------
# Distances and cluster choice.


def scaled_distances(features: tf.Tensor, centers: tf.Tensor, scales: tf.Tensor) -> tf.Tensor:
  """alpha_k ||f - c_k|| [N, K] for features [N, D], centers [K, D], scales alpha [K] (the summand of Eq. 11)."""
  return scales * tf.norm(features[:, tf.newaxis] - centers[tf.newaxis], axis=-1)


def nearest_counts(distances: tf.Tensor) -> tf.Tensor:
  """Examples nearest to each cluster [K] from scaled distances [N, K]."""
  return tf.reduce_sum(tf.one_hot(tf.argmin(distances, axis=-1), tf.shape(distances)[-1]), axis=0)


def client_cluster(distances: tf.Tensor, rule: str) -> tf.Tensor:
  """The cluster of a set of examples (int32): argmin_k of the mean scaled distance d_k (Eq. 11), or the cluster
  most examples are nearest to (`majority_vote`)."""
  if rule == 'mean_distance':
    return tf.argmin(tf.reduce_mean(distances, axis=0), output_type=tf.int32)
  return tf.argmax(nearest_counts(distances), output_type=tf.int32)


# ----------------------------------------------------------------------------------------------------------------
# Server update.


def initial_clustering(num_clusters: int, feature_dim: int, seed: int,
                       anchored: bool = False) -> collections.OrderedDict:
  """c_k ~ N(0, 0.1^2) per coordinate from `seed`, alpha = 1, no accumulated mass (float32 numpy); `anchored`
  (orientation `prior_anchored`) adds the branch of each cluster [K] (the identity) and the period's orientation
  evidence e = 0."""
  rng = np.random.default_rng(seed)
  clustering = collections.OrderedDict(
      centers=rng.normal(0.0, 0.1, size=(num_clusters, feature_dim)).astype(np.float32),
      scales=np.ones([num_clusters], np.float32),
      mass=np.zeros([num_clusters], np.float32))
  if anchored:
    clustering.update(branches=np.arange(num_clusters, dtype=np.int32), evidence=np.float32(0.0))
  return clustering


def branch_of(clustering, cluster: tf.Tensor) -> tf.Tensor:
  """The branch cluster(s) `cluster` train and route to: `clustering['branches']` where the orientation is
  anchored, else the cluster itself."""
  if 'branches' not in clustering:
    return cluster
  return tf.gather(clustering['branches'], cluster)


def oriented(clustering, round_num: tf.Tensor, period: int, prior: tf.Tensor,
             observed_share: tf.Tensor) -> tuple[collections.OrderedDict, tf.Tensor]:
  """(clustering, swapped): `prior_anchored` (module docstring). Adds (2 q~ - 1)(2 q-bar - 1) to the evidence; at
  the end of a period (round_num % period == 0) swaps the two clusters (centers, mass, alpha_2 -> 1 / alpha_2,
  branches) if the evidence is negative, and starts the next period's at 0."""
  evidence = clustering['evidence'] + (2.0 * prior - 1.0) * (2.0 * observed_share - 1.0)
  period_end = tf.equal(round_num % period, 0)
  swapped = tf.logical_and(period_end, evidence < 0.0)
  pick = lambda value, swapped_value: tf.where(swapped, swapped_value, value)
  scales = clustering['scales']
  return collections.OrderedDict(
      centers=pick(clustering['centers'], tf.reverse(clustering['centers'], [0])),
      scales=pick(scales, tf.stack([scales[0], 1.0 / scales[1]])),
      mass=pick(clustering['mass'], tf.reverse(clustering['mass'], [0])),
      branches=pick(clustering['branches'], tf.reverse(clustering['branches'], [0])),
      evidence=tf.where(period_end, 0.0, evidence)), swapped


def updated_centers(centers: tf.Tensor, mass: tf.Tensor, weighted_feature_sums: tf.Tensor,
                    weighted_counts: tf.Tensor, center_decay: float) -> tuple[tf.Tensor, tf.Tensor]:
  """(centers, mass): Eq. 12, c_k = sum_i r_ik |D_i| f-bar_i / sum_i r_ik |D_i|, for `center_decay` 0; otherwise
  the online average of the old center and that estimate (`online_average`). A cluster with no client keeps c_k."""
  blend = online_average.blend(mass, weighted_counts, center_decay)
  estimate = weighted_feature_sums / tf.maximum(weighted_counts, 1e-12)[:, tf.newaxis]
  return blend.average(centers, estimate), blend.mass


def step_size(prior: tf.Tensor, eta_max: float, schedule: str) -> tf.Tensor:
  """eta_t = 2 |0.5 - q~(t)| eta_max (Eq. 27), or eta_max for the `constant` schedule."""
  if schedule == 'constant':
    return tf.constant(eta_max, tf.float32)
  return 2.0 * tf.abs(0.5 - prior) * eta_max


def updated_scales(scales: tf.Tensor, prior: tf.Tensor, observed_share: tf.Tensor, eta: tf.Tensor,
                   leak: float = 0.0) -> tf.Tensor:
  """Eq. 13: alpha_2 <- exp(eta_t (q~(t) - q-bar(t))) alpha_2; alpha_1 stays 1. `scales` [2]. With `leak` lambda > 0
  (a departure, module docstring): log alpha_2 <- (1 - lambda) log alpha_2 + eta_t (q~(t) - q-bar(t))."""
  log_scale = (1.0 - leak) * tf.math.log(scales[1:]) + eta * (prior - observed_share)
  return tf.concat([scales[:1], tf.exp(log_scale)], axis=0)


# ----------------------------------------------------------------------------------------------------------------
# The client work process.


def build_client_update(model: tf.keras.Model, client_optimizer: tff.learning.optimizers.Optimizer,
                        batch_fn: task_lib.BatchFn, num_branches: int, num_modes: int, config: Config):
  """The client's round as a `tf.function` (weights, clustering, dataset) -> (ClientResult, cluster statistics,
  summed metrics): Eq. 11 branch choice, Eq. 4 training, post-training cluster and feature sum."""

  def distances(x, clustering):
    features = model(x, training=False)[multi_branch.FEATURES]
    return features, scaled_distances(features, clustering['centers'], clustering['scales'])

  @tf.function(autograph=False)
  def run(weights, clustering, dataset):
    examples, batches, _ = routing.client_examples(task_lib.model_batches(dataset, batch_fn))
    client_training.assign_weights(model, weights)
    _, before = distances(examples['x'], clustering)
    chosen = client_cluster(before, config.client_rule)  # Eq. 11
    branch = branch_of(clustering, chosen)
    unscaled = tf.reduce_mean(before / clustering['scales'], axis=0)
    log_ratio = tf.math.log(unscaled[0]) - tf.math.log(unscaled[-1])  # The client joins 1 iff log alpha_2 > this.
    objective = objectives.selected_branch(branch, config.smoothing_weight, config.smoothing_epsilon)
    training = client_training.local_training(model, client_optimizer, weights, batches, objective)
    features, after = distances(examples['x'], clustering)
    cluster = client_cluster(after, config.client_rule)
    r = tf.one_hot(cluster, num_branches)  # r_i1 = q_i(t).
    count = tf.cast(tf.shape(features)[0], tf.float32)
    mode = routing.client_mode(examples)
    statistics = collections.OrderedDict(
        assignment=r, weighted_count=r * count,
        weighted_feature_sum=r[:, tf.newaxis] * tf.reduce_sum(features, axis=0)[tf.newaxis])
    training = client_training.excluded_unless(training, client_training.all_finite((statistics, after)))
    statistics = client_training.exclude_unless(training.finite, statistics)
    statistics['participants'] = tf.cast(training.finite, tf.float32)
    sums = routing.training_sums(
        training, mode, chosen, num_modes, num_branches,
        assignment=routing.client_confusion(mode, cluster, num_modes, num_branches),
        mode_one_count=nearest_counts(after)[0], pass_count=count,
        mode_log_ratio=tf.one_hot(mode, num_modes) * log_ratio, mode_clients=tf.one_hot(mode, num_modes))
    result = tff.learning.templates.ClientResult(update=training.update, update_weight=training.num_examples)
    return result, statistics, sums

  return run


def build_client_work(model_fn: learning_process.ModelFn, batch_fn: task_lib.BatchFn,
                      client_optimizer: tff.learning.optimizers.Optimizer, element_spec, num_branches: int,
                      num_modes: int, config: Config) -> tff.learning.templates.ClientWorkProcess:
  """FedTKM's client work; its server state is (round_num, clustering: centers, scales, mass and, anchored, branches
  and evidence; previous prior value)."""
  config = dataclasses.replace(config, num_branches=num_branches)
  config.validate()
  use_prior = config.prior != 'none'
  weights_type = learning_process.model_weights_type(model_fn)
  data_type = learning_process.client_data_type(element_spec)
  anchored = config.orientation == 'prior_anchored'
  clustering_value = initial_clustering(num_branches, learning_process.feature_dim(model_fn), config.seed, anchored)
  clustering_type = learning_process.struct_type(clustering_value)

  @tff.tensorflow.computation(weights_type, clustering_type, data_type)
  def client_update(weights, clustering, dataset):
    model = learning_process.client_model(model_fn)
    run = build_client_update(model, client_optimizer, batch_fn, num_branches, num_modes, config)
    return run(weights, clustering, dataset)

  _, statistics_type, sums_type = client_update.type_signature.result

  @tff.tensorflow.computation(np.int64, clustering_type, np.float32, statistics_type, sums_type)
  def server_update(round_num, clustering, previous_prior, totals, sums):
    centers, mass = updated_centers(clustering['centers'], clustering['mass'], totals['weighted_feature_sum'],
                                    totals['weighted_count'], config.center_decay)
    q_bar = totals['assignment'][0] / tf.maximum(totals['participants'], 1.0)  # Unweighted mean of r_i1 (Eq. 12).
    if use_prior:
      observed_ratio = sums['mode_one_count'] / tf.maximum(sums['pass_count'], 1.0)  # Eq. 25, aggregated.
      prior = temporal_prior.prior_value(config.prior, round_num, config.period, previous_prior, observed_ratio)
      scales = updated_scales(clustering['scales'], prior, q_bar,
                              step_size(prior, config.eta_max, config.step_schedule), config.alpha_leak)
    else:
      prior, scales = previous_prior, clustering['scales']
    clustering = collections.OrderedDict(clustering, centers=centers, scales=scales, mass=mass)
    orientation_metrics = {}
    if anchored:
      clustering, swapped = oriented(clustering, round_num, config.period, prior, q_bar)
      orientation_metrics['clusters_swapped'] = tf.cast(swapped, tf.float32)
    metrics = collections.OrderedDict(
        client_training.finalize_train_metrics(sums),
        **routing.train_routing_metrics(sums['routing'], best_matching=not use_prior),
        assignment_accuracy=routing.routing_accuracy(sums['assignment'], best_matching=not use_prior),
        prior=prior if use_prior else tf.constant(np.nan, tf.float32), q_bar=q_bar, alpha_2=clustering['scales'][1],
        center_distance=tf.norm(centers[0] - centers[-1]), **orientation_metrics,
        **{f'log_distance_ratio_{m}': sums['mode_log_ratio'][m] / sums['mode_clients'][m] for m in range(num_modes)})
    return clustering, prior, metrics

  @tff.tensorflow.computation(np.int64)
  def increment(round_num):
    return round_num + 1

  @tff.federated_computation
  def initialize():
    return tff.federated_value(collections.OrderedDict(
        round_num=np.int64(0), clustering=clustering_value, prior_value=np.float32(1.0)), tff.SERVER)

  state_type = initialize.type_signature.result

  @tff.federated_computation(state_type, tff.FederatedType(weights_type, tff.CLIENTS),
                             tff.FederatedType(data_type, tff.CLIENTS))
  def next_fn(state, weights, client_data):
    round_num = tff.federated_map(increment, state.round_num)
    result, statistics, sums = tff.federated_map(client_update, (
        weights, tff.federated_broadcast(state.clustering), client_data))
    totals = tff.federated_sum(statistics)
    clustering, prior, measurements = tff.federated_map(server_update, (
        round_num, state.clustering, state.prior_value, totals, tff.federated_sum(sums)))
    new_state = tff.federated_zip(collections.OrderedDict(round_num=round_num, clustering=clustering,
                                                          prior_value=prior))
    return tff.templates.MeasuredProcessOutput(new_state, result, measurements)

  return tff.learning.templates.ClientWorkProcess(initialize, next_fn)


def build_process(model_fn: learning_process.ModelFn, batch_fn: task_lib.BatchFn, element_spec,
                  client_learning_rate: float, server_step: learning_process.ServerStep,
                  num_branches: int, num_modes: int, config: Config) -> tff.learning.templates.LearningProcess:
  client_work = build_client_work(model_fn, batch_fn, tff.learning.optimizers.build_sgdm(client_learning_rate),
                                  element_spec, num_branches, num_modes, config)
  return learning_process.compose(model_fn, client_work, server_step)


# ----------------------------------------------------------------------------------------------------------------
# Evaluation.


def evaluation_objective(num_modes: int, num_branches: int, routing_rule: str, scaling: str):
  """objective(outputs, batch, clustering): the cluster of each test batch is argmin of its mean scaled distance
  (Eq. 11 on the batch), or per sample; `scaling='none'` uses alpha = 1. The examples are scored by their
  cluster's branch (`branch_of`); the routing counts are of clusters (mode k in cluster k is the prior's
  orientation)."""

  def objective(outputs, batch, clustering):
    scales = tf.ones_like(clustering['scales']) if scaling == 'none' else clustering['scales']
    distances = scaled_distances(outputs[multi_branch.FEATURES], clustering['centers'], scales)
    if routing_rule == 'batch':
      clusters = routing.batch_branches(batch, client_cluster(distances, 'mean_distance'))
    else:
      clusters = tf.argmin(distances, axis=-1, output_type=tf.int32)
    return routing.routed_result(outputs, batch, branch_of(clustering, clusters), num_modes, num_branches,
                                 routes=clusters)

  return objective


def build_algorithm(task: task_lib.Task, element_spec, hparams: method.Hyperparameters,
                    evaluator: evaluation.Evaluator, config: Config) -> method.Algorithm:
  """FedTKM on the task's K-branch network, test batches routed by the scaled distances (`evaluation_objective`)."""
  config = method.with_shared(config, hparams)
  process = build_process(*method.process_args(task, element_spec, hparams), hparams.num_branches, task.num_modes,
                          config)
  objective = evaluation_objective(task.num_modes, hparams.num_branches, config.eval_routing, config.eval_scaling)
  evaluate = evaluation.routed_evaluation(
      evaluator, objective, lambda state: (state['clustering'],),
      [task.num_modes, hparams.num_branches], best_matching=config.prior == 'none')
  return method.Algorithm(process, evaluate)
