"""CFL: clustered federated learning (Sattler, Mueller and Samek, 2020, IEEE TNNLS), a baseline of the pFedEM paper.

Clients are partitioned into clusters, each with its own model. Every cluster starts as one (all clients). In
round t, the participating clients of cluster c train its model and the server averages their updates
(FedAvg within the cluster). After a warm-up, a cluster is split in two when it is near a stationary point of its
federated objective while some of its clients are not (the paper's criteria, Eq. 27-28 of its Algorithm):

  || sum_i (n_i / n_c) dtheta_i || < eps_1   and   max_i || dtheta_i || > eps_2,

over the cluster's participants of the round (at least 3, as the authors' code requires). The split is the
bipartition of those participants that minimizes the largest cosine similarity across the two halves,
  alpha_ij = <dtheta_i, dtheta_j> / (||dtheta_i|| ||dtheta_j||),
computed as complete-linkage agglomerative clustering of the distances -alpha_ij down to two groups (the authors'
code: scikit-learn's `AgglomerativeClustering(linkage='complete')` on -alpha); the second half becomes a new
cluster whose model is a copy of the parent's. The criteria need each participant's update at the server, so CFL,
unlike FedTEM and FedTKM, sends per-client updates there (the paper's own protocol).

How the suite realizes it (documented choices):
- Cluster models are the K networks of a `models.multi_branch.build_multi_network_model` (K = `--num_branches`,
  the most clusters CFL can reach). All K start from the same initial weights, and every network a cluster owns
  receives that cluster's averaged update, so the networks of one cluster stay identical copies; a split hands
  half of the parent's networks to the new cluster, which thereby starts from a copy of the parent's model. A
  cluster owning one network cannot split further. Updates are averaged per tensor with the clients' example
  counts on their cluster's networks (`algorithms.core.per_tensor_mean`) and applied by the server step (by
  default parameter averaging, the paper's: `DEFAULTS`).
- Partial participation (the paper has every client in every round): the criteria and the bipartition use the
  cluster's participants of the round; members of a split cluster that did not take part stay in the first half.
- Cluster membership is client state (`algorithms.core.client_state`, checkpointed): a client keeps its cluster across
  rounds; a client seen for the first time joins the cluster whose model has the lowest loss on its data (the
  paper's rule for clients joining after training).
- Test data (no client identity, no labels): each test batch uses the cluster model whose predictions on it are
  the most certain (largest mean KL to uniform, `algorithms.core.certainty`, the rule of the unlabeled baselines of
  "Diurnal or Nocturnal?", Zhu et al., 2022). With `--oracle_test_labels`, the cluster model with the lowest loss on
  the batch's labels (the rule for joining clients, applied to test data: an oracle, marked in reports).
- eps_1 = 0.4, eps_2 = 1.6 and 20 warm-up rounds are the authors' code's values for their models and learning
  rates; the norms depend on both, so `mean_update_norm` and `max_update_norm` are reported every round to set
  them (`--cfl_eps1`, `--cfl_eps2`, `--cfl_warmup_rounds`).

Metrics: `num_clusters`, `splits` (in the round), `mean_update_norm` (the largest over clusters of the averaged
update's norm) and `max_update_norm`, and `train_routing_accuracy` / `train_routing_ari` of clients' clusters
against their true (majority) domain.
"""

import collections
import dataclasses

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from algorithms.core import certainty
from algorithms.core import client_state
from algorithms.core import client_training
from algorithms.core import evaluation
from algorithms.core import learning_process
from algorithms.core import linkage
from algorithms.core import method
from algorithms.core import objectives
from algorithms.core import per_tensor_mean
from algorithms.core import routing
from models import multi_branch
from tasks import task as task_lib

NAME = 'cfl'
# Its networks start from one draw of the run's seed (`identical_networks_fn`).
SEEDED_BUILD = True
SENDS = method.Sends(simulation_only=('routing',), client_state=('cluster', 'weight', 'update'),
                     own_aggregation=True)
DEFAULTS = method.Defaults(
    method.PARAMETER_AVERAGING,
    source=('Sattler, Mueller and Samek, "Clustered Federated Learning", 2020, Algorithm 1 (each cluster\'s model '
            "moves by the example-weighted mean of its clients' updates)"),
    scenario='mixture_drift')
UNASSIGNED = -1.0


@dataclasses.dataclass(frozen=True)
class Config:
  eps1: float = method.setting(0.4, 'CFL: a cluster splits only when the norm of its averaged update is below this.')
  eps2: float = method.setting(1.6, 'CFL: ... and some participant\'s update norm is above this.')
  warmup_rounds: int = method.setting(20, 'CFL: rounds before any split.')

  def validate(self) -> None:
    if self.eps1 < 0 or self.eps2 < 0:
      raise ValueError(f'--cfl_eps1 and --cfl_eps2 must be >= 0; got {self.eps1:g}, {self.eps2:g}.')
    if self.warmup_rounds < 0:
      raise ValueError(f'--cfl_warmup_rounds must be >= 0; got {self.warmup_rounds}.')


# Where each setting's default comes from (`algorithms.registry` checks one per setting; docs/running.md
# shows them).
SETTING_SOURCES = {
    'eps1': ("suite choice: the CFL authors' code's value (Sattler, Mueller and Samek, 2020, state none); the norms "
             'depend on the model and rates, so mean_update_norm and max_update_norm are reported every round'),
    'eps2': "suite choice: the CFL authors' code's value (the paper states none); see eps1",
    'warmup_rounds': "suite choice: the CFL authors' code's warm-up (the paper states none)",
}


def complete_linkage_bipartition(similarity: tf.Tensor, members: tf.Tensor) -> tf.Tensor:
  """Two groups of the `members` (bool [m]) by complete-linkage agglomeration of distances -similarity [m, m]
  (`algorithms.core.linkage`).

  Returns bool [m]: True for the members of the second group (the one not holding the lowest-index member); False
  for non-members. Fewer than 2 members: all False.
  """
  label = linkage.complete_linkage(-tf.cast(similarity, tf.float32), members, min_groups=2)
  first = tf.reduce_min(tf.where(members, label, tf.shape(label)[0]))
  return members & tf.not_equal(label, first)


def _representatives(owner: tf.Tensor, num_networks: int) -> tf.Tensor:
  """rep [K]: for cluster c, the lowest-index network it owns (K when it owns none)."""
  networks = tf.range(num_networks)
  owns = tf.equal(owner[tf.newaxis, :], networks[:, tf.newaxis])  # [cluster, network]
  return tf.reduce_min(tf.where(owns, networks[tf.newaxis, :], num_networks), axis=1)


def _lowest_cost_cluster(costs: tf.Tensor, owner: tf.Tensor, num_clusters: tf.Tensor,
                         num_networks: int) -> tuple[tf.Tensor, tf.Tensor]:
  """(cluster, its representative network) whose representative has the lowest of the networks' `costs` [K]."""
  representatives = _representatives(owner, num_networks)
  cluster_costs = tf.where(tf.range(num_networks) < num_clusters,
                           tf.gather(costs, tf.minimum(representatives, num_networks - 1)), np.inf)
  cluster = tf.argmin(cluster_costs, output_type=tf.int32)
  return cluster, tf.gather(representatives, cluster)


def lowest_loss_cluster(logits: tf.Tensor, batch: dict, owner: tf.Tensor, num_clusters: tf.Tensor,
                        num_networks: int) -> tuple[tf.Tensor, tf.Tensor]:
  """(cluster, its representative network) whose model has the lowest mean loss on `batch` (logits [B, K, ...]);
  reads the labels."""
  losses = tf.reduce_mean(objectives.per_branch_losses(logits, batch), axis=0)  # [K]: each network's loss.
  return _lowest_cost_cluster(losses, owner, num_clusters, num_networks)


def most_certain_cluster(outputs: dict, batch: dict, owner: tf.Tensor, num_clusters: tf.Tensor,
                         num_networks: int) -> tuple[tf.Tensor, tf.Tensor]:
  """(cluster, its representative network) whose model's predictions on `batch` have the largest mean KL to
  uniform (`certainty.branch_certainty`); reads no label."""
  certainty_of_networks = tf.reduce_mean(certainty.branch_certainty(outputs, batch), axis=0)  # [K]
  return _lowest_cost_cluster(-certainty_of_networks, owner, num_clusters, num_networks)


def _tensor_index(model: tf.keras.Model, num_networks: int) -> list[list[int]]:
  """index[n][j]: the position in `ModelWeights.trainable` of network n's j-th trainable tensor."""
  position = {variable.ref(): i
              for i, variable in enumerate(tff.learning.models.ModelWeights.from_model(model).trainable)}
  return [[position[v.ref()] for v in model.get_layer(f'network_{n + 1}').trainable_variables]
          for n in range(num_networks)]


def build_client_round(model: tf.keras.Model, optimizer, batch_fn: task_lib.BatchFn, num_networks: int,
                       num_modes: int):
  """The client's round as a `tf.function` (weights, server state, dataset, stored cluster) -> (ClientResult with
  per-tensor weights, the report {position, cluster, weight, update} for the split, metric sums)."""
  index = _tensor_index(model, num_networks)

  @tf.function(autograph=False)
  def run(weights, state, dataset, stored):
    examples, batches, _ = routing.client_examples(task_lib.model_batches(dataset, batch_fn))
    client_training.assign_weights(model, weights)
    nearest, _ = lowest_loss_cluster(model(examples['x'], training=False)[multi_branch.LOGITS], examples,
                                     state['owner'], state['num_clusters'], num_networks)
    cluster = tf.where(stored['cluster'] >= 0, tf.cast(stored['cluster'], tf.int32), nearest)
    representative = tf.gather(_representatives(state['owner'], num_networks), cluster)

    def objective(outputs, batch):
      return objectives.classification_result(tf.gather(outputs[multi_branch.LOGITS], representative, axis=1), batch)

    training = client_training.local_training(model, optimizer, weights, batches, objective)
    trained = [tf.gather(tf.stack([training.update[index[n][j]] for n in range(num_networks)]), representative)
               for j in range(len(index[0]))]  # The representative network's update, tensor by tensor.
    mine = tf.equal(state['owner'], cluster)  # [K]: the networks of the client's cluster.
    size = training.num_examples * tf.cast(training.finite, tf.float32)
    update, weight = list(training.update), list(training.update)
    for n in range(num_networks):
      for j, i in enumerate(index[n]):
        update[i] = tf.where(mine[n], trained[j], tf.zeros_like(trained[j]))
        weight[i] = size * tf.cast(mine[n], tf.float32)
    report = collections.OrderedDict(
        position=stored[client_state.POSITION], cluster=tf.cast(cluster, tf.float32), weight=size,
        update=tf.concat([tf.reshape(u, [-1]) for u in trained], 0))
    sums = routing.training_sums(training, routing.client_mode(examples), cluster, num_modes, num_networks)
    return tff.learning.templates.ClientResult(update, weight), report, sums

  return run


def split_clusters(state: dict, reports: dict, config: Config, num_networks: int):
  """The server's split step over the round's reports {position [m], cluster [m], weight [m], update [m, P]}:
  (new state, clusters [m] after the splits, metrics)."""
  clusters = tf.cast(reports['cluster'], tf.int32)
  weights = reports['weight']
  updates = reports['update']
  norms = tf.norm(updates, axis=1)
  unit = updates / tf.maximum(norms, 1e-12)[:, tf.newaxis]
  similarity = tf.matmul(unit, unit, transpose_b=True)
  owner, num_clusters = state['owner'], state['num_clusters']
  splits = tf.constant(0, tf.int32)
  largest_mean_norm = tf.constant(0.0)
  for c in range(num_networks):
    members = tf.logical_and(tf.equal(clusters, c), weights > 0)
    member_weights = tf.where(members, weights, 0.0)
    mean = tf.reduce_sum(member_weights[:, tf.newaxis] * updates, 0) / tf.maximum(tf.reduce_sum(member_weights),
                                                                                 1e-12)
    mean_norm = tf.where(tf.reduce_any(members), tf.norm(mean), 0.0)
    largest_mean_norm = tf.maximum(largest_mean_norm, mean_norm)
    max_norm = tf.reduce_max(tf.where(members, norms, 0.0))
    owned = tf.equal(owner, c)
    eligible = tf.reduce_all(tf.stack([
        state['round_num'] > config.warmup_rounds, tf.reduce_sum(tf.cast(members, tf.int32)) >= 3,
        mean_norm < config.eps1, max_norm > config.eps2, tf.reduce_sum(tf.cast(owned, tf.int32)) >= 2]))
    second = complete_linkage_bipartition(similarity, members)
    rank = tf.cumsum(tf.cast(owned, tf.int32)) - 1
    half = (tf.reduce_sum(tf.cast(owned, tf.int32)) + 1) // 2
    owner = tf.where(tf.logical_and(eligible, tf.logical_and(owned, rank >= half)), num_clusters, owner)
    clusters = tf.where(tf.logical_and(eligible, second), num_clusters, clusters)
    num_clusters += tf.cast(eligible, tf.int32)
    splits += tf.cast(eligible, tf.int32)
  new_state = collections.OrderedDict(owner=owner, num_clusters=num_clusters, round_num=state['round_num'])
  metrics = collections.OrderedDict(num_clusters=tf.cast(num_clusters, tf.float32),
                                    splits=tf.cast(splits, tf.float32), mean_update_norm=largest_mean_norm,
                                    max_update_norm=tf.reduce_max(tf.concat([norms, [0.0]], 0)))
  return new_state, clusters, metrics


def initial_client_state() -> dict:
  """A client's state before its first round: no cluster yet."""
  return {'cluster': np.float32(UNASSIGNED)}


def build_client_work(model_fn, batch_fn: task_lib.BatchFn, client_optimizer: tff.learning.optimizers.Optimizer,
                      element_spec, num_networks: int, num_modes: int,
                      config: Config) -> tff.learning.templates.ClientWorkProcess:
  """CFL's client work; its server state is the owner cluster of each network, the number of clusters and the
  round number."""
  weights_type = learning_process.model_weights_type(model_fn)
  data_type = client_state.client_data_type(element_spec, initial_client_state())
  state_value = collections.OrderedDict(owner=np.zeros([num_networks], np.int32), num_clusters=np.int32(1),
                                        round_num=np.int64(0))
  state_type = tff.types.tensorflow_to_type(tf.nest.map_structure(
      lambda a: tf.TensorSpec(np.shape(a), tf.as_dtype(np.asarray(a).dtype)), state_value))

  @tff.tensorflow.computation(weights_type, state_type, data_type)
  def client_round(weights, state, data):
    model = learning_process.client_model(model_fn)
    run = build_client_round(model, client_optimizer, batch_fn, num_networks, num_modes)
    return run(weights, state, data['dataset'], client_state.read(data['client_state']))

  report_type, sums_type = client_round.type_signature.result[1:]
  stacked_type = client_state.gathered_type(report_type)

  @tff.tensorflow.computation(state_type)
  def next_round(state):
    state = collections.OrderedDict(state, round_num=state['round_num'] + 1)
    return state, state

  @tff.tensorflow.computation(state_type, stacked_type, sums_type)
  def server_update(state, reports, sums):
    new_state, clusters, split_metrics = split_clusters(state, reports, config, num_networks)
    metrics = collections.OrderedDict(
        client_training.finalize_train_metrics(sums), **split_metrics,
        **routing.train_routing_metrics(sums['routing'], best_matching=True),
        **{client_state.CLIENT_STATES: collections.OrderedDict(
            position=reports['position'], cluster=tf.cast(clusters, tf.float32))})
    return new_state, metrics

  return client_state.gathered_reports_work(state_value, next_round, client_round, server_update)


def build_algorithm(task: task_lib.Task, element_spec, hparams: method.Hyperparameters,
                    evaluator: evaluation.Evaluator, config: Config) -> method.Algorithm:
  config.validate()
  num_networks = hparams.num_branches

  model_fn = learning_process.identical_networks_fn(lambda: task.model_fn(1), num_networks, hparams.seed)

  client_work = build_client_work(model_fn, task.batch_fn,
                                  tff.learning.optimizers.build_sgdm(hparams.client_learning_rate), element_spec,
                                  num_networks, task.num_modes, config)
  process = learning_process.compose(model_fn, client_work, hparams.server_step,
                                     per_tensor_mean.PerTensorWeightedMeanFactory())
  num_modes = task.num_modes

  def objective(outputs, batch, owner, num_clusters):
    """The cluster model whose predictions on the batch are the most certain (with `oracle_test_labels`: the one
    with the lowest loss on the batch's labels)."""
    if hparams.oracle_test_labels:
      cluster, representative = lowest_loss_cluster(outputs[multi_branch.LOGITS], batch, owner, num_clusters,
                                                    num_networks)
    else:
      cluster, representative = most_certain_cluster(outputs, batch, owner, num_clusters, num_networks)
    branches = routing.batch_branches(batch, cluster)
    logits = tf.gather(outputs[multi_branch.LOGITS], representative, axis=1)
    confusion = tf.matmul(tf.one_hot(batch['mode'], num_modes), tf.one_hot(branches, num_networks),
                          transpose_a=True)
    return objectives.classification_result(logits, batch)._replace(routing=confusion)

  evaluate = evaluation.routed_evaluation(
      evaluator.with_model(model_fn()), objective, lambda state: (state['owner'], state['num_clusters']),
      [num_modes, num_networks], best_matching=True)
  return method.Algorithm(process, evaluate, initial_client_state=initial_client_state(),
                          model_fn=model_fn)
