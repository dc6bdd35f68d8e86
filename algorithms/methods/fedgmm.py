"""FedGMM (Wu et al., 2023, "Personalized Federated Learning under Mixture of Distributions"): a federated Gaussian
mixture of the joint distribution, M1 Gaussians over features z = f(x) times M2 learners P_theta(y | x), with
per-client mixture weights pi_c [M1, M2].

Model (Section 3.2): client c's joint density h_c(x, y) = sum_{m1,m2} pi_c(m1, m2) N(z; mu_m1, Sigma_m1)
P_theta_m2(y | x), full covariances.

Per round, client c with its round data (N_c examples), the broadcast (mu, Sigma, theta) and its stored pi_c
(client state, uniform at its first round; Algorithm 1 lines 5-10):

  E step (E)   q_i(m1, m2) = softmax over (m1, m2) of log pi_c(m1, m2) + log N(z_i; mu_m1, Sigma_m1) - CE_m2(x_i, y_i)
  M step (M)   pi_c = gamma_c / N_c,  gamma_c(m1, m2) = sum_i q_i(m1, m2)            (stored for the next round)
               r_i(m1) = sum_m2 q_i,  R_c(m1) = sum_i r_i,  mu_m1,c = sum_i r_i z_i / R_c,
               Sigma_m1,c = sum_i r_i (z_i - mu_m1,c)(z_i - mu_m1,c)^T / R_c
  learners     one pass over the round's batches (the suite's `--client_epochs` schedule), learner m2 on the loss
               mean over the batch of w_i(m2) CE_m2(x_i, y_i), w_i(m2) = sum_m1 q_i(m1, m2) (the official code's
               weighted batch mean)

and the server (Algorithm 1 lines 12-17), from `federated_sum`s only:

  mu_m1     = sum_c R_c(m1) mu_m1,c / sum_c R_c(m1)                 (the exact centralized M step, Lemma 2)
  Sigma_m1  = sum_c R_c(m1) Sigma_m1,c / sum_c R_c(m1) + eps I       (`covariance_aggregation='literal'`, the paper)
            = sum_c sum_i r_i z_i z_i^T / sum_c R_c(m1) - mu mu^T + eps I   (`'exact'`: sufficient statistics, the
              centralized M step, which the literal rule misses by the between-client spread)
  theta_m2  = sum_c Lambda_c(m2) theta_m2,c / sum_c Lambda_c(m2),  Lambda_c(m2) = sum_m1 gamma_c(m1, m2)
              (per-tensor weights, `algorithms.core.per_tensor_mean`; the server step applies the mean update:
              `--server_optimizer=sgd` with rate 1 is this average as written, the FedGMM grid's setting)
  pi        = sum_c gamma_c / sum_c N_c                               (footnote 3, its typo corrected)

A component no client gave mass keeps its mean and covariance.

Prediction (Eq. 3): P_c(y | x) = sum_{m1,m2} w(m1, m2 | x) P_theta_m2(y | x), w proportional to
pi(m1, m2) N(z; mu_m1, Sigma_m1): with the global pi on the task's union test set, with each client's own pi_c on
held-out clients (`personalized_accuracy`, `unseen_accuracy`). Each evaluated client's pi_c is fitted, with every
shared parameter frozen, by `eval_em_steps` EM steps from uniform on its own data (the training split for training
clients, as the official code's refresh before every evaluation; the adaptation half for unseen clients, Section
4.6), the E step using the labels (Alg. 1 lines 6 and 8; `algorithms.core.evaluation.Personalization`).

Choices (each a flag `--fedgmm_<field>`):
- `gaussians`, `learners`: M1 = M2 = 3 (Appendix C.1; Section 4.7 prefers 2 and 2 "in our setting").
- `covariance_eps`: eps = 0.1 on Sigma's diagonal (the official code's; the paper has none); log N through a
  float64 Cholesky factor.
- `features`: `raw` (x flattened: the paper's choice for the synthetic data) or `random_projection` (x flattened,
  times a fixed seeded Gaussian matrix [d, `feature_dim`] / sqrt(d); the paper's ImageNet ResNet-18 + PCA-48
  encoder is not reachable offline, and a data-free projection keeps every client's features the same function of
  x without a fitting pass).
- Initialization (unspecified): mu_m1 ~ N(0, `init_scale`^2 I) from the seed, Sigma_m1 = I, pi_c uniform.
- Learners: M2 full copies of the task's single-branch network (`multi_branch.build_multi_network_model`).

Algorithm 2 (Appendix A, the unsupervised Federated GMM: q proportional to pi_c(m) N(z; mu_m, Sigma_m), clients
sending gamma-weighted mu and Sigma) is `--fedgmm_learners=1`: the one learner's log P_theta(y | x) is the same for
every Gaussian and cancels in (E), so q, pi_c, mu and Sigma follow Algorithm 2 exactly, while the learner trains on
every example (a FedAvg classifier beside the GMM; `train_log_likelihood` then adds its log P_theta(y | x)).

Novelty detection (Table 4): the score is -log P(z) under the GMM with the global pi (footnote 4's marginal; the
paper leaves open which likelihood), against the max-softmax score of the other methods (`algorithms.core.novelty`).

Metrics: `train_log_likelihood` (mean over the round's examples of log sum_m pi_c N P_theta, before the M step: the
EM objective), `train_routing_accuracy` / `train_routing_ari` of argmax_m1 r_i against the examples' true
components, `global_pi_<m1>_<m2>`; on evaluation `routing_accuracy` / `routing_ari` of argmax_m1 w(m1 | x).
"""

import collections
import dataclasses

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from algorithms.core import client_state
from algorithms.core import client_training
from algorithms.core import evaluation
from algorithms.core import learning_process
from algorithms.core import method
from algorithms.core import objectives
from algorithms.core import per_tensor_mean
from algorithms.core import routing
from models import multi_branch
from tasks import task as task_lib

NAME = 'fedgmm'
# Its random projection and initial mixture are drawn from the run's seed.
SEEDED_BUILD = True
SENDS = method.Sends(method_sums=('gamma', 'mass', 'first', 'second', 'count', 'log_likelihood'),
                     simulation_only=('routing',), client_state=('pi',), own_aggregation=True)
DEFAULTS = method.Defaults(
    dict(method.PARAMETER_AVERAGING, client_epochs=1),
    source=('Wu et al., "Personalized Federated Learning under Mixture of Distributions", 2023: Section 4.3 and '
            'Appendix C.1 (one local epoch of SGD, the protocol of FedEM, Marfoq et al., 2021, which averages '
            'parameters)'),
    notes=('The learning rate is tuned per dataset by grid search (0.01 on CIFAR-10, 0.001 on CIFAR-100 and FEMNIST), '
           'the rounds (200) are the experiment\'s and the batch size 128 is for clients of hundreds to thousands of '
           'examples: the task\'s (gaussian_mixture, the paper\'s synthetic task, has batches of 128).'),
    scenario='dirichlet_mixture')
FEATURES = ('raw', 'random_projection')
COVARIANCE_AGGREGATIONS = ('literal', 'exact')
LEARNER_WEIGHT = 'learner_weight'
PREDICTION_WEIGHT = 'prediction_weight'


@dataclasses.dataclass(frozen=True)
class Config:
  gaussians: int = method.setting(3, 'FedGMM: M1, the Gaussian components.')
  learners: int = method.setting(3, 'FedGMM: M2, the learners.')
  covariance_eps: float = method.setting(0.1, 'FedGMM: eps added to the covariances\' diagonal.')
  covariance_aggregation: str = method.setting('literal', 'FedGMM covariance aggregation: literal (the paper\'s '
                                               'weighted mean of client covariances) or exact (sufficient '
                                               'statistics).')
  features: str = method.setting('raw', 'FedGMM GMM features: raw (x flattened) or random_projection.')
  feature_dim: int = method.setting(48, 'FedGMM: dimension of the random_projection features.')
  init_scale: float = method.setting(1.0, 'FedGMM: initial means ~ N(0, init_scale^2 I).')
  eval_em_steps: int = method.setting(10, 'FedGMM: EM steps fitting an evaluated client\'s pi_c on its own data.')

  def validate(self) -> None:
    method.check_settings(self, NAME, {'features': FEATURES, 'covariance_aggregation': COVARIANCE_AGGREGATIONS},
                          at_least_one=('gaussians', 'learners', 'feature_dim', 'eval_em_steps'),
                          positive=('covariance_eps', 'init_scale'))


# Where each setting's default comes from (`algorithms.registry` checks one per setting; docs/running.md
# shows them).
SETTING_SOURCES = {
    'gaussians': "paper: Appendix C.1, M1 = 3 (Section 4.7 prefers 2 'in our setting')",
    'learners': 'paper: Appendix C.1, M2 = 3',
    'covariance_eps': "suite choice: the FedGMM official code's eps on the covariances' diagonal; the paper has none",
    'covariance_aggregation': "paper: Algorithm 1 line 15, the weighted mean of the clients' covariances (literal)",
    'features': ('departure: Section 4.3 encodes images with an ImageNet-pretrained ResNet-18 and PCA to 48 '
                 "dimensions, which is not reachable offline; raw inputs are the paper's for its synthetic data, "
                 'and random_projection stands in on images'),
    'feature_dim': "paper: Section 4.3, 48 dimensions (here the random projection's)",
    'init_scale': 'suite choice: the paper does not state the initialization; means ~ N(0, I)',
    'eval_em_steps': ('suite choice: the paper refits pi_c by EM before evaluation without a step count; 10 from '
                      'uniform'),
}


def initial_mixture(config: Config, feature_dim: int, seed: int) -> collections.OrderedDict:
  """mu ~ N(0, init_scale^2 I) [M1, D], Sigma = I [M1, D, D], global pi uniform [M1, M2] (float32 numpy)."""
  rng = np.random.default_rng([seed, 70])
  return collections.OrderedDict(
      means=rng.normal(0.0, config.init_scale, size=(config.gaussians, feature_dim)).astype(np.float32),
      covariances=np.tile(np.eye(feature_dim, dtype=np.float32), [config.gaussians, 1, 1]),
      weights=np.full([config.gaussians, config.learners], 1.0 / (config.gaussians * config.learners), np.float32))


def log_gaussians(features: tf.Tensor, means: tf.Tensor, covariances: tf.Tensor) -> tf.Tensor:
  """log N(z_i; mu_m, Sigma_m) [N, M] for z [N, D], mu [M, D], Sigma [M, D, D], through Cholesky factors (float64)."""
  z = tf.cast(features, tf.float64)
  cholesky = tf.linalg.cholesky(tf.cast(covariances, tf.float64))  # [M, D, D]
  deviations = tf.transpose(z[tf.newaxis] - tf.cast(means, tf.float64)[:, tf.newaxis], [0, 2, 1])  # [M, D, N]
  whitened = tf.linalg.triangular_solve(cholesky, deviations, lower=True)
  mahalanobis = tf.reduce_sum(tf.square(whitened), axis=1)  # [M, N]
  log_det = 2.0 * tf.reduce_sum(tf.math.log(tf.linalg.diag_part(cholesky)), axis=-1)  # [M]
  dim = tf.cast(tf.shape(z)[-1], tf.float64)
  log_density = -0.5 * (mahalanobis + log_det[:, tf.newaxis] + dim * np.log(2.0 * np.pi))
  return tf.cast(tf.transpose(log_density), tf.float32)


def log_joint(log_weights: tf.Tensor, log_densities: tf.Tensor, log_likelihoods: tf.Tensor) -> tf.Tensor:
  """log pi(m1, m2) + log N(z_i; mu_m1, Sigma_m1) + log P_theta_m2(y_i | x_i): [N, M1, M2] from log pi [M1, M2] or
  [N, M1, M2], log N [N, M1] and log P [N, M2]."""
  return log_weights + log_densities[:, :, tf.newaxis] + log_likelihoods[:, tf.newaxis, :]


def e_step(joint: tf.Tensor) -> tf.Tensor:
  """q_i(m1, m2) [N, M1, M2], Eq. (E): the joint normalized over all M1 * M2 entries."""
  shape = tf.shape(joint)
  flat = tf.reshape(joint, [shape[0], -1])
  return tf.reshape(tf.nn.softmax(flat, axis=-1), shape)


def m_step(features: tf.Tensor, q: tf.Tensor, covariance_aggregation: str) -> collections.OrderedDict:
  """The client's sums for Eq. (M) and the server: gamma_c [M1, M2], R_c [M1], sum_i r_i z_i [M1, D] and, per
  `covariance_aggregation`, R_c Sigma_m1,c = sum_i r_i (z_i - mu_m1,c)(z_i - mu_m1,c)^T (literal) or
  sum_i r_i z_i z_i^T (exact) [M1, D, D]."""
  z = tf.cast(features, tf.float32)
  gamma = tf.reduce_sum(q, axis=0)
  r = tf.reduce_sum(q, axis=2)  # [N, M1]
  mass = tf.reduce_sum(r, axis=0)
  first = tf.matmul(r, z, transpose_a=True)
  if covariance_aggregation == 'literal':
    means = first / tf.maximum(mass, 1e-30)[:, tf.newaxis]
    deviations = z[tf.newaxis] - means[:, tf.newaxis]  # [M1, N, D]
    second = tf.einsum('mn,mnd,mne->mde', tf.transpose(r), deviations, deviations)
  else:
    second = tf.einsum('nm,nd,ne->mde', r, z, z)
  return collections.OrderedDict(gamma=gamma, mass=mass, first=first, second=second)


def aggregate_mixture(mixture: dict, sums: dict, config: Config, num_examples: tf.Tensor) -> collections.OrderedDict:
  """The server's mu, Sigma (+ eps I) and global pi from the clients' summed `m_step` statistics."""
  mass = sums['mass']
  present = mass > 0
  safe = tf.maximum(mass, 1e-30)
  means = sums['first'] / safe[:, tf.newaxis]
  covariances = sums['second'] / safe[:, tf.newaxis, tf.newaxis]
  if config.covariance_aggregation == 'exact':
    covariances -= means[:, :, tf.newaxis] * means[:, tf.newaxis, :]
  covariances = 0.5 * (covariances + tf.linalg.matrix_transpose(covariances))
  covariances += config.covariance_eps * tf.eye(tf.shape(means)[-1])
  return collections.OrderedDict(
      means=tf.where(present[:, tf.newaxis], means, mixture['means']),
      covariances=tf.where(present[:, tf.newaxis, tf.newaxis], covariances, mixture['covariances']),
      weights=tf.where(num_examples > 0, sums['gamma'] / tf.maximum(num_examples, 1.0), mixture['weights']))


def learner_log_likelihoods(logits: tf.Tensor, batch: dict) -> tf.Tensor:
  """log P_theta_m2(y_i | x_i) = -CE [N, M2] from the learners' logits [N, M2, C]."""
  return -objectives.per_branch_losses(logits, batch)


def mixture_logits(logits: tf.Tensor, learner_log_weights: tf.Tensor) -> tf.Tensor:
  """log sum_m2 w(m2) softmax(theta_m2(x)) [N, C] (Eq. 3's mixture), for log w [N, M2]."""
  return tf.reduce_logsumexp(tf.nn.log_softmax(logits) + learner_log_weights[:, :, tf.newaxis], axis=1)


def prediction_log_weights(log_weights: tf.Tensor, log_densities: tf.Tensor) -> tf.Tensor:
  """log w(m1, m2 | x) [N, M1, M2] of Eq. 3: log pi + log N normalized over the entries (no label)."""
  joint = log_weights + log_densities[:, :, tf.newaxis]
  flat = tf.reshape(joint, [tf.shape(joint)[0], -1])
  return tf.reshape(tf.nn.log_softmax(flat, axis=-1), tf.shape(joint))


def weighted_learners_objective(outputs: dict, batch: dict) -> objectives.BatchResult:
  """Training: sum_m2 mean_i w_i(m2) CE_m2(x_i, y_i) (each learner's weighted loss); metrics of Eq. 3's prediction
  with the weights the E step's prior and density gave (no label)."""
  logits = tf.convert_to_tensor(outputs[multi_branch.LOGITS])
  losses = -learner_log_likelihoods(logits, batch)
  result = objectives.classification_result(mixture_logits(logits, batch[PREDICTION_WEIGHT]), batch)
  return result._replace(loss=tf.reduce_sum(tf.reduce_mean(batch[LEARNER_WEIGHT] * losses, axis=0)))


class Features:
  """z = f(x) per `config.features`: x flattened, or x flattened times a fixed seeded projection."""

  def __init__(self, config: Config, input_dim: int, seed: int):
    self._input_dim = input_dim
    self._projection = None
    if config.features == 'random_projection':
      rng = np.random.default_rng([seed, 71])
      self._projection = (rng.normal(size=(input_dim, config.feature_dim)) / np.sqrt(input_dim)).astype(np.float32)
    self.dim = input_dim if self._projection is None else config.feature_dim

  def __call__(self, x: tf.Tensor) -> tf.Tensor:
    flat = tf.reshape(tf.cast(x, tf.float32), [-1, self._input_dim])
    return flat if self._projection is None else tf.matmul(flat, self._projection)


def initial_client_state(config: Config) -> dict:
  """pi_c before a client's first round: uniform over the M1 * M2 entries."""
  return {'pi': np.full([config.gaussians, config.learners], 1.0 / (config.gaussians * config.learners), np.float32)}


def build_client_round(model: tf.keras.Model, features_fn: Features, optimizer, batch_fn: task_lib.BatchFn,
                       num_modes: int, config: Config):
  """The client's round as a `tf.function` (weights, mixture, dataset, pi_c) -> (ClientResult, GMM sums, metric
  sums, new pi_c)."""
  owners = multi_branch.tensor_owners(model, 'network_', config.learners)

  @tf.function(autograph=False)
  def run(weights, mixture, dataset, pi):
    examples, _, batch_size = routing.client_examples(task_lib.model_batches(dataset, batch_fn))
    client_training.assign_weights(model, weights)
    logits = model(examples['x'], training=False)[multi_branch.LOGITS]
    log_densities = log_gaussians(features_fn(examples['x']), mixture['means'], mixture['covariances'])
    log_pi = tf.math.log(tf.maximum(pi, 1e-30))
    joint = log_joint(log_pi, log_densities, learner_log_likelihoods(logits, examples))
    q = e_step(joint)
    statistics = m_step(features_fn(examples['x']), q, config.covariance_aggregation)
    count = tf.cast(tf.shape(q)[0], tf.float32)
    learner_weight = tf.reduce_sum(q, axis=1)
    prediction_weight = tf.reduce_logsumexp(prediction_log_weights(log_pi, log_densities), axis=1)
    batches = tf.data.Dataset.from_tensor_slices(dict(examples, **{LEARNER_WEIGHT: learner_weight,
                                                                   PREDICTION_WEIGHT: prediction_weight}))
    training = client_training.local_training(model, optimizer, weights, batches.batch(batch_size),
                                              weighted_learners_objective)
    statistics['count'] = count
    training = client_training.excluded_unless(training, client_training.all_finite(statistics))
    statistics = client_training.exclude_unless(training.finite, statistics)
    chosen = tf.argmax(tf.reduce_sum(q, axis=2), axis=-1, output_type=tf.int32)
    confusion = tf.matmul(tf.one_hot(examples['mode'], num_modes), tf.one_hot(chosen, config.gaussians),
                          transpose_a=True)
    log_likelihood = tf.reduce_sum(tf.reduce_logsumexp(tf.reshape(joint, [tf.shape(joint)[0], -1]), axis=-1))
    sums = collections.OrderedDict(training.metrics, **client_training.exclude_unless(
        training.finite, {'routing': confusion, 'log_likelihood': log_likelihood}))
    learner_mass = tf.reduce_sum(statistics['gamma'], axis=0)  # Lambda_c [M2].
    finite = tf.cast(training.finite, tf.float32)
    weight = [finite * (count if k < 0 else learner_mass[k]) for k in owners]
    new_pi = tf.where(training.finite, statistics['gamma'] / count, pi)
    return tff.learning.templates.ClientResult(training.update, weight), statistics, sums, new_pi

  return run


def build_client_work(model_fn, features_fn: Features, batch_fn: task_lib.BatchFn,
                      client_optimizer: tff.learning.optimizers.Optimizer, element_spec, num_modes: int,
                      config: Config, seed: int) -> tff.learning.templates.ClientWorkProcess:
  """FedGMM's client work; its server state is the GMM (mu, Sigma) and the global pi."""
  weights_type = learning_process.model_weights_type(model_fn)
  mixture_value = initial_mixture(config, features_fn.dim, seed)
  mixture_type = learning_process.struct_type(mixture_value, tf.float32)
  data_type = client_state.client_data_type(element_spec, initial_client_state(config))

  @tff.tensorflow.computation(weights_type, mixture_type, data_type)
  def client_round(weights, mixture, data):
    model = learning_process.client_model(model_fn)
    run = build_client_round(model, features_fn, client_optimizer, batch_fn, num_modes, config)
    stored = client_state.read(data['client_state'])
    result, statistics, sums, pi = run(weights, mixture, data['dataset'], stored['pi'])
    return result, statistics, sums, collections.OrderedDict(position=stored[client_state.POSITION], pi=pi)

  statistics_type, sums_type = client_round.type_signature.result[1:3]

  @tff.tensorflow.computation(mixture_type, statistics_type, sums_type)
  def server_update(mixture, totals, sums):
    new_mixture = aggregate_mixture(mixture, totals, config, totals['count'])
    metrics = collections.OrderedDict(
        client_training.finalize_train_metrics(sums),
        train_log_likelihood=sums['log_likelihood'] / tf.maximum(totals['count'], 1.0),
        **routing.train_routing_metrics(sums['routing'], best_matching=True),
        **{f'global_pi_{a}_{b}': new_mixture['weights'][a, b]
           for a in range(config.gaussians) for b in range(config.learners)})
    return new_mixture, metrics

  return client_state.summed_statistics_work(mixture_value, client_round, server_update)


def build_evaluation(evaluator: evaluation.Evaluator, model_fn, features_fn: Features, num_modes: int,
                     config: Config):
  """evaluate(state): Eq. 3 with the global pi on the union test set, with each held-out client's fitted pi_c on
  its test data, and the routing of test examples to Gaussians."""

  def densities(batch, means, covariances):
    return log_gaussians(features_fn(batch['x']), means, covariances)

  def log_terms(outputs, batch, means, covariances, weights):
    """log N(z; mu_m1, Sigma_m1) + log P_theta_m2(y | x), flattened [B, M1 * M2]: the E step's terms."""
    joint = log_joint(0.0, densities(batch, means, covariances),
                      learner_log_likelihoods(outputs[multi_branch.LOGITS], batch))
    return tf.reshape(joint, [tf.shape(joint)[0], -1])

  def objective(outputs, batch, means, covariances, weights, client_log_weights=None):
    log_pi = tf.math.log(tf.maximum(weights, 1e-30))
    if client_log_weights is not None:
      log_pi = tf.reshape(tf.gather(client_log_weights, batch['client']), [-1, config.gaussians, config.learners])
    log_w = prediction_log_weights(log_pi, densities(batch, means, covariances))
    chosen = tf.argmax(tf.reduce_logsumexp(log_w, axis=2), axis=-1, output_type=tf.int32)
    confusion = tf.matmul(tf.one_hot(batch['mode'], num_modes), tf.one_hot(chosen, config.gaussians),
                          transpose_a=True)
    logits = mixture_logits(tf.convert_to_tensor(outputs[multi_branch.LOGITS]), tf.reduce_logsumexp(log_w, axis=1))
    return objectives.classification_result(logits, batch)._replace(routing=confusion)

  def novelty_score(outputs, batch, means, covariances, weights):
    """-log P(z) = -log sum_{m1,m2} pi(m1, m2) N(z; mu_m1, Sigma_m1) with the global pi (footnote 4)."""
    del outputs  # Unused: the density is of the GMM's features alone.
    log_pi = tf.math.log(tf.maximum(weights, 1e-30))
    joint = log_pi + densities(batch, means, covariances)[:, :, tf.newaxis]
    return -tf.reduce_logsumexp(tf.reshape(joint, [tf.shape(joint)[0], -1]), axis=-1)

  return evaluation.routed_evaluation(
      evaluator.with_model(model_fn()), objective,
      lambda mixture: (mixture['means'], mixture['covariances'], mixture['weights']), [num_modes, config.gaussians],
      best_matching=True, personalization=evaluation.Personalization(log_terms, config.eval_em_steps),
      novelty_score=novelty_score)


def build_algorithm(task: task_lib.Task, element_spec, hparams: method.Hyperparameters,
                    evaluator: evaluation.Evaluator, config: Config) -> method.Algorithm:
  config.validate()
  model_fn = lambda: multi_branch.build_multi_network_model(lambda: task.model_fn(1), config.learners)
  with tf.Graph().as_default():
    input_dim = int(np.prod(model_fn().input_shape[1:]))
  features_fn = Features(config, input_dim, hparams.seed)
  client_work = build_client_work(
      model_fn, features_fn, task.batch_fn, tff.learning.optimizers.build_sgdm(hparams.client_learning_rate),
      element_spec, task.num_modes, config, hparams.seed)
  process = learning_process.compose(model_fn, client_work, hparams.server_step,
                                     per_tensor_mean.PerTensorWeightedMeanFactory())
  evaluate = build_evaluation(evaluator, model_fn, features_fn, task.num_modes, config)
  return method.Algorithm(process, evaluate, initial_client_state=initial_client_state(config),
                          model_fn=model_fn)
