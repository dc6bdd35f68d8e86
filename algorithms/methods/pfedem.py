"""pFedEM (Chen et al., "Adaptive Personalized FL for Non-IID Data with Continual Distribution Shift"): one round of
federated EM of a diagonal GMM over features z = f(x) per round, hard partitions, K sub-models.

Per round, client i with the round's data D_i (N examples), the broadcast sub-models w_k and global GMM
theta_k = (mu_k, sigma_k^2, pi_k) (Algorithm 1, lines 3-13):

  E step (Eq. 8, log space)  gamma_nk = pi_k N(z_n | mu_k, sigma_k^2) / sum_j pi_j N(z_n | mu_j, sigma_j^2)
  M step (Eq. 9-11)          mu_ik = sum_n gamma_nk z_n / G_k,  sigma_ik^2 = sum_n gamma_nk (z_n - mu_ik)^2 / G_k,
                             pi_ik = G_k / N,   G_k = sum_n gamma_nk
  hard partition (l. 8-11)   c_n = argmax_k gamma_nk (the posterior before the M step), n_ik = |{n : c_n = k}|
  local training (Eq. 4)     sub-model k on D_ik only: each example trains its partition's sub-model, with weight
                             N / n_ik, so sub-model k follows the gradient of the mean loss over D_ik (an empty
                             partition leaves its sub-model unchanged);

and the server (Algorithm 1, lines 14-15):

  models (Eq. 5)      w_k <- w_k + sum_i p_i (w_ik - w_k), p_i = N_i / sum_j N_j (this round's sizes)
  GMM (Eq. 12-14)     mu_k = sum_i n_ik mu_ik / sum_i n_ik,  sigma_k^2 = sum_i n_ik sigma_ik^2 / sum_i n_ik,
                      pi_k = sum_i n_ik / sum_q sum_i n_iq;

computed as `federated_sum`s of n_ik mu_ik, n_ik sigma_ik^2 and n_ik (no per-client value reaches the server).
Inference (Eq. 15): p(y | x) = sum_k pi_k softmax(h_{w_k}(x)) with the global pi.

Choices (the literal reading is the default, each other reading a flag `--pfedem_<field>`):
- `submodels`: `networks` (K full copies of the task's single-branch network, the paper's "K sub-models") or
  `branches` (the K branches of the suite's multi-branch network, sharing its extractor).
- `features`, f (no pretrained encoder is reachable offline): `shared` (the current extractor of the
  sub-models: the shared extractor with `branches`, network 1's with `networks`), `fixed` (the task's extractor
  frozen at its seeded initialization: random features, the same every round, so last round's GMM stays valid),
  `pretrained` (the task's network trained centrally for `pretrain_epochs` Adam epochs on every training client's
  examples pooled, then frozen: the stand-in for the paper's ImageNet encoder;
  `algorithms.core.central_pretraining`, batches of 128, learning rate 1e-3; it has seen the run's own clients, so
  it is an upper bound on a frozen encoder) or `raw` (x flattened; vector tasks). Default `shared`, the one that
  tracked the shares best where none found the modes: on the synthetic task under `mixture_drift` (linear, 3
  cycles, 96 rounds, seed 0) the learned pi_1 correlated with the imposed share at 0.68 (`shared`), 0.16 (`fixed`)
  and -0.07 (`raw`), routing ARI ~0 for all three (`pretrained` came later: see `pi_pseudocount`); on
  `gaussian_mixture` (K = 3, where x itself is a mixture of Gaussians and `shared` = `raw` = x) the GMM finds the
  components (routing ARI 0.91).
- `inference`: `global_pi` (Eq. 15: every example mixes the sub-models with the global pi) or `posterior` (each
  example with its own gamma_k(z) under the global GMM, the other reading).
- `client_pi`: False (Algorithm 1 line 5: every round starts from the global GMM) or True (client i keeps
  its pi_ik of Eq. 11 across rounds in the suite's client-state store and uses it in its next E step; at its first
  round it uses the global pi).
- `model_weights`: `client_size` (Eq. 5's p_i) or `partition_size` (Eq. 6: sub-model k's tensors weighted
  by n_ik, a shared extractor by N_i; `algorithms.core.per_tensor_mean`).
- `variance_floor`: sigma^2 >= floor after the client M step and the server aggregation (the paper has none;
  1e-6 only keeps log-densities finite).
- `collapse_guard`: a component with no mass (no example assigned to it in the round, sum_i n_ik = 0;
  with `gmm_step` < 1, none in any round so far, the accumulated mass being 0) keeps its mean
  and variance and gets pi_k = 0 by Eq. 14 (`keep`; it can then never win an example again), or (`split`) is
  re-seeded at the largest component's mean shifted by one standard deviation along a fixed random sign pattern,
  with that component's variance, halving that component's pi between the two.
- `gmm_step` beta (default 1: Eq. 12-13 exactly), a departure for shares that reach 0: Eq. 12-13 refit every
  component to the round's data alone, so when a base is nearly absent from a round (the linear cycle runs its share
  down to 0) its component is fitted to the few examples it wins, its variance shrinks onto them, it wins none the
  next round, Eq. 14 gives it pi_k = 0, and Eq. 8 never gives it an example again. Measured on fixed features (the
  extractor of a centrally trained synthetic-task network, where a batch diagonal 2-GMM finds the modes at ARI 0.90;
  numpy, Algorithm 1's GMM steps only, means initialized around a sample's mean, 10 clients x 45 examples per
  round, 3 linear cycles over 192 rounds, seeds 0-2): the test ARI of the GMM's partition reaches 0.81-0.92 in the
  first cycle and is 0.00 over the last third of the run, learned pi correlating 0.15-0.21 with the imposed share.
  With beta < 1 the server pools the round's Gaussians with the accumulated ones (the moments of the pooled sample,
  `aggregate_mixture`; stochastic-approximation EM over rounds), so a component that wins few examples moves
  little: with beta = 0.1 the ARI over the last third is 0.76-0.89 and pi correlates 0.80-0.97. In the full
  process on the synthetic task it does not suffice (seed 0: 0.26 linear, 0.08 cosine, against 0.15 / 0.06 for
  Eq. 12-13 over 3 seeds), because there the features move with the network every round: the accumulated Gaussians
  describe last rounds' feature space. Eq. 14's pi is the round's in both readings.
- `pi_pseudocount` a (default 0: Eq. 14 exactly), a departure for the other absorbing state: Eq. 14's pi_k is the
  round's hard count share, so a component that wins no example in a round gets pi_k = 0, log pi_k = -69 in the next
  E step (Eq. 8), and never wins again, whatever its Gaussian. pi_k = (n_k + a) / (N + K a) is the MAP estimate under
  a Dirichlet(a + 1) prior on pi: no pi_k reaches 0. Measured on the synthetic task under `mixture_drift` with the
  frozen `pretrained` features (linear / cosine, 3 cycles over 192 rounds, seeds 0-2; correlation of the learned pi
  with the imposed share, best component): Eq. 12-14 0.07 / 0.10, with a = 1 alone the same (Eq. 12-13 still shrink
  a component onto its last few examples); `gmm_step` 0.1 alone 0.46 / 0.40 (in a run where the GMM had found the
  bases, ARI 0.84-0.89 for 60 rounds, component 1 won no example at share 0.02 and died); both 0.87 +- 0.07 /
  0.64 +- 0.20 (0.93-0.96 in the three runs whose GMM found the bases).
- `gmm_init` (the paper gives none): `origin` (mu_k ~ N(0, 0.1^2), sigma_k^2 = 1, pi_k = 1 / K, as
  FedTEM's GMM) or `data` (the same in the features' own coordinates: mu_k = m + sqrt(v) e_k, e_k ~ N(0, 0.1^2),
  sigma_k^2 = v, with m and v the per-dimension mean and variance of the features over the pooled training
  examples, `feature_moments`; only for features that do not train, and centrally computed, like `pretrained`).
  With `pretrained` features, `gmm_step` 0.1, a = 1, seeds 0-5, the learned pi correlated >= 0.9 with the imposed
  share in 3 of 6 linear and 1 of 6 cosine runs from `origin` and in 4 and 1 of 6 from `data`; the other runs split
  each base about 40/60 along another direction of the features (routing ARI <= 0.06) for the whole run. For three
  of the six seeds' encoders that other split is the likelihood's own choice, not EM's start: the best diagonal
  2-GMM of the pooled features does not separate the bases (`experiment/check_base_separability.py`). With the
  synthetic bases twice as far apart (`--synthetic_style_scale=0.3`) the correlation is 0.93-0.99 in seeds 0-2,
  and Algorithm 1 without the two departures still loses a base at the first cycle's end (docs/results/pfedem.md).
- Server update: the server step applies Eq. 5's mean delta (`--server_optimizer`): `sgd` with learning rate 1, the
  default (`DEFAULTS`), is Eq. 5 as written (parameter averaging); `adam` applies FedAdam to it instead; local
  iterations J: the suite's schedule (`--client_epochs`, `--client_batch_size`, `--max_elements_per_client`).

Metrics: `train_routing_accuracy` / `train_routing_ari` of the hard partition against the examples' true domains,
`learned_share_<k>` = pi_k after aggregation (the paper's Figure 4 compares it with the imposed share), and on
evaluation `routing_accuracy` / `routing_ari` of argmax_k gamma_k(z) on the test examples.
"""

import collections
import dataclasses
from typing import Iterator

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from algorithms.core import central_pretraining
from algorithms.core import client_state
from algorithms.core import client_training
from algorithms.core import evaluation
from algorithms.core import gmm
from algorithms.core import learning_process
from algorithms.core import method
from algorithms.core import objectives
from algorithms.core import per_tensor_mean
from algorithms.core import routing
from models import multi_branch
from tasks import task as task_lib

NAME = 'pfedem'
# Its encoder pretraining, data-initialized mixture and initial mixture use the run's seed.
SEEDED_BUILD = True
SENDS = method.Sends(
    method_sums=('count', 'weighted_means', 'weighted_variances'),
    simulation_only=('routing',))
DEFAULTS = method.Defaults(
    method.PARAMETER_AVERAGING,
    source=('Chen et al., "Adaptive Personalized FL for Non-IID Data with Continual Distribution Shift": Eq. 5 (the '
            'server averages the K sub-models\' parameters)'),
    notes=('Section IV-A, Hyperparameters: J = 20 local iterations (the suite counts local work in epochs, '
           '--client_epochs), the learning rate per dataset (0.01 on EMNIST, 0.03 on CIFAR) and batch size 128 for '
           'clients of thousands of examples: the task\'s.'),
    scenario='mixture_drift')
SUBMODELS = ('networks', 'branches')
FEATURES = ('shared', 'fixed', 'pretrained', 'raw')
FROZEN_ENCODERS = ('fixed', 'pretrained')
INFERENCES = ('global_pi', 'posterior')
MODEL_WEIGHTS = ('client_size', 'partition_size')
COLLAPSE_GUARDS = ('keep', 'split')
GMM_INITS = ('origin', 'data')
PRETRAIN_BATCH_SIZE = 128
PRETRAIN_LEARNING_RATE = 1e-3
PARTITION = 'partition'
EXAMPLE_WEIGHT = 'example_weight'


@dataclasses.dataclass(frozen=True)
class Config:
  submodels: str = method.setting('networks', 'pFedEM sub-models: networks (K full networks, the paper) or '
                                  'branches (of the multi-branch network).')
  features: str = method.setting('shared', 'pFedEM GMM features f(x): shared (current extractor), fixed (frozen '
                                 'initial extractor), pretrained (frozen, trained centrally first) or raw '
                                 '(flattened x).')
  pretrain_epochs: int = method.setting(8, 'pFedEM with --pfedem_features=pretrained: Adam epochs over the pooled '
                                        'training data (algorithms/core/central_pretraining.py).')
  inference: str = method.setting('global_pi', 'pFedEM prediction: global_pi (Eq. 15) or posterior (each '
                                  'example\'s gamma_k(z)).')
  client_pi: bool = method.setting(False, 'pFedEM: clients keep their pi_ik (Eq. 11) across rounds for their next '
                                   'E step, instead of the global pi (Alg. 1 line 5).')
  model_weights: str = method.setting('client_size', 'pFedEM Eq. 5 weights: client_size (p_i) or partition_size '
                                      '(n_ik per sub-model).')
  variance_floor: float = method.setting(1e-6, 'pFedEM: floor of the GMM variances.')
  collapse_guard: str = method.setting('keep', 'pFedEM: a component with no examples in a round keeps its '
                                       'parameters with pi_k = 0 (keep) or is re-seeded from the largest (split).')
  pi_pseudocount: float = method.setting(0.0, 'pFedEM: pseudo-count a added to every component\'s count in Eq. 14 '
                                         '(a Dirichlet prior on pi; 0 is Eq. 14).')
  gmm_init: str = method.setting('origin', 'pFedEM GMM initialization: origin (mu ~ N(0, 0.1^2), sigma^2 = 1) or '
                                 'data (the same in the features\' own mean and variance; features that do not '
                                 'train).')
  gmm_step: float = method.setting(1.0, 'pFedEM server GMM step beta in (0, 1]: 1 is Eq. 12-13; < 1 pools the '
                                   'round\'s Gaussians with the accumulated ones (see algorithms/methods/pfedem.py).')

  def validate(self) -> None:
    method.check_settings(self, NAME, {'submodels': SUBMODELS, 'features': FEATURES, 'inference': INFERENCES,
                                       'model_weights': MODEL_WEIGHTS, 'collapse_guard': COLLAPSE_GUARDS,
                                       'gmm_init': GMM_INITS},
                          at_least_one=('pretrain_epochs',), positive=('variance_floor',))
    if self.gmm_init == 'data' and self.features == 'shared':
      raise ValueError('--pfedem_gmm_init=data needs features that do not train (--pfedem_features=fixed, '
                       'pretrained or raw); shared features move every round.')
    if self.pi_pseudocount < 0.0:
      raise ValueError(f'--pfedem_pi_pseudocount must be >= 0; got {self.pi_pseudocount}.')
    if not 0.0 < self.gmm_step <= 1.0:
      raise ValueError(f'--pfedem_gmm_step must be in (0, 1]; got {self.gmm_step}.')


# Where each setting's default comes from (`algorithms.registry` checks one per setting; docs/running.md
# shows them).
SETTING_SOURCES = {
    'submodels': 'paper: Section III, K sub-models (full networks)',
    'features': ("paper: Section III E step, f is 'the backbone network for feature extraction', read as the "
                 "sub-models' current extractor"),
    'pretrain_epochs': 'suite choice: only with --pfedem_features=pretrained, which the paper does not use',
    'inference': 'paper: Eq. 15, the global pi',
    'client_pi': 'paper: Algorithm 1 line 5, every round from the global GMM',
    'model_weights': 'paper: Eq. 5, p_i',
    'variance_floor': 'suite choice: the paper has none; 1e-6 only keeps the log-densities finite',
    'collapse_guard': 'paper: Eq. 14 as written (an empty component gets pi_k = 0 and is kept)',
    'pi_pseudocount': 'paper: Eq. 14 as written (0)',
    'gmm_init': "suite choice: the paper gives no initialization; as FedTEM's GMM (mu ~ N(0, 0.1^2), sigma^2 = 1)",
    'gmm_step': 'paper: Eq. 12-13 as written (1)',
}


def initial_mixture(num_components: int, feature_dim: int, seed: int, center=0.0,
                    variance=1.0) -> collections.OrderedDict:
  """mu_k = center + sqrt(variance) e_k, e_k ~ N(0, 0.1^2 I), sigma_k^2 = variance (per dimension), pi uniform, no
  accumulated mass (float32 numpy). The defaults are the `origin` initialization; `data` passes the features'
  mean and variance (`feature_moments`)."""
  rng = np.random.default_rng([seed, 60])
  offsets = rng.normal(0.0, 0.1, size=(num_components, feature_dim))
  return collections.OrderedDict(
      means=(center + np.sqrt(variance) * offsets).astype(np.float32),
      variances=np.broadcast_to(variance, (num_components, feature_dim)).astype(np.float32),
      weights=np.full([num_components], 1.0 / num_components, np.float32),
      mass=np.zeros([num_components], np.float32))


def pooled_features(task: task_lib.Task, features_fn, seed: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
  """(features [B, D] float64, domains [B]) per batch of every training example of every domain
  (`central_pretraining.pooled_training_batches`), for a feature function that does not train (`fixed`,
  `pretrained`, `raw`)."""
  features_fn.load()
  for batch in central_pretraining.pooled_training_batches(task, 1024, seed):
    yield features_fn(None, batch['x']).numpy().astype(np.float64), batch['mode'].numpy()


def feature_moments(task: task_lib.Task, features_fn, seed: int) -> tuple[np.ndarray, np.ndarray]:
  """(mean [D], variance [D]) of `pooled_features`."""
  total, squares, count = 0.0, 0.0, 0
  for z, _ in pooled_features(task, features_fn, seed):
    total, squares, count = total + z.sum(0), squares + np.square(z).sum(0), count + len(z)
  mean = total / count
  return mean, np.maximum(squares / count - np.square(mean), 1e-6)


def e_step(features: tf.Tensor, mixture: dict, log_weights: tf.Tensor) -> tf.Tensor:
  """log gamma [N, K] of Eq. 8 (log space) for features [N, D]."""
  return gmm.log_responsibilities(gmm.log_gaussians(features, mixture['means'], mixture['variances']), log_weights)


def m_step(features: tf.Tensor, log_gammas: tf.Tensor, variance_floor: float) -> dict:
  """The client M step, Eq. 9-11: mu_ik [K, D], sigma_ik^2 [K, D], pi_ik [K] from features [N, D] and gamma."""
  features = tf.cast(features, tf.float32)
  gammas = tf.exp(log_gammas)
  mass = tf.reduce_sum(gammas, axis=0)  # G_k.
  safe = tf.maximum(mass, 1e-30)[:, tf.newaxis]
  means = tf.matmul(gammas, features, transpose_a=True) / safe  # Eq. 9.
  deviations = tf.square(features[:, tf.newaxis, :] - means[tf.newaxis])  # [N, K, D]
  variances = tf.einsum('nk,nkd->kd', gammas, deviations) / safe  # Eq. 10.
  count = tf.cast(tf.shape(features)[0], tf.float32)
  return collections.OrderedDict(means=means, variances=tf.maximum(variances, variance_floor),
                                 weights=mass / tf.maximum(count, 1.0))  # Eq. 11.


def hard_partition(log_gammas: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
  """(c [N] = argmax_k gamma, n_ik [K]) (Algorithm 1, lines 8-11)."""
  partition = tf.argmax(log_gammas, axis=-1, output_type=tf.int32)
  return partition, tf.reduce_sum(tf.one_hot(partition, log_gammas.shape[-1]), axis=0)


def aggregate_mixture(mixture: dict, counts: tf.Tensor, weighted_means: tf.Tensor, weighted_variances: tf.Tensor,
                      config: Config) -> collections.OrderedDict:
  """Eq. 12-14 from the summed n_ik [K], n_ik mu_ik [K, D] and n_ik sigma_ik^2 [K, D], with the collapse guard;
  Eq. 14 with `config.pi_pseudocount` a: pi_k = (sum_i n_ik + a) / (sum_q sum_i n_iq + K a).

  With `config.gmm_step` beta < 1 the round's Gaussian (mu_k^r, sigma_k^2,r of Eq. 12-13, mass n_k = sum_i n_ik) is
  pooled with the accumulated one (mass m_k): m_k <- (1 - beta) m_k + beta n_k, w = beta n_k / m_k,
  mu_k <- (1 - w) mu_k + w mu_k^r, sigma_k^2 <- (1 - w) (sigma_k^2 + (mu_k_old - mu_k)^2) + w (sigma_k^2,r +
  (mu_k^r - mu_k)^2), the exact moments of the pooled sample. beta = 1 gives w = 1 where n_k > 0: Eq. 12-13.
  """
  safe = tf.maximum(counts, 1.0)[:, tf.newaxis]
  round_means = weighted_means / safe  # Eq. 12.
  round_variances = tf.maximum(weighted_variances / safe, config.variance_floor)  # Eq. 13.
  mass = (1.0 - config.gmm_step) * mixture['mass'] + config.gmm_step * counts
  present = mass > 0
  share = tf.where(present, config.gmm_step * counts / tf.maximum(mass, 1e-30), 0.0)[:, tf.newaxis]  # w.
  means = (1.0 - share) * mixture['means'] + share * round_means
  variances = ((1.0 - share) * (mixture['variances'] + tf.square(mixture['means'] - means))
               + share * (round_variances + tf.square(round_means - means)))
  variances = tf.maximum(variances, config.variance_floor)
  num_components = counts.shape[0]
  weights = ((counts + config.pi_pseudocount)
             / tf.maximum(tf.reduce_sum(counts) + num_components * config.pi_pseudocount, 1.0))  # Eq. 14 (+ a).
  if config.collapse_guard == 'split':
    largest = tf.argmax(counts)
    dim = mixture['means'].shape[1]
    signs = tf.constant(np.where(np.random.default_rng(61).random((num_components, dim)) < 0.5, -1.0, 1.0),
                        tf.float32)
    reseeded = tf.gather(means, largest)[tf.newaxis] + signs * tf.sqrt(tf.gather(variances, largest))[tf.newaxis]
    collapsed = tf.logical_not(present)
    means = tf.where(collapsed[:, tf.newaxis], reseeded, means)
    variances = tf.where(collapsed[:, tf.newaxis], tf.gather(variances, largest)[tf.newaxis], variances)
    shared = tf.gather(weights, largest) / (1.0 + tf.reduce_sum(tf.cast(collapsed, tf.float32)))
    weights = tf.where(collapsed, shared, weights)
    weights = tf.tensor_scatter_nd_update(weights, [[largest]], [shared])
  return collections.OrderedDict(means=means, variances=variances, weights=weights, mass=mass)


def partition_objective(outputs: dict, batch: dict) -> objectives.BatchResult:
  """Each example's loss on its partition's sub-model, weighted by batch['example_weight'] (Eq. 4)."""
  logits = tf.gather(outputs[multi_branch.LOGITS], batch[PARTITION], axis=1, batch_dims=1)
  result = objectives.classification_result(logits, batch)
  labels = tf.cast(batch['y'], tf.int32)
  loss_mask, _ = objectives.label_masks(batch)
  per_example = objectives.per_example_mean(
      tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits), loss_mask)
  return result._replace(loss=tf.reduce_mean(batch[EXAMPLE_WEIGHT] * per_example))


def mixture_prediction(outputs: dict, batch: dict, weights: tf.Tensor) -> objectives.BatchResult:
  """Eq. 15: the metrics of log sum_k pi_k softmax(h_k(x)), pi [K] (global) or [B, K] (per example)."""
  logits = tf.convert_to_tensor(outputs[multi_branch.LOGITS])
  log_weights = tf.math.log(tf.maximum(weights, 1e-30))
  log_weights = tf.reshape(log_weights, [-1, logits.shape[1]] + [1] * (logits.shape.rank - 2))
  return objectives.classification_result(tf.reduce_logsumexp(tf.nn.log_softmax(logits) + log_weights, axis=1),
                                          batch)


class Features:
  """f(x) per `config.features`: the fixed encoder, the model's own features, or raw x. `load()` sets the fixed
  encoder's weights (once eagerly, or at the start of a traced client round, where they are graph constants)."""

  def __init__(self, kind: str, encoder_fn, encoder_weights):
    self._kind = kind
    self._encoder = encoder_fn() if kind in FROZEN_ENCODERS else None
    self._weights = encoder_weights

  def load(self) -> None:
    if self._encoder is not None:
      for variable, value in zip(self._encoder.weights, self._weights):
        variable.assign(value)

  def __call__(self, outputs: dict, x: tf.Tensor) -> tf.Tensor:
    if self._kind == 'shared':
      return outputs[multi_branch.FEATURES]
    if self._kind in FROZEN_ENCODERS:
      return self._encoder(x, training=False)[multi_branch.FEATURES]
    return tf.reshape(tf.cast(x, tf.float32), [-1, int(np.prod(x.shape[1:]))])


def frozen_encoder_weights(task: task_lib.Task, features: str, pretrain_epochs: int, seed: int):
  """The weights of the frozen encoder (`task.model_fn(1)`) of features `fixed` (its initialization under seed + 1)
  or `pretrained` (`pretrain_epochs` of central pretraining under seed + 1) of a run with `seed`; None for the
  others."""
  encoder_fn = lambda: task.model_fn(1)
  if features == 'fixed':
    tf.keras.utils.set_random_seed(seed + 1)
    return encoder_fn().get_weights()
  if features == 'pretrained':
    return central_pretraining.pretrained_weights(task, encoder_fn, pretrain_epochs, PRETRAIN_BATCH_SIZE,
                                                  PRETRAIN_LEARNING_RATE, seed + 1)
  return None


def build_client_round(model: tf.keras.Model, features_fn: Features, optimizer, batch_fn: task_lib.BatchFn,
                       num_components: int, num_modes: int, config: Config):
  """The client's round as a `tf.function` (weights, mixture, dataset, client pi or None) -> (ClientResult,
  GMM sums, metric sums, the client's new pi)."""
  components = multi_branch.tensor_owners(model, 'network_' if config.submodels == 'networks' else 'branch_',
                                          num_components)

  @tf.function(autograph=False)
  def run(weights, mixture, dataset, client_pi):
    examples, _, batch_size = routing.client_examples(task_lib.model_batches(dataset, batch_fn))
    client_training.assign_weights(model, weights)
    features_fn.load()
    features = features_fn(model(examples['x'], training=False), examples['x'])
    log_weights = tf.math.log(tf.maximum(mixture['weights'], 1e-30))
    if client_pi is not None:
      seen = tf.reduce_sum(client_pi) > 0
      log_weights = tf.where(seen, tf.math.log(tf.maximum(client_pi, 1e-30)), log_weights)
    log_gammas = e_step(features, mixture, log_weights)
    local = m_step(features, log_gammas, config.variance_floor)
    partition, counts = hard_partition(log_gammas)
    total = tf.cast(tf.shape(partition)[0], tf.float32)
    example_weight = total / tf.gather(counts, partition)
    batches = tf.data.Dataset.from_tensor_slices(dict(examples, **{PARTITION: partition,
                                                                   EXAMPLE_WEIGHT: example_weight}))
    training = client_training.local_training(model, optimizer, weights, batches.batch(batch_size),
                                              partition_objective)
    statistics = collections.OrderedDict(count=counts, weighted_means=counts[:, tf.newaxis] * local['means'],
                                         weighted_variances=counts[:, tf.newaxis] * local['variances'])
    training = client_training.excluded_unless(training, client_training.all_finite(statistics))
    statistics = client_training.exclude_unless(training.finite, statistics)
    confusion = tf.matmul(tf.one_hot(examples['mode'], num_modes), tf.one_hot(partition, num_components),
                          transpose_a=True)
    sums = collections.OrderedDict(training.metrics, **client_training.exclude_unless(
        training.finite, {'routing': confusion}))
    if config.model_weights == 'client_size':
      weight = training.num_examples
    else:
      finite = tf.cast(training.finite, tf.float32)
      weight = [finite * (total if k < 0 else counts[k]) for k in components]
    new_pi = None if client_pi is None else tf.where(training.finite, local['weights'], client_pi)
    return tff.learning.templates.ClientResult(training.update, weight), statistics, sums, new_pi

  return run


def initial_client_state(num_components: int) -> dict:
  """A client's state before its first round: pi = 0 (none yet; its first E step uses the global pi)."""
  return {'pi': np.zeros([num_components], np.float32)}


def build_client_work(model_fn, features_fn_builder, batch_fn: task_lib.BatchFn,
                      client_optimizer: tff.learning.optimizers.Optimizer, element_spec, num_modes: int,
                      mixture_value: dict, config: Config) -> tff.learning.templates.ClientWorkProcess:
  """pFedEM's client work; its server state is the global GMM, starting at `mixture_value` (`initial_mixture`)."""
  weights_type = learning_process.model_weights_type(model_fn)
  num_components = len(mixture_value['weights'])
  mixture_type = learning_process.struct_type(mixture_value, tf.float32)
  if config.client_pi:
    data_type = client_state.client_data_type(element_spec, initial_client_state(num_components))
  else:
    data_type = learning_process.client_data_type(element_spec)

  @tff.tensorflow.computation(weights_type, mixture_type, data_type)
  def client_round(weights, mixture, data):
    model = learning_process.client_model(model_fn)
    run = build_client_round(model, features_fn_builder(), client_optimizer, batch_fn, num_components,
                             num_modes, config)
    if not config.client_pi:
      result, statistics, sums, _ = run(weights, mixture, data, None)
      return result, statistics, sums
    stored = client_state.read(data['client_state'])
    result, statistics, sums, pi = run(weights, mixture, data['dataset'], stored['pi'])
    return result, statistics, sums, collections.OrderedDict(position=stored[client_state.POSITION], pi=pi)

  statistics_type, sums_type = client_round.type_signature.result[1:3]

  @tff.tensorflow.computation(mixture_type, statistics_type, sums_type)
  def server_update(mixture, totals, sums):
    new_mixture = aggregate_mixture(mixture, totals['count'], totals['weighted_means'],
                                    totals['weighted_variances'], config)
    metrics = collections.OrderedDict(
        client_training.finalize_train_metrics(sums),
        **routing.train_routing_metrics(sums['routing'], best_matching=True),
        **{f'learned_share_{k}': new_mixture['weights'][k] for k in range(num_components)})
    return new_mixture, metrics

  return client_state.summed_statistics_work(mixture_value, client_round, server_update)


def build_algorithm(task: task_lib.Task, element_spec, hparams: method.Hyperparameters,
                    evaluator: evaluation.Evaluator, config: Config) -> method.Algorithm:
  config.validate()
  num_components = hparams.num_branches
  if config.submodels == 'networks':
    model_fn = lambda: multi_branch.build_multi_network_model(lambda: task.model_fn(1), num_components)
  else:
    model_fn = lambda: task.model_fn(num_components)
  encoder_fn = lambda: task.model_fn(1)
  encoder_weights = frozen_encoder_weights(task, config.features, config.pretrain_epochs, hparams.seed)
  features_fn_builder = lambda: Features(config.features, encoder_fn, encoder_weights)
  with tf.Graph().as_default():
    probe = model_fn()
    x = tf.keras.Input(shape=probe.input_shape[1:], dtype=probe.inputs[0].dtype)
    feature_dim = int(features_fn_builder()(probe(x), x).shape[-1])
  moments = {}
  if config.gmm_init == 'data':
    moments = dict(zip(('center', 'variance'), feature_moments(task, features_fn_builder(), hparams.seed)))
  client_work = build_client_work(
      model_fn, features_fn_builder, task.batch_fn, tff.learning.optimizers.build_sgdm(hparams.client_learning_rate),
      element_spec, task.num_modes, initial_mixture(num_components, feature_dim, hparams.seed, **moments), config)
  aggregator = per_tensor_mean.PerTensorWeightedMeanFactory() if config.model_weights == 'partition_size' else None
  process = learning_process.compose(model_fn, client_work, hparams.server_step, aggregator)
  test_features = features_fn_builder()
  test_features.load()
  num_modes = task.num_modes

  def objective(outputs, batch, means, variances, weights):
    features = test_features(outputs, batch['x'])
    log_gammas = e_step(features, {'means': means, 'variances': variances}, tf.math.log(tf.maximum(weights, 1e-30)))
    chosen = tf.argmax(log_gammas, axis=-1, output_type=tf.int32)
    confusion = tf.matmul(tf.one_hot(batch['mode'], num_modes), tf.one_hot(chosen, num_components),
                          transpose_a=True)
    mixing = weights if config.inference == 'global_pi' else tf.exp(log_gammas)
    return mixture_prediction(outputs, batch, mixing)._replace(routing=confusion)

  evaluate = evaluation.routed_evaluation(
      evaluator.with_model(model_fn()), objective,
      lambda mixture: (mixture['means'], mixture['variances'], mixture['weights']), [num_modes, num_components],
      best_matching=True)
  initial = initial_client_state(num_components) if config.client_pi else None
  return method.Algorithm(process, evaluate, initial_client_state=initial, model_fn=model_fn)
