"""Checks CFL's split step (Sattler et al., 2020) against scikit-learn's complete linkage and hand-made updates, and
its TFF round end to end."""

import collections

import numpy as np
from sklearn import cluster
import tensorflow as tf
import tensorflow_federated as tff

from algorithms.core import client_state
from algorithms.core import learning_process
from algorithms.core import per_tensor_mean
from algorithms.methods import cfl
from models import multi_branch
from tasks import task as task_lib
from utils import execution_context

_SERVER_STEP = learning_process.ServerStep.named('adam', 0.1, 1e-3)


class BipartitionTest(tf.test.TestCase):

  def test_complete_linkage_matches_scikit_learn(self):
    rng = np.random.default_rng(0)
    for trial in range(20):
      m = int(rng.integers(3, 12))
      updates = rng.normal(size=(m, 6)) + (rng.integers(0, 2, size=(m, 1)) * 2 - 1) * rng.uniform(0, 2)
      unit = updates / np.linalg.norm(updates, axis=1, keepdims=True)
      similarity = (unit @ unit.T).astype(np.float32)
      members = np.ones(m, bool)
      second = cfl.complete_linkage_bipartition(similarity, members).numpy()
      labels = cluster.AgglomerativeClustering(n_clusters=2, metric='precomputed', linkage='complete').fit(
          1.0 - similarity).labels_
      reference = labels != labels[0]  # The group without member 0 is the second one.
      self.assertAllEqual(second, reference, f'trial {trial}')

  def test_non_members_are_never_split_off(self):
    similarity = np.array([[1, .9, -.9, .2], [.9, 1, -.8, .1], [-.9, -.8, 1, .3], [.2, .1, .3, 1]], np.float32)
    second = cfl.complete_linkage_bipartition(similarity, np.array([True, True, True, False])).numpy()
    self.assertAllEqual(second, [False, False, True, False])
    self.assertFalse(np.any(cfl.complete_linkage_bipartition(similarity, np.array([True, False, False, False]))))


class SplitTest(tf.test.TestCase):

  def _reports(self, updates, clusters):
    m = len(updates)
    return {'position': np.arange(m, dtype=np.int32), 'cluster': np.array(clusters, np.float32),
            'weight': np.ones(m, np.float32), 'update': np.array(updates, np.float32)}

  def test_splits_a_stationary_cluster_with_divergent_clients(self):
    # Two groups pulling in opposite directions: the mean is ~0 (< eps_1), each update has norm 2 (> eps_2).
    updates = [[2, 0], [1.9, 0.3], [-2, 0], [-1.9, -0.3]]
    state = {'owner': np.zeros(4, np.int32), 'num_clusters': np.int32(1), 'round_num': np.int64(30)}
    config = cfl.Config(eps1=0.4, eps2=1.6, warmup_rounds=20)
    new_state, clusters, metrics = cfl.split_clusters(state, self._reports(updates, [0, 0, 0, 0]), config, 4)
    self.assertAllEqual(clusters, [0, 0, 1, 1])
    self.assertAllEqual(new_state['owner'], [0, 0, 1, 1])  # The new cluster takes half of the parent's networks.
    self.assertEqual(int(new_state['num_clusters']), 2)
    self.assertEqual(float(metrics['splits']), 1.0)
    self.assertAllClose(metrics['max_update_norm'], 2.0)

  def test_no_split_before_warmup_when_converging_or_when_clients_agree(self):
    state = {'owner': np.zeros(4, np.int32), 'num_clusters': np.int32(1), 'round_num': np.int64(30)}
    config = cfl.Config(eps1=0.4, eps2=1.6, warmup_rounds=20)
    divergent = self._reports([[2, 0], [1.9, 0.3], [-2, 0], [-1.9, -0.3]], [0, 0, 0, 0])
    early = dict(state, round_num=np.int64(5))
    for reports, start in ((divergent, early), (self._reports([[2, 0], [1.9, 0.3], [2, 0.1]], [0, 0, 0]), state),
                           (self._reports([[.5, 0], [-.5, 0], [.4, .1]], [0, 0, 0]), state)):
      new_state, clusters, metrics = cfl.split_clusters(start, reports, config, 4)
      self.assertEqual(int(new_state['num_clusters']), 1)
      self.assertAllEqual(clusters, np.zeros(len(clusters)))
      self.assertEqual(float(metrics['splits']), 0.0)


def _network():
  extractor = tf.keras.Sequential([tf.keras.Input(shape=(3,)), tf.keras.layers.Dense(4, activation='tanh')])
  return multi_branch.build_multi_branch_model(extractor, 1, branch_units=3)


class ProcessTest(tf.test.TestCase):

  def test_a_cluster_trains_its_networks_alike_and_the_others_not_at_all(self):
    rng = np.random.default_rng(0)
    raw = tf.data.Dataset.from_tensor_slices(collections.OrderedDict(
        x=rng.normal(size=(8, 3)).astype(np.float32), y=rng.integers(0, 3, 8).astype(np.int32)))
    dataset = task_lib.preprocess_client(raw, 0, tff.simulation.baselines.ClientSpec(1, 4), shuffle_seed=(0, 0))
    model_fn = lambda: multi_branch.build_multi_network_model(_network, 3)
    client_work = cfl.build_client_work(model_fn, lambda batch: batch, tff.learning.optimizers.build_sgdm(0.5),
                                        dataset.element_spec, 3, 1, cfl.Config())
    process = learning_process.compose(model_fn, client_work, _SERVER_STEP,
                                       per_tensor_mean.PerTensorWeightedMeanFactory())
    state = process.initialize()
    # Networks 0 and 1 belong to cluster 0, network 2 to cluster 1; the client is stored in cluster 0.
    state = state._replace(client_work=collections.OrderedDict(
        owner=np.array([0, 0, 1], np.int32), num_clusters=np.int32(2), round_num=np.int64(0)))
    same = learning_process.initial_weights(_network, 1).trainable
    initial = tff.learning.models.ModelWeights(trainable=list(same) * 3, non_trainable=[])
    state = process.set_model_weights(state, initial)
    data = collections.OrderedDict(dataset=dataset, client_state=tf.data.Dataset.from_tensors(
        client_state.element({'cluster': 0.0}, 0)))
    output = process.next(state, [data])
    after = process.get_model_weights(output.state).trainable
    per_network = len(same)
    networks = [after[n * per_network:(n + 1) * per_network] for n in range(3)]
    for a, b in zip(networks[0], networks[1]):
      self.assertAllClose(a, b)  # Copies stay copies.
    self.assertNotAllClose(networks[0][0], same[0])
    for a, b in zip(networks[2], same):
      self.assertAllClose(a, b)  # Another cluster's network is untouched.
    self.assertAllEqual(output.metrics['client_work']['client_states']['cluster'], [0.0])


if __name__ == '__main__':
  execution_context.install()
  tf.test.main()
