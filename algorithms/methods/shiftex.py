"""ShiftEx (Bhope, Jayaram, Venkateswaran and Venkatasubramanian, "Shift Happens: Mixture of Experts based
Continual Adaptation in Federated Learning", 2025): shift-aware mixture of experts for windows of covariate and
label shift.

Parties stream data in windows of `window_rounds` rounds. A pool of experts (full networks) serves them; each
party is assigned one expert. Per party and window (Algorithm 1), the party embeds its data with an encoder (the
penultimate layer, the task network's features), keeps a sample of the embeddings and its label counts, and
compares them with the previous window's:

  covariate shift  <=>  MMD^2(P_t^c(X), P_{t-1}^c(X)) > delta_cov      (Eq. 1, `algorithms.core.drift_statistics`)
  label shift      <=>  JSD(y_t^c, y_{t-1}^c) > delta_label

with thresholds "from p-value estimation from bootstrapped client feature representations assuming no shift" (the
paper's words; it gives no procedure). Here each threshold is that of a permutation test of level alpha at the
party: the two windows' samples are pooled and split at random B times (`--shiftex_permutations`), and the party
has shifted when the randomized permutation p-value of either statistic is at most alpha
(`drift_statistics.mmd_permutation_test`, `jsd_permutation_test`). Under no shift the two windows are exchangeable,
so each test's false-alarm rate is alpha at the party's own sample sizes, corruption and label skew (a pooled
threshold from other parties' nulls is not: it misjudges parties whose labels were thinned). At
the server (Algorithm 2), the profiles (mean embeddings) of the shifted parties are clustered by k-means with k by
the Davies-Bouldin index (`algorithms.core.kmeans`); a cluster of at least gamma parties reuses the expert whose
latent memory M^(k) is within epsilon,

  MMD(c_j, M^(k)) = sqrt(2 - 2 exp(-gamma_k ||c_j - M^(k)||^2)) <= epsilon    (Eq. 1 between the two profiles),

and moves that memory by an exponential moving average, M^(k) <- (1 - rho) M^(k) + rho c_j; otherwise it spawns a
new expert, Clone(theta_0), with memory c_j. At the end of every window, experts whose flattened parameters have
cosine similarity above tau are consolidated into their average weighted by the examples each has trained on.
Each expert is trained by federated averaging on the parties assigned to it (the server step, by default parameter
averaging: `DEFAULTS`).

How the suite realizes it (documented choices; the paper gives no values):
- Experts are the networks of a `build_multi_network_model`: K = `--num_branches` slots, of which the last holds
  theta_0, the bootstrap expert frozen at the end of W0's second-to-last round, as W0's census round receives it
  (copied by the server step, `algorithms.core.network_pool`,
  its optimizer moments zeroed where the server step keeps any; no party trains it, so its update is zero and it
  never moves), and the others hold the pool (at most K - 1 experts). A spawn copies the frozen slot; a merge
  averages two slots. Parties carry an expert id (client state); the server maps ids to slots, so a party of a
  merged expert follows it.
- Protocol (Algorithm 2: every party reports at each window boundary): the scenario says which rounds are census
  rounds (`periodic_shift.scenario.Scenario.census_plan`: W0's last round, and in every later window its first
  round, or with sliding windows its round `--census_round`, by default the first in which every mover holds only
  its new regime). In a
  census round every party of the population runs the client round on the data it holds then; the round's
  participants train as in any round, the others only report (`client_state.TRAINS`). Each party compares a sample
  of `--shiftex_samples` inputs and its label counts with those it kept from its last round in an earlier window,
  whatever rounds of the current window it trained in before the census (`initial_client_state`; Algorithm 1 reads
  D_{t-1}; the kept inputs are embedded anew with the current encoder, so the MMD compares data, not two states of
  a model in training). The server clusters the profiles of all the census's shifted
  parties at once and assigns the clusters at the end of the round; a shifted party sits out of training until it
  takes the expert of its nearest cluster centroid, at its next round (at the latest in the next census round).
  Parties of clusters smaller than gamma (|G_j| < gamma) keep their expert and fine-tune locally: they train
  without sending their update for the rest of the window (Algorithm 2 line 31). Where the simulation still
  departs: training participation per round is the scenario's (a random share of the parties, 20% in the
  ShiftEx grid), not every party; W0's census is its last round, where expert 1 is still trained while the
  profiles are embedded by theta_0 (expert 1 as that round receives it).
- Encoder (`--shiftex_encoder`): `bootstrap` (default) embeds with the frozen theta_0, so tests, profiles and
  memories live in one space (an open choice of the paper); `assigned` embeds with the party's own expert (the paper's
  words), so profiles of parties on different experts live in different spaces. In W0 both use expert 1.
- Calibration: the permutation tests above (algorithms/methods/shiftex_calibration_test.py: false alarms within
  [alpha / 2, 2 alpha] per statistic on stationary streams, and the power on known shifts).
  `--shiftex_detection=w0_threshold` takes the paper's fixed thresholds instead: at W0's census every party also
  reports its two statistics with no shift (`null_statistics`: MMD^2 between samples of the two halves of its data,
  JSD between two resamples of its labels), and delta_cov, delta_label are their (1 - alpha) quantiles over the
  census's parties (`upper_quantile`); a later census flags a party whose MMD^2 or JSD exceeds them.
- MMD: the V-statistic (`--shiftex_unbiased_mmd` for the U-statistic) between the current window's sample and the
  reference's (`--shiftex_samples` each), gamma_k by the median heuristic of the pooled samples; JSD between the
  two windows' label histograms (all their labels).
- Matching: profiles are mean embeddings ("a single d-dimensional feature vector" per party, Section 5.4); a
  cluster's nearest expert is the one whose memory M^(k) (a moving average of its clusters' centroids) is nearest
  its centroid (the point-mass MMD of Eq. 1, gamma_k = 1 / the median squared distance between W0's census
  profiles). Whether it reuses that expert is a two-sample test, which Algorithm 2's "latent memory" allows: each
  memory also keeps MEMORY_PROFILES of its parties' profiles (W0's census for expert 1, a new expert's cluster, moved
  by `mixed_sample` at rate rho on reuse), and the cluster reuses the expert unless the permutation test of the MMD
  between the cluster's profiles and the kept ones (`reuse_test`, `--shiftex_permutations`) rejects at level alpha.
  Under "the cluster's parties come from the expert's distribution" the two sets are exchangeable, so such a
  cluster spawns at rate alpha whatever its size and the embedding's dimension (a radius calibrated on means of W0
  profiles bounds a different statistic: the centroid's spread about W0's mean, ~ 1/n - 1/N, against a centroid's
  distance to a memory, ~ 1/n + 1/m). A reuse of a rejected cluster happens only when the pool is full and is
  counted apart (`reused_forced`). `--shiftex_epsilon` > 0 replaces the test by a fixed radius on the point-mass
  MMD (the paper's form; a fixed radius has no scale of its own, so a value that suits one embedding forces every
  reuse on another).
- k = 1 unless some k >= 2 has a Davies-Bouldin index below `--shiftex_split_index` (`algorithms.core.kmeans`); a
  split index above every index the data give (1e9) always takes the k >= 2 of the lowest index (Algorithm 2 line 12).
- A new expert is Clone(theta_0) (Algorithm 2 line 22); `--shiftex_clone_source=nearest` copies the expert whose
  memory is nearest its cluster's centroid instead (the expert its parties most likely left).
- `--shiftex_oracle_assignment` (an oracle, marked in reports) replaces detection and clustering by the truth: a
  party has shifted when its true domain changed, the shifted parties of one domain form one cluster
  (`domain_clusters`), and a cluster joins the expert spawned for its domain (expert 1: W0's), else spawns one; what
  is left to the method is training, merging and evaluation. Its parties also send their true domain, which no
  deployment could (not in SENDS).
- Consolidation is checked in the last round of each window after W0, greedily over disjoint pairs.
- FLIPS' label clusters come from W0's census (every party's label histogram); before them the balance is 1.
- FLIPS' label-balanced cohorts become aggregation weights (`flips_balance`): the scenario chooses the parties.
- Eq. 2 (facility location) of every assignment is reported, with the exact optimum when at most EXACT_PARTIES
  parties shifted (`algorithms.core.facility_location`); the heuristic does not use lambda and mu
  (`experiment/shiftex_eq2_gap.py` sweeps them against the optimum).

Evaluation: a test batch (test data come per domain, so a batch stands for one party's test data) is scored by the
active expert whose latent memory is nearest the batch's mean embedding, as a census matches a party; no label and no
true domain is read. `--oracle_test_domains` scores a domain's test data by the experts its parties are assigned to
instead, weighted by a decaying count of the parties seen per domain and expert (the paper's measure, each party's
expert on its current-window data, Section 3.2); that reads each batch's true domain, an oracle marked in reports.

Metrics: `num_experts`, `spawned`, `reused` (of which `reused_forced`: judged far from every memory, reused because
the pool was full), `merged`, `match_mmd` and `match_p_value` (the means over the assignment's trained clusters of
their point-mass MMD to the nearest memory and of their reuse test's p-value), `assignment_objective` / `optimal_objective` /
`solved_exactly` (Eq. 2), `label_clusters` (FLIPS'); scored against the true domains (simulation only):
`census_reporters` / `census_checked` (parties reporting in a census after W0, and those holding a sample of an
earlier window to compare with), `true_shifts` / `detected_shifts` (parties whose domain changed since their
reference, and those flagged) and
`stable_checks` / `false_alarms`, the same per test (`detected_covariate`, `detected_label`,
`false_alarms_covariate`, `false_alarms_label`), and per new domain i `moved_<i>` / `found_<i>` (the report's power
per severity); `train_routing_accuracy` / `train_routing_ari` of the parties' experts against their domains.
"""

import collections
import dataclasses
from typing import NamedTuple

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
KEPT_WINDOWS = ('last', 'ref')  # A party's two kept samples of a window (`initial_client_state`) ...
KEPT_FIELDS = ('window', 'inputs', 'weights', 'counts', 'domain')  # ... and what each holds.
# Its expert slots start from one draw of the run's seed (`identical_networks_fn`).
SEEDED_BUILD = True
SENDS = method.Sends(
    method_sums=('slot_examples', 'label_counts', 'valid', 'census', 'shifted', 'profile', 'histogram', 'size',
                 'null_mmd', 'null_jsd'),
    per_client=('valid', 'census', 'shifted', 'profile', 'histogram', 'size', 'null_mmd', 'null_jsd'),
    simulation_only=('routing', 'census_reporters', 'census_checked', 'true_shifts', 'detected_shifts', 'stable_checks', 'false_alarms', 'detected_covariate',
                     'detected_label', 'false_alarms_covariate', 'false_alarms_label', 'moved_by_domain',
                     'found_by_domain'),
    client_state=('expert_id', 'pending', 'local_window', 'checked_window', 'profile') + tuple(
        f'{kept}_{field}' for kept in KEPT_WINDOWS for field in KEPT_FIELDS),
    own_aggregation=True)
DEFAULTS = method.Defaults(
    dict(method.PARAMETER_AVERAGING, num_branches=7),
    source=('Bhope et al., "Shift Happens: Mixture of Experts based Continual Adaptation in Federated Learning", '
            '2025, Section 3 ("set up to train a new expert model using a FL process among its members": FedAvg, '
            'McMahan et al., 2017, which averages parameters; the server optimizer is not named) and Section 7, '
            'ShiftEx Overheads ("a group of a maximum of 6 experts": 6 expert slots and the frozen bootstrap '
            'expert\'s)'),
    scenario='windowed')
DETECTION_COUNTS = ('census_reporters', 'census_checked', 'true_shifts', 'detected_shifts', 'stable_checks', 'false_alarms', 'detected_covariate',
                    'detected_label', 'false_alarms_covariate', 'false_alarms_label')
MEMORY_PROFILES = 128  # Profiles an expert's latent memory keeps (`mixed_sample`), the reference of its reuse test.
ENCODERS = ('bootstrap', 'assigned')
DETECTIONS = ('permutation', 'w0_threshold')
CLONE_SOURCES = ('bootstrap', 'nearest')
ASSIGNMENT_DECAY = 0.9  # Per round, of the domain x expert counts of the `assigned` evaluation.
MAX_EXPERT_IDS = 256
EXACT_PARTIES = 5  # Assignments of at most this many shifted parties are also solved exactly (Eq. 2).


@dataclasses.dataclass(frozen=True)
class Config:
  encoder: str = method.setting('bootstrap', 'ShiftEx: embeddings for detection and matching from the frozen '
                                'bootstrap expert (bootstrap) or the party\'s own expert (assigned).')
  samples: int = method.setting(32, 'ShiftEx: inputs a party keeps per window; its covariate test compares this '
                                'many embeddings of the window with as many of the previous window\'s.')
  alpha: float = method.setting(0.05, 'ShiftEx: level of each shift test (covariate, label).')
  permutations: int = method.setting(99, 'ShiftEx: random relabellings of each permutation test.')
  unbiased_mmd: bool = method.setting(False, 'ShiftEx: U-statistic MMD^2 (default: V-statistic).')
  census_capacity: int = method.setting(1024, 'ShiftEx: most shifted parties one assignment clusters (a census '
                                        'with more keeps the last reported).')
  max_clusters: int = method.setting(4, 'ShiftEx: largest k of the k-means of shifted parties.')
  split_index: float = method.setting(1.0, 'ShiftEx: shifted parties form one cluster unless some k >= 2 has a '
                                      'Davies-Bouldin index below this.')
  epsilon: float = method.setting(0.0, 'ShiftEx: a cluster reuses an expert whose memory is within this MMD; 0: '
                                  'unless the permutation test of the MMD between the cluster\'s profiles and those '
                                  'the memory keeps rejects at level alpha.')
  memory_rate: float = method.setting(0.5, 'ShiftEx: rate rho of the latent memories\' moving average.')
  min_cluster_size: int = method.setting(2, 'ShiftEx: gamma, the smallest cluster trained by FL.')
  merge_similarity: float = method.setting(0.999, 'ShiftEx: tau, experts more cosine-similar are merged.')
  new_expert_cost: float = method.setting(1.0, 'ShiftEx: lambda of Eq. 2, the cost of a new expert (reported '
                                          'objective only; the heuristic does not use it).')
  imbalance_weight: float = method.setting(1.0, 'ShiftEx: mu of Eq. 2, the weight of the experts\' label '
                                           'imbalance (reported objective only).')
  flips: bool = method.setting(True, 'ShiftEx: FLIPS label balance: a party\'s update weight is divided by its '
                               'label cluster\'s share of its expert\'s recent parties.')
  detection: str = method.setting('permutation', 'ShiftEx: a party has shifted when the permutation test of either '
                                  'statistic rejects at level alpha (permutation) or when either statistic exceeds '
                                  'the (1 - alpha) quantile of its null over W0\'s census parties (w0_threshold, '
                                  'fixed delta_cov and delta_label).')
  clone_source: str = method.setting('bootstrap', 'ShiftEx: a new expert is a copy of the frozen bootstrap expert '
                                     'theta_0 (bootstrap) or of the expert whose memory is nearest its cluster '
                                     '(nearest).')
  oracle_assignment: bool = method.setting(False, 'ShiftEx oracle: a party has shifted when its true domain '
                                           'changed, and the shifted parties of one true domain form one cluster, '
                                           'which joins the expert spawned for that domain (reads the true domain; '
                                           'marked in reports).')
  window_rounds: int = 32
  num_branches: int = 4
  clients_per_round: int = 10

  def validate(self) -> None:
    method.check_settings(self, NAME, choices={'encoder': ENCODERS, 'detection': DETECTIONS,
                                               'clone_source': CLONE_SOURCES},
                          at_least_one=('census_capacity', 'max_clusters', 'min_cluster_size'),
                          positive=('memory_rate', 'split_index'))
    if self.epsilon < 0:
      raise ValueError(f'--shiftex_epsilon must be >= 0 (0: calibrated); got {self.epsilon:g}.')
    if self.samples < 4 or self.permutations < 1:
      raise ValueError(f'--shiftex_samples must be >= 4 and --shiftex_permutations >= 1; got {self.samples}, '
                       f'{self.permutations}.')
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


# Where each setting's default comes from (`algorithms.registry` checks one per setting; docs/running.md
# shows them).
SETTING_SOURCES = {
    'encoder': ("suite choice: the paper embeds with the party's own expert without saying in which space profiles "
                'of parties on different experts meet; the frozen bootstrap expert gives them one'),
    'samples': 'suite choice: the paper states no sample size of its covariate test',
    'alpha': ("suite choice: the paper's thresholds delta_cov, delta_label have no values; a test at level 0.05 "
              'calibrates them (algorithms/methods/shiftex_calibration_test.py)'),
    'permutations': 'suite choice: the paper states no test; 99 relabellings give p-values in steps of 0.01',
    'unbiased_mmd': 'suite choice: the paper does not say which MMD estimate (V-statistic)',
    'census_capacity': "suite choice: a bound of the suite's static shapes, above every population it runs",
    'max_clusters': 'suite choice: the paper states no range of k for its k-means of shifted parties',
    'split_index': 'suite choice: the paper picks k by Davies-Bouldin without a threshold',
    'epsilon': ("suite choice: the paper's reuse threshold epsilon has no value; 0 replaces it by a permutation "
                'test at level alpha, which has a scale of its own'),
    'memory_rate': "suite choice: the paper states no rate of its latent memories' update",
    'min_cluster_size': "suite choice: the paper's gamma has no value",
    'merge_similarity': "suite choice: the paper's tau has no value",
    'new_expert_cost': "suite choice: Eq. 2's lambda has no value (reported objective only)",
    'imbalance_weight': "suite choice: Eq. 2's mu has no value (reported objective only)",
    'flips': "paper: Section 3, FLIPS' label-balanced participant selection",
    'detection': ("suite choice: the paper's thresholds come from null distributions of the bootstrap phase "
                  "(Section 5) without a procedure; a party's own permutation test has the level alpha at its own "
                  'sample sizes'),
    'clone_source': 'paper: Algorithm 2 line 22, Clone(theta_0)',
    'oracle_assignment': 'suite choice: an oracle ceiling of assignment, off by default (no decision reads a true domain)',
}


def initial_client_state(input_shape: tuple, feature_dim: int, num_classes: int, config: Config) -> dict:
  """A party before its first round: expert id 0, no kept window (-1). A party keeps two samples of its inputs and
  label counts (`KEPT_WINDOWS`): `last_*` of its latest round, and `ref_*` of its latest round in a window before
  last_window's. Its reference in window w (Algorithm 1 reads D_{t-1}) is `last_*` when that is from a window
  before w and `ref_*` otherwise, so a party that trained in w before w's census still compares with its previous
  window's data (sliding windows hold the census rounds after a window's first). The inputs are embedded anew with
  the current encoder when compared."""
  return {'expert_id': np.int32(0), 'pending': np.bool_(False), 'local_window': np.int32(-1),
          'checked_window': np.int32(-1), 'profile': np.zeros([feature_dim], np.float32),
          **{f'{kept}_{field}': value for kept in KEPT_WINDOWS for field, value in zip(KEPT_FIELDS, (
              np.int32(-1), np.zeros((config.samples,) + tuple(input_shape), np.float32),
              np.zeros([config.samples], np.float32), np.zeros([num_classes], np.float32), np.int32(-1)))}}


class ServerState(NamedTuple):
  """The server's pool of K expert slots, its memories and the bookkeeping of Algorithm 2 (the client work's state).
  Slot K - 1 is the frozen bootstrap expert theta_0."""
  domain_slots: np.ndarray  # [modes, K] float32: decaying counts of parties by true domain and slot (evaluation).
  round_num: np.int32  # Rounds so far.
  active: np.ndarray  # [K] bool: the slot holds an expert.
  memory: np.ndarray  # [K, D] float32: each expert's latent memory M^(k), a moving average of its clusters' centroids.
  memory_profiles: np.ndarray  # [K, MEMORY_PROFILES, D] float32: the profiles each memory keeps (its reuse test).
  memory_sizes: np.ndarray  # [K] int32: rows of memory_profiles in use.
  profile_gamma: np.float32  # The kernel bandwidth gamma_k of Eq. 1 (median heuristic of W0's census profiles).
  examples_seen: np.ndarray  # [K] float32: examples each slot trained on (the weights of a merge).
  id_slot: np.ndarray  # [MAX_EXPERT_IDS] int32: the slot of an expert id, -1 for none.
  slot_id: np.ndarray  # [K] int32: the expert id a slot holds, -1 for none.
  next_id: np.int32  # The next expert id to give.
  pending_profiles: np.ndarray  # [P, D] float32: the census's collected profiles (shifted parties; W0: everyone).
  pending_count: np.int32  # Rows of the pending buffers in use.
  pending_histograms: np.ndarray  # [P, C] float32: their label histograms.
  pending_sizes: np.ndarray  # [P] float32: their examples.
  objective: np.float32  # Eq. 2 of this round's assignment.
  optimal_objective: np.float32  # Eq. 2's exact optimum when `solved_exactly`.
  solved_exactly: np.bool_  # At most EXACT_PARTIES parties shifted, so the optimum was searched.
  label_centroids: np.ndarray  # [L, C] float32: FLIPS' label clusters (W0's census).
  num_label_clusters: np.int32
  label_counts: np.ndarray  # [K, L] float32: decaying counts of each expert's parties by label cluster.
  centroids: np.ndarray  # [L, D] float32: the last assignment's cluster centroids.
  centroid_id: np.ndarray  # [L] int32: the expert id each centroid was assigned, -1 for local fine-tuning.
  num_centroids: np.int32
  assigned_window: np.int32  # The window of the last assignment, -1 for none.
  mixing: np.ndarray  # [K, K] float32: this round's spawns, freeze and merges of the networks (`network_pool`).
  spawned: np.int32  # This round's new experts.
  reused: np.int32  # This round's clusters that reuse an expert.
  reused_forced: np.int32  # Of those, the ones a full pool forced (the cluster was far from every memory).
  match_mmd: np.float32  # The mean MMD of this round's clusters to the expert they joined.
  match_p_value: np.float32  # The mean p-value of their reuse tests (`reuse_test`; 0 with a fixed epsilon).
  thresholds: np.ndarray  # [2] float32: delta_cov, delta_label of `--shiftex_detection=w0_threshold` (W0's census).
  expert_domain: np.ndarray  # [K] int32: the true domain each slot serves (`--shiftex_oracle_assignment`), -1 none.
  pending_domains: np.ndarray  # [P] int32: the collected parties' true domains (the oracle only).


def initial_server_state(feature_dim: int, num_modes: int, num_classes: int, config: Config) -> ServerState:
  k = config.num_branches
  return ServerState(
      domain_slots=np.zeros([num_modes, k], np.float32),
      round_num=np.int32(0), active=np.arange(k) == 0, memory=np.zeros([k, feature_dim], np.float32),
      memory_profiles=np.zeros([k, MEMORY_PROFILES, feature_dim], np.float32), memory_sizes=np.zeros([k], np.int32),
      profile_gamma=np.float32(0), examples_seen=np.zeros([k], np.float32),
      id_slot=np.array([0] + [-1] * (MAX_EXPERT_IDS - 1), np.int32),
      slot_id=np.array([0] + [-1] * (k - 1), np.int32), next_id=np.int32(1),
      pending_profiles=np.zeros([config.census_capacity, feature_dim], np.float32), pending_count=np.int32(0),
      pending_histograms=np.zeros([config.census_capacity, num_classes], np.float32),
      pending_sizes=np.zeros([config.census_capacity], np.float32),
      objective=np.float32(0), optimal_objective=np.float32(0), solved_exactly=np.bool_(False),
      label_centroids=np.zeros([config.max_clusters, num_classes], np.float32), num_label_clusters=np.int32(0),
      label_counts=np.zeros([k, config.max_clusters], np.float32),
      centroids=np.zeros([config.max_clusters, feature_dim], np.float32),
      centroid_id=np.full([config.max_clusters], -1, np.int32), num_centroids=np.int32(0),
      assigned_window=np.int32(-1), mixing=np.eye(k, dtype=np.float32),
      spawned=np.int32(0), reused=np.int32(0), reused_forced=np.int32(0), match_mmd=np.float32(0),
      match_p_value=np.float32(0), thresholds=np.zeros([2], np.float32), expert_domain=np.full([k], -1, np.int32),
      pending_domains=np.full([config.census_capacity], -1, np.int32))


class RoundView(NamedTuple):
  """What the parties receive: the round, the last assignment, FLIPS' label clusters and the detection's
  thresholds."""
  round_num: tf.Tensor
  centroids: tf.Tensor
  centroid_id: tf.Tensor
  num_centroids: tf.Tensor
  assigned_window: tf.Tensor
  id_slot: tf.Tensor
  label_centroids: tf.Tensor
  num_label_clusters: tf.Tensor
  label_counts: tf.Tensor
  thresholds: tf.Tensor


def point_mmd(a: tf.Tensor, b: tf.Tensor, gamma_k) -> tf.Tensor:
  """MMD (Eq. 1) between point masses at a [..., D] and b [..., D]: sqrt(2 - 2 k(a, b))."""
  return tf.sqrt(tf.maximum(2.0 - 2.0 * tf.exp(-gamma_k * tf.reduce_sum(tf.square(a - b), -1)), 0.0))


def nearest_active(profile: tf.Tensor, memory: tf.Tensor, active: tf.Tensor) -> tf.Tensor:
  """The active slot whose memory is nearest (Euclidean, the order of the point-mass MMD) to profile [D] or to
  each of profiles [B, K, D] per slot."""
  distance = tf.reduce_sum(tf.square(profile - memory), -1)
  return tf.argmin(tf.where(active, distance, np.inf), -1, output_type=tf.int32)


def sample_rows(rows: tf.Tensor, size: int, seed: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
  """Up to `size` rows of rows [N, ...] at random, zero-padded: (sample [size, ...], weights [size], 1 for real
  rows); the same `seed` picks the same rows."""
  order = tf.argsort(tf.random.stateless_uniform(tf.shape(rows)[:1], seed))[:size]
  taken = tf.gather(rows, order)
  padding = size - tf.shape(taken)[0]
  return (tf.ensure_shape(tf.pad(taken, [[0, padding]] + [[0, 0]] * (rows.shape.rank - 1)), [size] + rows.shape[1:]),
          tf.ensure_shape(tf.pad(tf.ones(tf.shape(order), tf.float32), [[0, padding]]), [size]))


def distinct_examples(examples: dict) -> dict:
  """examples {key: [N, ...]} with each distinct input kept once, at its first place. A client's round holds its
  data `--client_epochs` times; the detector's permutation tests assume distinct draws (copies of an example in one
  window make it look unlike any relabelling, which splits the copies, so repeated data reject far above alpha), and
  a profile or label histogram is the data's, not the schedule's."""
  flat = tf.reshape(tf.cast(examples['x'], tf.float32), [tf.shape(examples['x'])[0], -1])
  keys = tf.bitcast(tf.fingerprint(flat), tf.int64)  # [N]: one 64-bit fingerprint per input.
  unique, index = tf.unique(keys)
  first = tf.math.unsorted_segment_min(tf.range(tf.shape(keys)[0]), index, tf.shape(unique)[0])
  return {key: tf.gather(value, first) for key, value in examples.items()}


def window_mmd(x: tf.Tensor, x_weights: tf.Tensor, y: tf.Tensor, y_weights: tf.Tensor, unbiased: bool) -> tf.Tensor:
  """MMD^2 (Eq. 1) of two windows' samples as the permutation test computes it (`drift_statistics.
  mmd_permutation_test`): gamma_k by the median heuristic of the pooled rows, rows of weight 0 padding."""
  gamma_k = drift_statistics.median_heuristic_gamma(tf.concat([x, y], 0),
                                                    tf.cast(tf.concat([x_weights, y_weights], 0) > 0, tf.float32))
  return drift_statistics.mmd_squared(x, y, gamma_k, tf.cast(x_weights > 0, x.dtype), tf.cast(y_weights > 0, y.dtype),
                                      unbiased)


def normalized(counts: tf.Tensor) -> tf.Tensor:
  return tf.math.divide_no_nan(counts, tf.reduce_sum(counts, -1, keepdims=True))


def null_statistics(embeddings: tf.Tensor, labels: tf.Tensor, num_classes: int, seed: tf.Tensor,
                    config: Config) -> tuple[tf.Tensor, tf.Tensor]:
  """A party's two statistics with no shift, from one window's data (the paper's thresholds come "from the null
  distributions of MMD and JSD scores" of the bootstrap phase, "bootstrapped client feature representations assuming
  no shift", Section 5): MMD^2 (`window_mmd`) between samples of up to `--shiftex_samples` embeddings of the two
  halves of its examples at random, and the JSD between two resamples of its labels (with replacement, each its
  number of examples). With fewer than 2 `--shiftex_samples` examples the halves' samples are smaller than a
  test's, so the null is wider than the test's and a threshold from it errs towards fewer alarms."""
  n = tf.shape(embeddings)[0]
  shuffled = tf.gather(embeddings, tf.argsort(tf.random.stateless_uniform([n], seed)))
  first, first_weights = sample_rows(shuffled[:n // 2], config.samples, seed + 1)
  second, second_weights = sample_rows(shuffled[n // 2:], config.samples, seed + 1)
  histogram = tf.math.log(normalized(drift_statistics.label_counts(labels, num_classes)))[tf.newaxis]
  resample = lambda offset: drift_statistics.label_counts(
      tf.random.stateless_categorical(histogram, n, seed + offset)[0], num_classes)
  return (window_mmd(first, first_weights, second, second_weights, config.unbiased_mmd),
          drift_statistics.jensen_shannon(normalized(resample(2)), normalized(resample(3))))


def upper_quantile(values: tf.Tensor, mask: tf.Tensor, alpha: float) -> tf.Tensor:
  """The (1 - alpha) quantile of `values` [P] where `mask` (the inverse of their empirical distribution function, the
  ceil((1 - alpha) n)-th smallest); 0 with none."""
  n = tf.reduce_sum(tf.cast(mask, tf.int32))
  ordered = tf.sort(tf.where(mask, values, np.inf))
  rank = tf.cast(tf.math.ceil((1.0 - alpha) * tf.cast(n, tf.float32)), tf.int32) - 1
  return tf.where(n > 0, tf.gather(ordered, tf.clip_by_value(rank, 0, tf.size(values) - 1)), 0.0)


def build_client_round(model: tf.keras.Model, optimizer, batch_fn: task_lib.BatchFn, config: Config,
                       num_classes: int, num_modes: int):
  """The party's round as a `tf.function` (weights, broadcast state, dataset, stored state) ->
  (ClientResult with per-tensor weights, report for the server, metric sums, new client state)."""
  k_slots = config.num_branches
  trainable_index, non_trainable_index = network_pool.network_index(model, k_slots)

  @tf.function(autograph=False)
  def run(weights, state, dataset, stored):
    everything, batches, _ = routing.client_examples(task_lib.model_batches(dataset, batch_fn))
    examples = distinct_examples(everything)  # The window's data once, whatever the local epochs.
    round_num, position = state.round_num, stored[client_state.POSITION]
    window = method.window_of(round_num, config.window_rounds)
    seed = tf.stack([round_num, position])

    census, trains = stored[client_state.CENSUS] > 0, stored[client_state.TRAINS] > 0

    # Adoption: a pending party takes the expert of the nearest centroid of the assignment of the census it shifted
    # in (at its next round, at the latest in the next census round, before that census's assignment).
    expert_id, pending, local_window = stored['expert_id'], stored['pending'], stored['local_window']
    adopt = pending & tf.equal(state.assigned_window, stored['checked_window']) & (state.num_centroids > 0)
    centroid = tf.argmin(tf.where(tf.range(config.max_clusters) < state.num_centroids,
                                  tf.reduce_sum(tf.square(stored['profile'] - state.centroids), -1), np.inf),
                         output_type=tf.int32)
    chosen_id = state.centroid_id[centroid]
    expert_id = tf.where(adopt & (chosen_id >= 0), chosen_id, expert_id)
    local_window = tf.where(adopt & (chosen_id < 0), window, local_window)
    pending = pending & ~adopt
    slot = tf.clip_by_value(state.id_slot[expert_id], 0, config.bootstrap_slot - 1)

    # Algorithm 1: embeddings, their sample and the label histogram.
    client_training.assign_weights(model, weights)
    features = model(examples['x'], training=False)[multi_branch.FEATURES]  # [N, K, D]
    encoder = slot if config.encoder == 'assigned' else tf.where(window >= 1, config.bootstrap_slot, slot)
    embeddings = tf.gather(features, encoder, axis=1)
    sample, sample_weights = sample_rows(embeddings, config.samples, seed)
    inputs, _ = sample_rows(tf.cast(examples['x'], tf.float32), config.samples, seed)
    counts = drift_statistics.label_counts(examples['y'], num_classes)
    histogram = counts / tf.reduce_sum(counts)
    profile = tf.reduce_mean(embeddings, 0)

    # Detection: every party in a census round of a window after the one of its reference, by two permutation
    # tests of level alpha (the previous window's sample through today's encoder).
    earlier = stored['last_window'] < window  # Its latest kept sample is of an earlier window: the reference.
    reference = {field: tf.where(earlier, stored[f'last_{field}'], stored[f'ref_{field}']) for field in KEPT_FIELDS}
    check = census & (window >= 1) & (reference['window'] >= 0)

    def tests():
      embedded = tf.gather(model(tf.cast(reference['inputs'], model.inputs[0].dtype), training=False)[
          multi_branch.FEATURES], encoder, axis=1)
      if config.detection == 'w0_threshold':  # Fixed thresholds delta_cov, delta_label from W0's census.
        return (window_mmd(sample, sample_weights, embedded, reference['weights'], config.unbiased_mmd)
                > state.thresholds[0],
                drift_statistics.jensen_shannon(normalized(counts), normalized(reference['counts']))
                > state.thresholds[1])
      _, p_covariate = drift_statistics.mmd_permutation_test(sample, sample_weights, embedded, reference['weights'],
                                                             seed + 2, config.permutations, config.unbiased_mmd)
      _, p_label = drift_statistics.jsd_permutation_test(counts, reference['counts'], seed + 4, config.permutations)
      return p_covariate <= config.alpha, p_label <= config.alpha

    covariate, label = tf.cond(check, tests, lambda: (tf.constant(False), tf.constant(False)))
    covariate, label = check & covariate, check & label
    domain = routing.client_mode(examples)  # Simulation only: scores the detector; decides only as the oracle.
    truly = tf.not_equal(domain, reference['domain'])
    shifted = check & truly if config.oracle_assignment else covariate | label
    null_mmd, null_jsd = tf.cond(
        census & tf.equal(window, 0) & tf.constant(config.detection == 'w0_threshold'),
        lambda: null_statistics(embeddings, examples['y'], num_classes, seed + 6, config),
        lambda: (tf.constant(0.0), tf.constant(0.0)))
    detection = collections.OrderedDict(
        (key, tf.cast(value, tf.float32)) for key, value in (
            ('census_reporters', census & (window >= 1)), ('census_checked', check), ('true_shifts', check & truly), ('detected_shifts', shifted & truly),
            ('stable_checks', check & ~truly), ('false_alarms', shifted & ~truly),
            ('detected_covariate', covariate & truly), ('detected_label', label & truly),
            ('false_alarms_covariate', covariate & ~truly), ('false_alarms_label', label & ~truly)))
    at_domain = tf.one_hot(domain, num_modes)  # Per new domain (the report's power per severity).
    detection.update(moved_by_domain=at_domain * detection['true_shifts'],
                     found_by_domain=at_domain * detection['detected_shifts'])
    pending = pending | shifted

    batches = batches.take(tf.where(trains, tf.constant(-1, tf.int64), 0))  # A census reporter does not train.
    output = network_pool.train_network(model, optimizer, weights, batches, slot, trainable_index,
                                         non_trainable_index, config.bootstrap_slot)
    sends = output.finite & trains & ~pending & tf.not_equal(local_window, window)
    label_cluster, balance = flips_balance(histogram, slot, state, config)
    sent = output.num_examples * tf.cast(sends, tf.float32)
    result = network_pool.pool_result(output.update, slot, sent * balance, trainable_index, len(weights.trainable))
    label_counts = tf.one_hot(slot, k_slots)[:, tf.newaxis] * tf.one_hot(label_cluster, config.max_clusters)[
        tf.newaxis] * tf.cast(sends, tf.float32)
    slot_examples = tf.one_hot(slot, k_slots) * sent
    trained = output._replace(finite=output.finite & trains)  # A reporter's round counts in detection only.
    sums = routing.training_sums(trained, domain, slot, num_modes, k_slots, slot_examples=slot_examples,
                                 label_counts=label_counts)
    sums.update(client_training.exclude_unless(output.finite, detection))
    report = collections.OrderedDict(
        valid=output.finite, census=census, shifted=shifted, profile=profile, histogram=histogram,
        size=tf.cast(tf.shape(examples['y'])[0], tf.float32), null_mmd=null_mmd, null_jsd=null_jsd)
    if config.oracle_assignment:  # The oracle's true domain, which no deployment could send (not in SENDS).
      report['domain'] = domain
    new_state = collections.OrderedDict(
        position=stored[client_state.POSITION], expert_id=expert_id, pending=pending, local_window=local_window,
        checked_window=tf.where(check, window, stored['checked_window']),
        profile=tf.where(shifted, profile, stored['profile']),
        **{f'last_{field}': value for field, value in zip(KEPT_FIELDS, (window, inputs, sample_weights, counts,
                                                                         domain))},
        **{f'ref_{field}': value for field, value in reference.items()})
    return result, report, sums, new_state

  return run


def flips_balance(histogram: tf.Tensor, slot: tf.Tensor, state: RoundView,
                  config: Config) -> tuple[tf.Tensor, tf.Tensor]:
  """FLIPS (Bhope et al., 2023; ShiftEx's Sec. 2.4, Algorithm 2 lines 19 and 23) as aggregation weights: (the
  party's label cluster, the factor of its update weight).

  FLIPS clusters parties by their label histograms and selects each round's participants so that every label
  cluster is equally represented. The suite's scenario chooses the participants, so the balance is made in the
  aggregate instead: a party of label cluster l training expert k weighs 1 / (L_k share_kl), where share_kl is
  cluster l's share of expert k's recent participants (a moving count, decay ASSIGNMENT_DECAY per round) and L_k the
  number of clusters among them; each cluster then carries the same total weight in expectation. Label clusters
  are those of W0's census (k-means, k by Davies-Bouldin); factor 1 before them and with
  `--shiftex_flips=false`.
  """
  present = tf.range(config.max_clusters) < state.num_label_clusters
  cluster = tf.argmin(tf.where(present, tf.reduce_sum(tf.square(histogram - state.label_centroids), -1), np.inf),
                      output_type=tf.int32)
  counts = state.label_counts[slot]
  share = tf.math.divide_no_nan(counts[cluster], tf.reduce_sum(counts))
  clusters = tf.reduce_sum(tf.cast(counts > 0, tf.float32))
  factor = tf.where((share > 0) & (state.num_label_clusters > 0), 1.0 / tf.maximum(clusters * share, 1e-6), 1.0)
  return cluster, factor if config.flips else tf.constant(1.0)


def _append(buffer: tf.Tensor, count: tf.Tensor, values: tf.Tensor, keep: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
  """Writes the kept rows of `values` after the first `count` rows of `buffer` (a ring: the oldest are replaced
  once it is full); returns (buffer, new count, capped at the buffer's size)."""
  capacity = tf.shape(buffer)[0]
  kept = tf.boolean_mask(values, keep)
  slots = (count + tf.range(tf.shape(kept)[0])) % capacity
  buffer = tf.tensor_scatter_nd_update(buffer, slots[:, tf.newaxis], kept)
  return buffer, tf.minimum(count + tf.shape(kept)[0], capacity)


def mixed_sample(rows: tf.Tensor, size: tf.Tensor, new_rows: tf.Tensor, new_valid: tf.Tensor, rate,
                 seed: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
  """A latent memory's profiles moved towards new ones, the sample analogue of M <- (1 - rate) M + rate c: each of
  the `size` kept rows of rows [S, D] is replaced with probability `rate` by a row of new_rows [N, D] (those with
  new_valid [N]; in a random order, without repeating one while any is unused), and free rows are filled with
  further new rows; returns (rows, size). rate 1 with size 0 (a new memory) takes up to S of the new rows."""
  capacity = int(rows.shape[0])
  count = tf.reduce_sum(tf.cast(new_valid, tf.int32))
  keys = tf.where(new_valid, tf.random.stateless_uniform(tf.shape(new_valid), seed), 2.0)
  order = tf.argsort(keys)  # The valid new rows first, at random.
  index = tf.range(capacity)
  replaced = (tf.random.stateless_uniform([capacity], seed + 1) < rate) & (index < size)
  filled = (index >= size) & (index - size < count)
  taken = tf.where(filled, index - size + tf.reduce_sum(tf.cast(replaced, tf.int32)),
                   tf.cumsum(tf.cast(replaced, tf.int32)) - 1)
  picked = tf.gather(new_rows, tf.gather(order, tf.math.floormod(taken, tf.maximum(count, 1))))
  chosen = (replaced | filled) & (count > 0)
  return tf.where(chosen[:, tf.newaxis], picked, rows), tf.minimum(size + count, capacity)


def reuse_test(profiles: tf.Tensor, members: tf.Tensor, memory_profiles: tf.Tensor, memory_size: tf.Tensor,
               seed: tf.Tensor, config: Config) -> tf.Tensor:
  """The p-value of "cluster and expert draw their parties from one distribution": the permutation test of the MMD
  (Eq. 1, the median heuristic's bandwidth) between the cluster's profiles (rows of profiles [P, D] where members
  [P]) and the expert's kept profiles (the first memory_size rows of memory_profiles [S, D]). Under that null the
  two sets are exchangeable, so a cluster of the expert's own distribution is judged far (p <= alpha) at rate alpha
  whatever its size and the dimension; `algorithms/methods/shiftex_calibration_test.py` measures it."""
  kept = tf.cast(tf.range(int(memory_profiles.shape[0])) < memory_size, tf.float32)
  _, p_value = drift_statistics.mmd_permutation_test(profiles, tf.cast(members, tf.float32), memory_profiles, kept,
                                                     seed, config.permutations, config.unbiased_mmd)
  return p_value


def assign_clusters(state: ServerState, config: Config) -> dict:
  """Algorithm 2 lines 12-27 on the collected profiles of shifted parties: k-means (k by Davies-Bouldin), then per
  cluster reuse (memory within epsilon), spawn (a free slot gets Clone(theta_0)) or local fine-tuning (< gamma)."""
  mask = tf.range(config.census_capacity) < state.pending_count
  if config.oracle_assignment:
    clustering, cluster_domain = domain_clusters(state.pending_profiles, state.pending_domains, mask,
                                                 config.max_clusters, int(state.domain_slots.shape[0]))
  else:
    clustering = kmeans.cluster(state.pending_profiles, mask, config.max_clusters, max_index=config.split_index)
  expert_domain = state.expert_domain
  gamma_k = state.profile_gamma
  active, memory, mixing = state.active, state.memory, state.mixing
  id_slot, slot_id, next_id = state.id_slot, state.slot_id, state.next_id
  centroid_id = tf.fill([config.max_clusters], -1)
  memory_profiles, memory_sizes = state.memory_profiles, state.memory_sizes
  spawned = reused = forced = match_total = p_total = tf.constant(0.0)
  slots = tf.range(config.num_branches)
  choices = []  # Per cluster, its expert in Eq. 2's numbering: a slot, K + b for the b-th new expert, -1 local.
  new_expert = tf.fill([config.num_branches], -1)  # b of the slots spawned in this assignment.
  for j in range(config.max_clusters):
    size = tf.reduce_sum(tf.cast(tf.equal(clustering.labels, j), tf.int32))
    exists = (j < clustering.num_clusters) & (size > 0)
    trained = exists & (size >= config.min_cluster_size)
    c = clustering.centroids[j]
    distance = tf.where(active, point_mmd(c, memory, gamma_k), np.inf)
    best = tf.argmin(distance, output_type=tf.int32)
    free = ~active & (slots < config.bootstrap_slot)
    new_slot = tf.argmax(tf.cast(free, tf.int32), output_type=tf.int32)
    members = tf.equal(clustering.labels, j) & mask
    seed = tf.stack([state.round_num, j])
    if config.oracle_assignment:  # The expert serving the cluster's true domain, else a new one.
      serving = active & tf.equal(expert_domain, cluster_domain[j])
      best = tf.where(tf.reduce_any(serving), tf.argmax(tf.cast(serving, tf.int32), output_type=tf.int32), best)
      p_value = tf.constant(0.0)
      far = ~tf.reduce_any(serving)
    elif config.epsilon > 0:  # A fixed radius.
      p_value = tf.constant(0.0)
      far = distance[best] > config.epsilon
    else:
      p_value = reuse_test(state.pending_profiles, members, memory_profiles[best], memory_sizes[best], seed, config)
      far = p_value <= config.alpha
    spawn = trained & far & tf.reduce_any(free) & (next_id < MAX_EXPERT_IDS)
    reuse = trained & ~spawn
    forced += tf.cast(reuse & far, tf.float32)  # A full pool (or ids) leaves no spawn: reused, not on merit.
    p_total += tf.where(trained, p_value, 0.0)
    moved = (1.0 - config.memory_rate) * memory[best] + config.memory_rate * c
    memory = tf.where((tf.equal(slots, best) & reuse)[:, tf.newaxis], moved, memory)
    memory = tf.where((tf.equal(slots, new_slot) & spawn)[:, tf.newaxis], c, memory)
    target = tf.where(spawn, new_slot, best)
    rows, kept = mixed_sample(memory_profiles[target], tf.where(spawn, 0, memory_sizes[target]),
                              state.pending_profiles, members, tf.where(spawn, 1.0, config.memory_rate), seed + 5)
    edit = tf.equal(slots, target) & (spawn | reuse)
    memory_profiles = tf.where(edit[:, tf.newaxis, tf.newaxis], rows[tf.newaxis], memory_profiles)
    memory_sizes = tf.where(edit, kept, memory_sizes)
    active = active | (tf.equal(slots, new_slot) & spawn)
    # Clone(theta_0), or a copy of the nearest expert (its row: a slot spawned earlier in this assignment is itself
    # a copy whose weights the mixing sets).
    clone_row = (tf.one_hot(config.bootstrap_slot, config.num_branches) if config.clone_source == 'bootstrap'
                 else mixing[best])
    mixing = tf.where((tf.equal(slots, new_slot) & spawn)[:, tf.newaxis], clone_row, mixing)
    id_slot = tf.where(tf.equal(tf.range(MAX_EXPERT_IDS), next_id) & spawn, new_slot, id_slot)
    slot_id = tf.where(tf.equal(slots, new_slot) & spawn, next_id, slot_id)
    if config.oracle_assignment:
      expert_domain = tf.where(tf.equal(slots, new_slot) & spawn, cluster_domain[j], expert_domain)
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
  return dict(match_mmd=tf.math.divide_no_nan(match_total, spawned + reused),
              match_p_value=tf.math.divide_no_nan(p_total, spawned + reused),
              memory_profiles=memory_profiles, memory_sizes=memory_sizes,
              reused_forced=tf.cast(forced, tf.int32), active=active, memory=memory, mixing=mixing, id_slot=id_slot,
              slot_id=slot_id, next_id=next_id, centroids=clustering.centroids, centroid_id=centroid_id,
              num_centroids=clustering.num_clusters, spawned=tf.cast(spawned, tf.int32),
              reused=tf.cast(reused, tf.int32), expert_domain=expert_domain, **scores)


def domain_clusters(profiles: tf.Tensor, domains: tf.Tensor, mask: tf.Tensor, max_k: int,
                    num_modes: int) -> tuple[kmeans.Clustering, tf.Tensor]:
  """The oracle's clustering of the collected parties: one cluster per true domain among them (in the domains'
  order; a domain after the first max_k joins the last cluster), centroids their profiles' means; returns
  (clustering, the domain of each cluster [max_k], -1 unused)."""
  counts = tf.math.unsorted_segment_sum(tf.cast(mask, tf.float32), tf.clip_by_value(domains, 0, num_modes - 1),
                                        num_modes)
  present = counts > 0
  rank = tf.minimum(tf.cumsum(tf.cast(present, tf.int32)) - 1, max_k - 1)
  labels = tf.where(mask, tf.gather(rank, tf.clip_by_value(domains, 0, num_modes - 1)), -1)
  segment = tf.where(mask, labels, max_k)  # Masked rows go to an extra segment, dropped.
  sums = tf.math.unsorted_segment_sum(profiles, segment, max_k + 1)[:max_k]
  sizes = tf.math.unsorted_segment_sum(tf.ones(tf.shape(segment)), segment, max_k + 1)[:max_k]
  domain_of = tf.math.unsorted_segment_max(tf.range(num_modes), tf.where(present, rank, max_k), max_k + 1)[:max_k]
  num_clusters = tf.minimum(tf.reduce_sum(tf.cast(present, tf.int32)), max_k)
  domain_of = tf.where(tf.range(max_k) < num_clusters, domain_of, -1)
  return kmeans.Clustering(labels, tf.math.divide_no_nan(sums, sizes[:, tf.newaxis]), num_clusters), domain_of


# What a round of the server reports and resets (`server_update`).
ROUND_COUNTS = ('spawned', 'reused', 'reused_forced', 'match_mmd', 'match_p_value', 'objective',
                'optimal_objective', 'solved_exactly')
ASSIGNMENT_KEYS = ('match_mmd', 'active', 'memory', 'memory_profiles', 'memory_sizes', 'mixing', 'id_slot', 'slot_id',
                   'next_id', 'centroids', 'centroid_id', 'num_centroids', 'spawned', 'reused', 'reused_forced',
                   'match_p_value', 'objective', 'optimal_objective', 'solved_exactly', 'expert_domain')


def assignment_objectives(state: ServerState, choice: tf.Tensor, mask: tf.Tensor, config: Config) -> dict:
  """Eq. 2 (`algorithms.core.facility_location`) of the heuristic's assignment `choice` [P] of the collected
  parties (-1: a small cluster's party, counted on its nearest existing expert, since the server does not know the
  expert it keeps), and when at most EXACT_PARTIES parties shifted, the exact optimum by exhaustive search."""
  profiles, active, memory = state.pending_profiles, state.active, state.memory
  distance = tf.reduce_sum(tf.square(profiles[:, tf.newaxis] - memory[tf.newaxis]), -1)
  nearest = tf.argmin(tf.where(active[tf.newaxis], distance, np.inf), 1, output_type=tf.int32)
  choice = tf.where(choice < 0, nearest, choice)
  sizes = state.pending_sizes * tf.cast(mask, tf.float32)
  terms = dict(gamma_k=state.profile_gamma, new_expert_cost=config.new_expert_cost,
               imbalance_weight=config.imbalance_weight)
  heuristic = facility_location.objective(choice[tf.newaxis], profiles, state.pending_histograms, sizes, memory,
                                          active, **terms)[0]
  small = min(EXACT_PARTIES, config.census_capacity)
  candidates = facility_location.assignments(small, config.num_branches)
  optimal, _ = facility_location.optimum(candidates, profiles[:small], state.pending_histograms[:small],
                                         sizes[:small], memory, active, **terms)
  solved = tf.reduce_sum(tf.cast(mask, tf.int32)) <= small
  return dict(objective=heuristic, optimal_objective=tf.where(solved, optimal, 0.0),
              solved_exactly=solved)


def server_update(state: ServerState, reports: dict, sums: dict, config: Config) -> ServerState:
  """The server's round after the parties' reports: at W0's census expert 1's memory (every party's profile,
  embedded by theta_0), in a later census the collection of shifted profiles and the assignment
  (`assign_clusters`)."""
  round_num = state.round_num
  window = method.window_of(round_num, config.window_rounds)
  valid = reports['valid']
  census = tf.reduce_any(reports['census'])
  in_bootstrap = tf.equal(window, 0)
  labelling = in_bootstrap & census  # W0's census: every party's label histogram and profile.
  w0 = valid & reports['census'] & labelling
  # Expert 1's memory: W0's census profiles, their mean and the matching bandwidth (their median heuristic).
  census_profile = tf.math.divide_no_nan(tf.reduce_sum(tf.cast(w0, tf.float32)[:, tf.newaxis] * reports['profile'], 0),
                                         tf.reduce_sum(tf.cast(w0, tf.float32)))
  first_profiles, first_size = mixed_sample(state.memory_profiles[0], 0, reports['profile'], w0, 1.0,
                                            tf.stack([round_num, -1]))
  mixing = tf.eye(config.num_branches)
  if config.bootstrap_slot > 0:
    # theta_0 is expert 1 as W0's census round receives it (frozen at the end of the round before), so W0's
    # census profiles, expert 1's memory, are embedded by theta_0 as every later profile is.
    freeze = tf.equal(round_num, config.window_rounds - 1)
    mixing = tf.where((tf.equal(tf.range(config.num_branches), config.bootstrap_slot) & freeze)[:, tf.newaxis],
                      tf.one_hot(0, config.num_branches), mixing)
  collecting = (window >= 1) & census  # A later window's census: the shifted parties' reports.
  pending_count = tf.where(census, 0, state.pending_count)
  collected = valid & ((reports['shifted'] & collecting) | labelling)
  histograms, _ = _append(state.pending_histograms, pending_count, reports['histogram'], collected)
  sizes, _ = _append(state.pending_sizes, pending_count, reports['size'], collected)
  profiles, pending_count = _append(state.pending_profiles, pending_count, reports['profile'], collected)
  thresholds, expert_domain, domains = state.thresholds, state.expert_domain, state.pending_domains
  if config.detection == 'w0_threshold':  # delta_cov, delta_label: the nulls' (1 - alpha) quantiles over W0's census.
    nulls = w0 & (reports['size'] >= 4)
    thresholds = tf.where(labelling, tf.stack([upper_quantile(reports[key], nulls, config.alpha)
                                               for key in ('null_mmd', 'null_jsd')]), thresholds)
  if config.oracle_assignment:  # Expert 1 serves the domain most of W0's census parties hold.
    domains, _ = _append(domains, tf.where(census, 0, state.pending_count), reports['domain'], collected)
    w0_domain = tf.argmax(tf.math.unsorted_segment_sum(tf.cast(w0, tf.float32), reports['domain'],
                                                       int(state.domain_slots.shape[0])), output_type=tf.int32)
    expert_domain = tf.where(labelling & tf.equal(tf.range(config.num_branches), 0), w0_domain, expert_domain)
  state = state._replace(
      memory=tf.where(labelling & tf.equal(tf.range(config.num_branches), 0)[:, tf.newaxis], census_profile,
                      state.memory),
      memory_profiles=tf.where(labelling, tf.tensor_scatter_nd_update(state.memory_profiles, [[0]],
                                                                      first_profiles[tf.newaxis]),
                               state.memory_profiles),
      memory_sizes=tf.where(labelling, tf.tensor_scatter_nd_update(state.memory_sizes, [[0]], [first_size]),
                            state.memory_sizes),
      profile_gamma=tf.where(labelling, drift_statistics.median_heuristic_gamma(
          reports['profile'], tf.cast(w0, tf.float32)), state.profile_gamma),
      mixing=mixing, pending_histograms=histograms, pending_sizes=sizes, pending_profiles=profiles,
      pending_count=pending_count, thresholds=thresholds, expert_domain=expert_domain, pending_domains=domains,
      **{key: tf.zeros_like(getattr(state, key)) for key in ROUND_COUNTS})
  kept = {key: getattr(state, key) for key in ASSIGNMENT_KEYS}
  state = state._replace(**tf.cond(collecting, lambda: assign_clusters(state, config), lambda: kept))
  state = state._replace(
      assigned_window=tf.where(collecting, window, state.assigned_window),
      examples_seen=state.examples_seen + sums['slot_examples'],
      domain_slots=ASSIGNMENT_DECAY * state.domain_slots + sums['routing'],
      label_counts=ASSIGNMENT_DECAY * state.label_counts + sums['label_counts'])
  label_centroids, num_label_clusters = tf.cond(labelling, lambda: kmeans.cluster(
      state.pending_histograms, tf.range(config.census_capacity) < state.pending_count, config.max_clusters,
      max_index=config.split_index)[1:], lambda: (state.label_centroids, state.num_label_clusters))
  return state._replace(label_centroids=label_centroids, num_label_clusters=num_label_clusters)


def merge_experts(weights: tff.learning.models.ModelWeights, state: ServerState, trainable_index,
                  config: Config) -> tuple[ServerState, tf.Tensor]:
  """Algorithm 2 lines 36-40 in the last round of each window after W0: disjoint pairs of active experts whose
  flattened parameters have cosine similarity above tau, most similar first, become their average weighted by the
  examples each has trained on (their memories too: the kept profiles by `mixed_sample`); returns (state with the merges' ids, memories and mixing rows, merges)."""
  k_slots = config.num_branches
  flat = tf.stack([tf.concat([tf.reshape(weights.trainable[i], [-1]) for i in trainable_index[k]], 0)
                   for k in range(k_slots)])
  unit = tf.math.l2_normalize(flat, 1)
  similarity = tf.matmul(unit, unit, transpose_b=True)
  round_num = state.round_num
  window_end = (method.window_of(round_num, config.window_rounds) >= 1) & tf.equal(round_num % config.window_rounds, 0)
  candidates = state.active[:, None] & state.active[None] & (
      tf.range(k_slots)[:, None] < tf.range(k_slots)[None]) & window_end
  fresh = network_pool.changed_rows(state.mixing)  # Spawned this round: their weights are not set yet.
  candidates = candidates & ~(fresh[:, None] | fresh[None])
  merges = tf.constant(0)
  for _ in range(k_slots // 2):
    score = tf.where(candidates, similarity, -np.inf)
    flat_best = tf.argmax(tf.reshape(score, [-1]), output_type=tf.int32)
    i, j = flat_best // k_slots, flat_best % k_slots
    merge = tf.reshape(score, [-1])[flat_best] > config.merge_similarity
    n_i, n_j = state.examples_seen[i], state.examples_seen[j]
    share = tf.math.divide_no_nan(n_i, n_i + n_j)
    share = tf.where(n_i + n_j > 0, share, 0.5)
    row = share * tf.one_hot(i, k_slots) + (1.0 - share) * tf.one_hot(j, k_slots)
    is_i = tf.equal(tf.range(k_slots), i) & merge
    is_j = tf.equal(tf.range(k_slots), j) & merge
    kept_j = tf.range(MEMORY_PROFILES) < state.memory_sizes[j]
    rows, size = mixed_sample(state.memory_profiles[i], state.memory_sizes[i], state.memory_profiles[j], kept_j,
                              1.0 - share, tf.stack([round_num, i * k_slots + j]))
    state = state._replace(
        mixing=tf.where(is_i[:, None], row, state.mixing),
        memory=tf.where(is_i[:, None], share * state.memory[i] + (1 - share) * state.memory[j], state.memory),
        memory_profiles=tf.where(is_i[:, None, None], rows[tf.newaxis], state.memory_profiles),
        memory_sizes=tf.where(is_i, size, tf.where(is_j, 0, state.memory_sizes)),
        examples_seen=tf.where(is_i, n_i + n_j, tf.where(is_j, 0.0, state.examples_seen)),
        active=state.active & ~is_j, id_slot=tf.where(merge & tf.equal(state.id_slot, j), i, state.id_slot),
        slot_id=tf.where(is_j, -1, state.slot_id))
    involved = tf.equal(tf.range(k_slots), i) | tf.equal(tf.range(k_slots), j)
    candidates = candidates & ~(merge & (involved[:, None] | involved[None]))
    merges += tf.cast(merge, tf.int32)
  return state, merges


def pool_step(config: Config, trainable_index, non_trainable_index):
  """The server step after the finalizer (`network_pool.with_server_step`): consolidation, then the round's edits
  of the pool (W0's freeze of theta_0, spawns, merges) applied to the networks."""

  def step(learning_state):
    state, merges = merge_experts(learning_state.global_model_weights, learning_state.client_work, trainable_index,
                                  config)
    edited = network_pool.mixed_state(learning_state, trainable_index, non_trainable_index, state.mixing)
    return edited._replace(client_work=state._replace(mixing=tf.eye(config.num_branches))), collections.OrderedDict(
        merged=merges, num_experts=tf.reduce_sum(tf.cast(state.active, tf.int32)))

  return step


def build_client_work(model_fn, batch_fn: task_lib.BatchFn, client_optimizer, element_spec, input_shape: tuple,
                      feature_dim: int, num_classes: int, num_modes: int,
                      config: Config) -> tff.learning.templates.ClientWorkProcess:
  """ShiftEx's client work: detection at the parties, collection and assignment at the server."""
  weights_type = learning_process.model_weights_type(model_fn)
  data_type = client_state.client_data_type(element_spec, initial_client_state(input_shape, feature_dim, num_classes,
                                                                                  config))
  state_value = initial_server_state(feature_dim, num_modes, num_classes, config)
  state_type = learning_process.struct_type(state_value)

  @tff.tensorflow.computation(state_type)
  def next_round(state):
    """The state with the round counted, and what the parties receive: the round and the latest assignment."""
    state = state._replace(round_num=state.round_num + 1)
    return state, RoundView(*(getattr(state, field) for field in RoundView._fields))

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
    metrics = collections.OrderedDict(
        client_training.finalize_train_metrics(sums),
        **routing.train_routing_metrics(sums['routing'], best_matching=True),
        **{key: sums[key] for key in DETECTION_COUNTS},
        **{f'{key}_{mode}': sums[f'{key}_by_domain'][mode]
           for key in ('moved', 'found') for mode in range(num_modes)},
        spawned=new_state.spawned, reused=new_state.reused, reused_forced=new_state.reused_forced,
        match_mmd=new_state.match_mmd, match_p_value=new_state.match_p_value,
        assignment_objective=new_state.objective, optimal_objective=new_state.optimal_objective,
        solved_exactly=tf.cast(new_state.solved_exactly, tf.float32),
        label_clusters=tf.cast(new_state.num_label_clusters, tf.float32),
        threshold_covariate=new_state.thresholds[0], threshold_label=new_state.thresholds[1])
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


def evaluation_objective(config: Config, num_modes: int, oracle_test_domains: bool):
  """objective(outputs, batch, active [K], memory [K, D], domain_slots [modes, K]): a test batch (one party's test
  data, of one domain) scored by the active expert whose memory is nearest the batch's mean embedding, as a party's
  census matches it; with `oracle_test_domains`, a batch of a domain some party holds by the experts of that domain's
  parties, weighted by their counts (reads the true domain)."""

  def objective(outputs, batch, active, memory, domain_slots):
    features = outputs[multi_branch.FEATURES]  # [B, K, D]
    if config.encoder == 'bootstrap':
      profile = tf.reduce_mean(features[:, config.bootstrap_slot], 0)
    else:
      profile = tf.reduce_mean(features, 0)
    share = tf.one_hot(nearest_active(profile, memory, active), config.num_branches)
    if oracle_test_domains:
      share = routing.assigned_share(domain_slots, batch, share)
    return routing.shared_result(outputs, batch, share, num_modes)

  return objective


def build_algorithm(task: task_lib.Task, element_spec, hparams: method.Hyperparameters,
                    evaluator: evaluation.Evaluator, config: Config) -> method.Algorithm:
  model_fn, process, initial_state = build_process(task, element_spec, hparams, config)
  k_slots = config.num_branches
  num_modes = task.num_modes

  objective = evaluation_objective(config, num_modes, hparams.oracle_test_domains)
  evaluate = evaluation.routed_evaluation(
      evaluator.with_model(model_fn()), objective,
      lambda state: (state.active, state.memory, state.domain_slots), [num_modes, k_slots],
      best_matching=True)
  return method.Algorithm(process, evaluate,
                          initial_client_state=initial_state, census=True,
                          model_fn=model_fn)
