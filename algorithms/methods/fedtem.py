"""FedTEM: federated EM of a feature-space GMM with a temporal prior (Section 3.1, Algorithm 1, Appendix A.1-A.6).

One round, as TFF computations (all in the client work; broadcast, mean and FedAdam come from `learning_process`):

  server -> clients   network weights (TFF broadcast) and the GMM (mu [K, D], sigma^2 [K, D], pi [K]).
  clients, phase 1    1. with the broadcast weights, the client estimate of its mode: the MLE pi*_i (Eq. 5) or the
                         posterior of Eq. 22 (`client_estimate`); branch k*_i = argmax (`greedy`) or a draw from it
                         (`sample`);
                      2. local training on Eq. 4 for branch k*_i (`objectives.selected_branch`);
                      3. with the updated weights: the feature statistics of Eq. 9 / Eq. 24 (n_i, sum f,
                         sum (f - mean_i)^2), the MLE pi~*_i (Eq. 5 with Eq. 6), and the count of samples whose
                         posterior favours mode 1 (Eq. 25, for the soft prior).
  clients -> server   the model update with |D_i| (example-weighted mean, FedAdam), and one ranking key per client:
                      (score, tie-break), score = log pi~*_i1 - log(1 - pi~*_i1), tie-break a uniform draw keyed by
                      the round and the client's data. It reaches the server through `tff.federated_aggregate` with
                      a concatenating accumulator (TFF 0.87 has no federated_collect). Nothing else per client
                      reaches the server: no features, no labels, no GMM parameters.
  server              the prior q~(t) (`algorithms.core.temporal_prior`; the soft prior's observed ratio is an
                      aggregate, sum of Eq. 25 counts / sum |D_i|), and the threshold: the key of the
                      floor(q~(t) m + 1/2)-th highest client in (score, tie-break) order (Eq. 10).
  server -> clients   the threshold (broadcast).
  clients, phase 2    r_i1 = 1[key_i >= threshold], r_i2 = 1 - r_i1 (prior `none`: r_i = onehot(argmax pi~*_i), the
                      "EM only" ablation of Appendix A.5).
  clients -> server   `federated_sum` of r_ik n_i, r_ik sum f, r_ik sum (f - mean_i)^2.
  server (M step)     mu_k = sum r_ik sum f / M_k, sigma_k^2 = sum r_ik n_i sigma_i^2 / M_k (Eq. 10), with a variance
                      floor; a mode with M_k = 0 keeps its mu_k and sigma_k; pi_k <- beta pi_k + (1 - beta) M_k /
                      sum_j M_j (the running average of Appendix A.4, beta = 0.99); optionally an online-EM decay of
                      mu and sigma (`statistics_decay`, below).

Several workers: the threshold (an aggregate) decides the second sum, so TFF cannot split `next` over workers
(`utils.remote_workers`). `build_client_work` therefore also gives the round as two computations, `first` (up to
the threshold) and `second` (from the assignment on), whose composition is `next`; with the model's broadcast,
mean and FedAdam in `first` they form `learning_process.compose_split_round`, which the training loop runs on
several workers. The clients' phase-2 statistics pass from `first` to `second` as CLIENTS-placed values.

Choices where the paper is ambiguous (documented here, flags where a user may want the other reading):
- The ranking uses the log-odds of pi~*_i1 computed in log space, not pi~*_i1 itself: the order is the same, but
  it does not saturate at 1.0 in float32 for well-separated clients, which would make the top-k a tie.
- Ties in the score (every client at +inf when a mixture weight is 0, or equal scores) are broken by the
  tie-break draw, so exactly floor(q~ m + 1/2) clients join mode 1 whatever the scores: a threshold on the score
  alone sends every tied client to mode 1.
- The mixture weights are floored at `weight_floor` (1e-6) and renormalized after the running average: with
  beta = 0 (an Appendix A.4 ablation) one round with every client in one mode sets pi to (1, 0), and log 0 would
  make every score +inf, carrying no information about the clients.
- A client whose training or statistics are not finite is left out of the round (`client_training`): it sends no
  ranking key, m counts only the other clients, and its r_i is zero.
- Appendix A.4 writes the running average as "beta pi_k^t + (1 - beta) pi_k M_k / sum_j M_j"; it is read as the
  running average of the Eq. 10 estimate M_k / sum_j M_j.
- The E-step statistics are computed over the examples the client trains on in the round (its local data after
  `max_elements_per_client`; with several epochs every example is counted once per epoch, which leaves Eq. 5 and
  Eq. 9 unchanged for full epochs).
- The temporal prior (q~(t) = share of mode 1) is defined for K = 2; K > 2 supports prior `none` only.
- Initialization: mu_k ~ N(0, 0.1^2) per coordinate from the run's seed, sigma_k^2 = 1, pi uniform.
- `statistics_decay` b (default 0.7; b = 0 is Eq. 10 exactly). Eq. 10 replaces mu_k by this round's estimate.
  Near q~ = 0 or 1 the prior sends floor(q~ m + 1/2) of m clients to a mode even when none is from it (the day
  count is Binomial(m, q)), and that single misassigned client then becomes the mode's mean. Measured on the
  synthetic task (style_scale 0.2, 96 rounds): with b = 0 the training routing accuracy falls from 1.0 to 0.0-0.2
  right after each extreme of q and the components swap; with b = 0.7 it is 1.0 from round 16 on. With b > 0 each
  mode keeps a decayed sample mass A_k <- b A_k + M_k and mu_k, sigma_k^2 are mass-weighted averages of the old
  values and this round's Eq. 10 estimates (`m_step`), the online-EM analogue of the paper's running average of pi.
- `sample` branch selection draws with a stateless generator keyed by the round and the client's data, so resumed
  runs draw the same branches.
- Mode k of the clustering model is branch k of the network; under a prior, mode 1 = day.

Evaluation (Section 4, "MLE for Evaluation"): the branch of each test minibatch is argmax of Eq. 5 on the batch
with a uniform pi (Appendix A.4), or per sample (`eval_routing='sample'`).

Simulation-only metrics (they use the true mode carried in the batches, which no decision uses):
`train_routing_accuracy` (clients trained on their mode's branch), `assignment_accuracy` (clients the M step put in
their mode), `routing_accuracy` (test examples routed to their mode's branch); for prior `none`, under the best
matching of modes to branches.
"""

import collections
import dataclasses
from typing import NamedTuple

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from algorithms.core import client_training
from algorithms.core import evaluation
from algorithms.core import gmm
from algorithms.core import learning_process
from algorithms.core import method
from algorithms.core import objectives
from algorithms.core import online_average
from algorithms.core import routing
from models import multi_branch
from algorithms.core import temporal_prior
from tasks import task as task_lib

NAME = 'fedtem'
# Its initial mixture is drawn from the run's seed (its Config's `seed`, set from it).
SEEDED_BUILD = True
SENDS = method.Sends(
    method_sums=('count', 'feature_sum', 'squared_deviation_sum', 'assignment', 'key', 'included', 'mode_one_count',
                 'pass_count'),
    per_client=('key', 'included'),
    simulation_only=('routing',))
DEFAULTS = method.Defaults(
    {'server_optimizer': 'adam', 'client_epochs': 1},
    source=('Zhu et al., "Diurnal or Nocturnal? Federated Learning of Multi-branch Networks from Periodically '
            'Shifting Distributions", 2022, Table 2 (server optimizer Adam, one local epoch; its rate and epsilon '
            'per dataset are the tasks\' defaults)'))
PRIORS = temporal_prior.PRIORS + ('none',)
BRANCH_SELECTIONS = ('greedy', 'sample')
CLIENT_ESTIMATES = ('mle', 'bayesian')
EVAL_ROUTINGS = ('batch', 'sample')


@dataclasses.dataclass(frozen=True)
class Config(objectives.LabelSmoothing):
  """FedTEM's own hyperparameters (see the module docstring). The settings are flags by their first names; the
  other fields come from the shared hyperparameters (`method.with_shared`) or are constants."""
  prior: str = method.setting('linear', f'Temporal prior of FedTEM/FedTKM: one of {", ".join(PRIORS)}.',
                              flag='prior')
  branch_selection: str = method.setting('greedy', 'FedTEM training branch: greedy (argmax) or sample.',
                                         flag='branch_selection')
  client_estimate: str = method.setting('mle', 'FedTEM client mode estimate: mle (Eq. 5) or bayesian (Eq. 22).',
                                        flag='client_estimate')
  pi_momentum: float = method.setting(0.99, 'beta of the GMM weights\' running average (Appendix A.4).',
                                      flag='pi_momentum')
  statistics_decay: float = method.setting(
      0.7, 'FedTEM online-EM decay of the GMM statistics; 0 is Eq. 10 exactly (see algorithms/methods/fedtem.py).',
      flag='statistics_decay')
  period: int = 32
  num_branches: int = 2
  eval_routing: str = 'batch'
  seed: int = 0
  variance_floor: float = 1e-3
  weight_floor: float = 1e-6

  def validate(self) -> None:
    method.check_settings(self, NAME, {'prior': PRIORS, 'branch_selection': BRANCH_SELECTIONS,
                                       'client_estimate': CLIENT_ESTIMATES})
    if self.num_branches < 2:
      raise ValueError(f'FedTEM needs at least 2 branches; got {self.num_branches}.')
    temporal_prior.check_modes(self.prior, self.num_branches)
    objectives.LabelSmoothing.validate(self)
    if self.eval_routing not in EVAL_ROUTINGS:
      raise ValueError(f'--eval_routing must be one of {", ".join(EVAL_ROUTINGS)}; got {self.eval_routing!r}.')
    if not 0.0 <= self.pi_momentum < 1.0:
      raise ValueError(f'--pi_momentum must be in [0, 1); got {self.pi_momentum}.')
    if not 0.0 <= self.statistics_decay < 1.0:
      raise ValueError(f'--statistics_decay must be in [0, 1); got {self.statistics_decay}.')


# Where each setting's default comes from (`algorithms.registry` checks one per setting; docs/running.md
# shows them).
SETTING_SOURCES = {
    **objectives.SETTING_SOURCES,
    'prior': 'paper: Section 4, the linear temporal prior of the main results',
    'branch_selection': 'paper: Algorithm 1, the branch of the most likely mode (greedy)',
    'client_estimate': "paper: Eq. 5, the client's MLE",
    'pi_momentum': "paper: Appendix A.4, 'We use beta = 0.99 for the moving average in all experiments'",
    'statistics_decay': ("departure: Eq. 10 replaces the means and variances by the round's estimate (0); with 0 "
                         "the synthetic task's training routing accuracy falls from 1.0 to 0.0-0.2 after each "
                         'extreme of q and the modes swap (style_scale 0.2, 96 rounds), with 0.7 it is 1.0 from '
                         'round 16 on (algorithms/methods/fedtem.py)'),
}


# ----------------------------------------------------------------------------------------------------------------
# Client-side statistics.


class FeaturePass(collections.namedtuple('FeaturePass',
                                         ['log_mle', 'log_posterior', 'moments', 'mode_one_count', 'mode'])):
  """One pass over a client's data with fixed weights: log pi* [K] (Eq. 5), log P(zeta | D) [K] (Eq. 22),
  `gmm.FeatureMoments` (Eq. 9), the number of samples with argmax_k gamma_k = mode 1 (Eq. 25), and the client's
  true mode (the largest `mode` in its batches; for simulation metrics only)."""


def feature_pass(model: tf.keras.Model, examples: dict, means, variances, weights) -> FeaturePass:
  """The GMM statistics of `examples` ({'x', 'mode'}, one batch) under `model` and the GMM."""
  log_weights = tf.math.log(weights)
  features = model(examples['x'], training=False)[multi_branch.FEATURES]
  log_densities = gmm.log_gaussians(features, means, variances)
  log_gammas = gmm.log_responsibilities(log_densities, log_weights)
  mode_one = tf.reduce_sum(tf.cast(tf.equal(tf.argmax(log_gammas, axis=-1), 0), tf.float32))
  return FeaturePass(gmm.log_client_mle(log_gammas), gmm.log_client_posterior(log_densities, log_weights),
                     gmm.feature_moments(features), mode_one, routing.client_mode(examples))


def ranking_score(log_mle: tf.Tensor) -> tf.Tensor:
  """log pi_1 - log(sum_{k > 1} pi_k): increasing in pi_1, finite when pi_1 rounds to 1 (see module docstring)."""
  return log_mle[0] - tf.reduce_logsumexp(log_mle[1:])


def select_branch(log_estimate: tf.Tensor, selection: str, seed: tf.Tensor) -> tf.Tensor:
  """k* = argmax (greedy) or a draw from the estimate (sample); int32 scalar."""
  if selection == 'greedy':
    return tf.argmax(log_estimate, output_type=tf.int32)
  draw = tf.random.stateless_categorical(log_estimate[tf.newaxis], 1, seed=seed)
  return tf.cast(draw[0, 0], tf.int32)


# ----------------------------------------------------------------------------------------------------------------
# Server-side pieces.


def initial_mixture(num_modes: int, feature_dim: int, seed: int) -> collections.OrderedDict:
  """mu_k ~ N(0, 0.1^2), sigma_k^2 = 1, pi uniform, no accumulated sample mass (float32 numpy)."""
  rng = np.random.default_rng(seed)
  return collections.OrderedDict(
      means=rng.normal(0.0, 0.1, size=(num_modes, feature_dim)).astype(np.float32),
      variances=np.ones((num_modes, feature_dim), np.float32),
      weights=np.full([num_modes], 1.0 / num_modes, np.float32),
      mass=np.zeros([num_modes], np.float32))


def ranking_key(score: tf.Tensor, round_num: tf.Tensor, data_key: tf.Tensor) -> tf.Tensor:
  """[2]: (score, tie-break), the tie-break uniform in [0, 1) keyed by the round and the client's data."""
  tie_break = tf.random.stateless_uniform([], seed=tf.stack([data_key, round_num + 1]))
  return tf.stack([score, tie_break])


def mode_one_threshold(keys: tf.Tensor, prior_value: tf.Tensor) -> tf.Tensor:
  """The key [2] of the floor(q~ m + 1/2)-th highest of the m clients' ranking keys [m, 2] in (score, tie-break)
  order (Eq. 10); (+inf, +inf) if no client joins mode 1."""
  count = tf.shape(keys)[0]
  joining = tf.cast(tf.floor(prior_value * tf.cast(count, tf.float32) + 0.5), tf.int32)
  by_tie_break = tf.argsort(keys[:, 1], direction='DESCENDING', stable=True)
  order = tf.gather(by_tie_break, tf.argsort(tf.gather(keys[:, 0], by_tie_break), direction='DESCENDING',
                                             stable=True))
  ranked = tf.concat([tf.gather(keys, order), tf.constant([[np.inf, np.inf]], tf.float32)], axis=0)
  return ranked[tf.where(joining > 0, joining - 1, count)]


def at_or_above(key: tf.Tensor, threshold: tf.Tensor) -> tf.Tensor:
  """key >= threshold in (score, tie-break) order (bool scalar)."""
  # tf.equal, not ==: in TFF's graph serialization `==` on tensors is Python identity.
  return tf.greater(key[0], threshold[0]) | (tf.equal(key[0], threshold[0]) & tf.greater_equal(key[1], threshold[1]))


def assignment(key: tf.Tensor, log_mle: tf.Tensor, threshold: tf.Tensor, use_prior: bool) -> tf.Tensor:
  """r_i [K]: one-hot mode of a client (Eq. 10 under a prior; argmax pi~*_i for the `none` prior)."""
  num_modes = tf.shape(log_mle)[0]
  if use_prior:
    return tf.one_hot(tf.where(at_or_above(key, threshold), 0, 1), num_modes)
  return tf.one_hot(tf.argmax(log_mle, output_type=tf.int32), num_modes)


def m_step(mixture: dict, counts: tf.Tensor, feature_sums: tf.Tensor, squared_deviation_sums: tf.Tensor,
           pi_momentum: float, variance_floor: float, statistics_decay: float = 0.0,
           weight_floor: float = 1e-6) -> collections.OrderedDict:
  """Eq. 10 with the running average of pi of Appendix A.4; a mode with no client keeps mu and sigma; pi floored
  at `weight_floor` and renormalized.

  With `statistics_decay` b > 0 the M step is an online EM: each mode keeps its decayed sample mass
  A_k <- b A_k + M_k, and mu_k, sigma_k^2 are the mass-weighted averages of the old values (weight b A_k) and this
  round's Eq. 10 estimates (weight M_k). A round that puts one client in a mode then moves it little, a round
  that puts many moves it much. b = 0 is exactly Eq. 10.
  """
  blend = online_average.blend(mixture['mass'], counts, statistics_decay)
  safe_counts = tf.maximum(counts, 1.0)[:, tf.newaxis]
  means = blend.average(mixture['means'], feature_sums / safe_counts)
  variances = tf.maximum(blend.average(mixture['variances'], squared_deviation_sums / safe_counts), variance_floor)
  total = tf.reduce_sum(counts)
  estimate = tf.where(total > 0.0, counts / tf.maximum(total, 1.0), mixture['weights'])
  weights = tf.maximum(pi_momentum * mixture['weights'] + (1.0 - pi_momentum) * estimate, weight_floor)
  weights = weights / tf.reduce_sum(weights)
  return collections.OrderedDict(means=means, variances=variances, weights=weights, mass=blend.mass)


def _collect(value_type):
  """federated_aggregate pieces that gather the ranking keys [2] of the clients that take part into [m, 2]."""

  @tff.tensorflow.computation
  def zero():
    return tf.zeros([0, 2], tf.float32)

  vector_type = tff.TensorType(np.float32, [None, 2])

  @tff.tensorflow.computation(vector_type, value_type)
  def accumulate(vector, value):
    return tf.concat([vector, tf.boolean_mask(value['key'][tf.newaxis], value['included'][tf.newaxis])], axis=0)

  @tff.tensorflow.computation(vector_type, vector_type)
  def merge(a, b):
    return tf.concat([a, b], axis=0)

  @tff.tensorflow.computation(vector_type)
  def report(vector):
    return vector

  return zero, accumulate, merge, report


# ----------------------------------------------------------------------------------------------------------------
# The client work process.


def build_client_phase_one(model: tf.keras.Model, client_optimizer: tff.learning.optimizers.Optimizer,
                           batch_fn: task_lib.BatchFn, num_branches: int, num_modes: int, config: Config):
  """The client's phase 1 as a `tf.function` (weights, mixture, round_num, dataset) -> (ClientResult,
  statistics for phase 2, summed metrics): E step, branch choice, Eq. 4 training, post-training statistics."""

  @tf.function(autograph=False)
  def run(weights, mixture, round_num, dataset):
    batches = task_lib.model_batches(dataset, batch_fn)
    inference, batches, _ = routing.client_examples(batches)
    client_training.assign_weights(model, weights)
    before = feature_pass(model, inference, mixture['means'], mixture['variances'], mixture['weights'])
    estimate = before.log_mle if config.client_estimate == 'mle' else before.log_posterior
    data_key = tf.cast(tf.bitcast(before.moments.feature_sum[0], tf.int32), tf.int64)
    branch = select_branch(estimate, config.branch_selection, tf.stack([round_num, data_key]))
    objective = objectives.selected_branch(branch, config.smoothing_weight, config.smoothing_epsilon)
    training = client_training.local_training(model, client_optimizer, weights, batches, objective)
    after = feature_pass(model, inference, mixture['means'], mixture['variances'], mixture['weights'])
    statistics = collections.OrderedDict(
        key=ranking_key(ranking_score(after.log_mle), round_num, data_key), log_mle=after.log_mle,
        mode=after.mode, count=after.moments.count, feature_sum=after.moments.feature_sum,
        squared_deviation_sum=after.moments.squared_deviation_sum)
    finite = client_training.all_finite((statistics['log_mle'], after.moments))
    training = client_training.excluded_unless(training, finite)
    statistics = client_training.exclude_unless(training.finite, statistics)
    statistics['included'] = training.finite
    sums = routing.training_sums(training, after.mode, branch, num_modes, num_branches,
                                 mode_one_count=after.mode_one_count, pass_count=after.moments.count)
    result = tff.learning.templates.ClientResult(update=training.update, update_weight=training.num_examples)
    return result, statistics, sums

  return run


class RoundParts(NamedTuple):
  """FedTEM's client work and its round in two computations (`learning_process.compose_split_round`): `first`
  ends with the threshold of Eq. 10, `second` begins with the assignment it decides."""
  client_work: tff.learning.templates.ClientWorkProcess
  first: tff.Computation
  second: tff.Computation


def build_client_work(model_fn: learning_process.ModelFn, batch_fn: task_lib.BatchFn,
                      client_optimizer: tff.learning.optimizers.Optimizer, element_spec, num_branches: int,
                      num_modes: int, config: Config) -> RoundParts:
  """FedTEM's client work (its server state is (round_num, GMM, previous prior value)), and its round split at
  the threshold."""
  config = dataclasses.replace(config, num_branches=num_branches)
  config.validate()
  use_prior = config.prior != 'none'
  weights_type = learning_process.model_weights_type(model_fn)
  data_type = learning_process.client_data_type(element_spec)
  mixture_value = initial_mixture(num_branches, learning_process.feature_dim(model_fn), config.seed)
  mixture_type = learning_process.struct_type(mixture_value, tf.float32)

  @tff.tensorflow.computation(weights_type, mixture_type, np.int64, data_type)
  def client_phase_one(weights, mixture, round_num, dataset):
    model = learning_process.client_model(model_fn)
    run = build_client_phase_one(model, client_optimizer, batch_fn, num_branches, num_modes, config)
    return run(weights, mixture, round_num, dataset)

  result_type, statistics_type, sums_type = client_phase_one.type_signature.result
  ranking_type = tff.StructWithPythonType([('key', statistics_type.key), ('included', statistics_type.included)],
                                          collections.OrderedDict)
  zero, accumulate, merge, report = _collect(ranking_type)

  @tff.tensorflow.computation(np.int64, np.float32, tff.TensorType(np.float32, [None, 2]), sums_type)
  def server_prior(round_num, previous_prior, keys, sums):
    """The threshold of Eq. 10 and the prior value kept in the state (prior `none`: no threshold, value kept)."""
    observed_ratio = sums['mode_one_count'] / tf.maximum(sums['pass_count'], 1.0)  # Eq. 25, aggregated.
    if not use_prior:
      return tf.constant([np.inf, np.inf], tf.float32), previous_prior
    value = temporal_prior.prior_value(config.prior, round_num, config.period, previous_prior, observed_ratio)
    return mode_one_threshold(keys, value), value

  @tff.tensorflow.computation(statistics_type, tff.TensorType(np.float32, [2]))
  def client_phase_two(statistics, threshold):
    r = assignment(statistics['key'], statistics['log_mle'], threshold, use_prior)
    r *= tf.cast(statistics['included'], tf.float32)
    return collections.OrderedDict(count=r * statistics['count'],
                                   feature_sum=r[:, tf.newaxis] * statistics['feature_sum'],
                                   squared_deviation_sum=r[:, tf.newaxis] * statistics['squared_deviation_sum'],
                                   assignment=routing.client_confusion(
                                       statistics['mode'], tf.argmax(r, output_type=tf.int32), num_modes,
                                       num_branches) * tf.reduce_sum(r))

  assignment_type = client_phase_two.type_signature.result

  @tff.tensorflow.computation(mixture_type, assignment_type, sums_type, np.float32)
  def server_update(mixture, totals, sums, prior):
    """The M step and the round's metrics, in one server computation."""
    mixture = m_step(mixture, totals['count'], totals['feature_sum'], totals['squared_deviation_sum'],
                     config.pi_momentum, config.variance_floor, config.statistics_decay, config.weight_floor)
    metrics = collections.OrderedDict(
        client_training.finalize_train_metrics(sums),
        **routing.train_routing_metrics(sums['routing'], best_matching=not use_prior),
        prior=prior if use_prior else tf.constant(np.nan, tf.float32),
        assigned_mode_one_share=totals['count'][0] / tf.maximum(tf.reduce_sum(totals['count']), 1.0),
        assignment_accuracy=routing.routing_accuracy(totals['assignment'], best_matching=not use_prior))
    return mixture, metrics

  @tff.tensorflow.computation(np.int64)
  def increment(round_num):
    return round_num + 1

  @tff.federated_computation
  def initialize():
    return tff.federated_value(collections.OrderedDict(
        round_num=np.int64(0), mixture=mixture_value, prior_value=np.float32(1.0)), tff.SERVER)

  state_type = initialize.type_signature.result

  @tff.federated_computation(state_type, tff.FederatedType(weights_type, tff.CLIENTS),
                             tff.FederatedType(data_type, tff.CLIENTS))
  def first(state, weights, client_data):
    """Phase 1 and the threshold: (ClientResult, carry at SERVER, statistics at CLIENTS)."""
    round_num = tff.federated_map(increment, state.round_num)
    result, statistics, sums = tff.federated_map(client_phase_one, (
        weights, tff.federated_broadcast(state.mixture), tff.federated_broadcast(round_num), client_data))
    ranking = tff.federated_zip(collections.OrderedDict(key=statistics.key, included=statistics.included))
    keys = tff.federated_aggregate(ranking, zero(), accumulate, merge, report)
    summed = tff.federated_sum(sums)
    threshold, prior = tff.federated_map(server_prior, (round_num, state.prior_value, keys, summed))
    carry = tff.federated_zip(collections.OrderedDict(round_num=round_num, mixture=state.mixture, summed=summed,
                                                      threshold=threshold, prior=prior))
    return result, carry, statistics

  @tff.federated_computation(first.type_signature.result[1], first.type_signature.result[2])
  def second(carry, statistics):
    """Phase 2 and the M step: (state, measurements)."""
    totals = tff.federated_sum(tff.federated_map(client_phase_two, (
        statistics, tff.federated_broadcast(carry.threshold))))
    mixture, measurements = tff.federated_map(server_update, (carry.mixture, totals, carry.summed, carry.prior))
    new_state = tff.federated_zip(collections.OrderedDict(round_num=carry.round_num, mixture=mixture,
                                                          prior_value=carry.prior))
    return new_state, measurements

  @tff.federated_computation(state_type, tff.FederatedType(weights_type, tff.CLIENTS),
                             tff.FederatedType(data_type, tff.CLIENTS))
  def next_fn(state, weights, client_data):
    result, carry, statistics = first(state, weights, client_data)
    new_state, measurements = second(carry, statistics)
    return tff.templates.MeasuredProcessOutput(new_state, result, measurements)

  return RoundParts(tff.learning.templates.ClientWorkProcess(initialize, next_fn), first, second)


def build_process(model_fn: learning_process.ModelFn, batch_fn: task_lib.BatchFn, element_spec,
                  client_learning_rate: float, server_step: learning_process.ServerStep,
                  num_branches: int, num_modes: int, config: Config) -> tff.learning.templates.LearningProcess:
  return build_process_and_split_round(model_fn, batch_fn, element_spec, client_learning_rate,
                                       server_step, num_branches, num_modes,
                                       config)[0]


def build_process_and_split_round(
    model_fn: learning_process.ModelFn, batch_fn: task_lib.BatchFn, element_spec, client_learning_rate: float,
    server_step: learning_process.ServerStep, num_branches: int, num_modes: int, config: Config
) -> tuple[tff.learning.templates.LearningProcess, learning_process.SplitRound]:
  """FedTEM's learning process, and its round as two computations (for several workers)."""
  parts = build_client_work(model_fn, batch_fn, tff.learning.optimizers.build_sgdm(client_learning_rate),
                            element_spec, num_branches, num_modes, config)
  process = learning_process.compose(model_fn, parts.client_work, server_step)
  return process, learning_process.compose_split_round(model_fn, process, parts.first, parts.second,
                                                       server_step)


# ----------------------------------------------------------------------------------------------------------------
# Evaluation.


def evaluation_objective(num_modes: int, num_branches: int, routing_rule: str):
  """objective(outputs, batch, means, variances): the branch of each test batch is argmax of Eq. 5 on the batch
  (or per sample) under the GMM (means, variances) with a uniform pi (Appendix A.4)."""
  uniform = tf.fill([num_branches], -np.log(num_branches).astype(np.float32))

  def objective(outputs, batch, means, variances):
    log_gammas = gmm.log_responsibilities(gmm.log_gaussians(outputs[multi_branch.FEATURES], means, variances),
                                          uniform)
    if routing_rule == 'batch':
      branches = routing.batch_branches(batch, tf.argmax(gmm.log_client_mle(log_gammas)))
    else:
      branches = tf.argmax(log_gammas, axis=-1, output_type=tf.int32)
    return routing.routed_result(outputs, batch, branches, num_modes, num_branches)

  return objective


def build_algorithm(task: task_lib.Task, element_spec, hparams: method.Hyperparameters,
                    evaluator: evaluation.Evaluator, config: Config) -> method.Algorithm:
  """FedTEM on the task's K-branch network, evaluated with the MLE routing of Section 4 (`evaluation_objective`)."""
  config = method.with_shared(config, hparams)
  process, split_round = build_process_and_split_round(*method.process_args(task, element_spec, hparams),
                                                       hparams.num_branches, task.num_modes, config)
  objective = evaluation_objective(task.num_modes, hparams.num_branches, config.eval_routing)
  evaluate = evaluation.routed_evaluation(
      evaluator, objective, lambda state: (state['mixture']['means'], state['mixture']['variances']),
      [task.num_modes, hparams.num_branches], best_matching=config.prior == 'none')
  return method.Algorithm(process, evaluate, split_round=split_round)
