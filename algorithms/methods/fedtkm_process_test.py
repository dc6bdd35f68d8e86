"""Checks FedTKM's TFF rounds against numpy (Eq. 11-13, 27), and that it places no per-client value at the server."""

import collections

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from algorithms.core import aggregation_only
from algorithms.core import learning_process
from algorithms.methods import fedtem
from algorithms.methods import fedtkm
from models import multi_branch
from tasks import task as task_lib
from utils import execution_context

_SERVER_STEP = learning_process.ServerStep.named('adam', 0.1, 1e-3)


def _model_fn():
  extractor = tf.keras.Sequential([tf.keras.Input(shape=(3,)), tf.keras.layers.Dense(4, activation='tanh')])
  return multi_branch.build_multi_branch_model(extractor, 2, branch_units=3)


def _client(seed, mode, size):
  rng = np.random.default_rng(seed)
  x = (rng.normal(size=(size, 3)) + (2.0 if mode == 0 else -2.0)).astype(np.float32)
  raw = tf.data.Dataset.from_tensor_slices(collections.OrderedDict(x=x, y=rng.integers(0, 3, size).astype(np.int32)))
  return x, task_lib.preprocess_client(raw, mode, tff.simulation.baselines.ClientSpec(1, 4), shuffle_seed=(0, seed))


def _numpy_round(features, centers, scales, prior, eta_max):
  """Eq. 11 cluster per client, Eq. 12 q-bar and centers, Eq. 27 step, Eq. 13 alpha_2."""
  clusters = []
  for f in features:
    d = np.stack([scales[k] * np.linalg.norm(f - centers[k], axis=1) for k in range(2)], axis=1).mean(0)
    clusters.append(int(np.argmin(d)))
  clusters = np.array(clusters)
  q_bar = np.mean(clusters == 0)
  new_centers = centers.copy()
  for k in range(2):
    members = [f for f, c in zip(features, clusters) if c == k]
    if members:
      new_centers[k] = np.concatenate(members).mean(0)  # sum |D_i| f-bar_i / sum |D_i| = the pooled mean.
  eta = 2 * abs(0.5 - prior) * eta_max
  return clusters, q_bar, new_centers, np.array([1.0, scales[1] * np.exp(eta * (prior - q_bar))])


class FedTkmProcessTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    self.clients = [_client(seed, mode, size) for seed, mode, size in ((0, 0, 9), (1, 1, 6), (2, 0, 7), (3, 1, 11))]
    self.element_spec = self.clients[0][1].element_spec

  def test_two_rounds_match_numpy(self):
    config = fedtkm.Config(prior='linear', period=8, eta_max=0.8, center_decay=0.0, seed=5)
    # Client learning rate 0: the features after training are those of the broadcast model.
    process = fedtkm.build_process(_model_fn, lambda batch: batch, self.element_spec, 0.0, _SERVER_STEP,
                                   num_branches=2, num_modes=2, config=config)
    initial = learning_process.initial_weights(_model_fn, seed=3)
    state = process.set_model_weights(process.initialize(), initial)
    model = _model_fn()
    model.set_weights(list(initial.trainable))
    features = [model(x)['features'].numpy() for x, _ in self.clients]
    clustering = fedtkm.initial_clustering(2, 4, seed=5)
    centers, scales = clustering['centers'], clustering['scales']
    for round_num, prior in ((1, 0.75), (2, 0.5)):  # q~(t) = |2 t / 8 - 1|.
      output = process.next(state, [d for _, d in self.clients])
      state = output.state
      # The traces: log of the unscaled mean distances' ratio d_i1 / d_i2 per client, averaged per mode.
      mean_distance = lambda f, k: np.linalg.norm(f - centers[k], axis=1).mean()
      log_ratios = [np.log(mean_distance(f, 0) / mean_distance(f, 1)) for f in features]
      clusters, q_bar, centers, scales = _numpy_round(features, centers, scales, prior, eta_max=0.8)
      after = state.client_work['clustering']
      self.assertAllClose(after['centers'], centers, atol=1e-5, msg=f'round {round_num}')
      self.assertAllClose(after['scales'], scales, atol=1e-5, msg=f'round {round_num}')
      metrics = output.metrics['client_work']
      self.assertAllClose(metrics['q_bar'], q_bar)
      self.assertAllClose(metrics['alpha_2'], scales[1], atol=1e-5)
      self.assertAllClose(metrics['prior'], prior)
      self.assertAllClose(metrics['assignment_accuracy'], np.mean(clusters == [0, 1, 0, 1]))
      self.assertAllClose(metrics['log_distance_ratio_0'], np.mean(log_ratios[0::2]), atol=1e-5)  # Modes 0, 1, 0, 1.
      self.assertAllClose(metrics['log_distance_ratio_1'], np.mean(log_ratios[1::2]), atol=1e-5)
      self.assertAllClose(metrics['center_distance'], np.linalg.norm(centers[0] - centers[1]), atol=1e-5)
    self.assertNotAllClose(scales, [1.0, 1.0])  # Round 1 moved alpha_2 (eta_1 = 0.4), round 2 did not (eta_2 = 0).

  def test_prior_anchored_rounds_are_the_papers_up_to_the_swap_its_evidence_calls_for(self):
    initial = learning_process.initial_weights(_model_fn, seed=3)
    runs = {}
    for orientation in ('paper', 'prior_anchored'):
      config = fedtkm.Config(prior='linear', period=4, eta_max=0.8, center_decay=0.0, seed=5,
                             orientation=orientation)
      process = fedtkm.build_process(_model_fn, lambda batch: batch, self.element_spec, 0.0, _SERVER_STEP,
                                     num_branches=2, num_modes=2, config=config)
      state, outputs = process.set_model_weights(process.initialize(), initial), []
      # Clients of modes 0, 1, 0, 1 in round 1, mode 1 in round 2, all in round 3, mode 0 in round 4.
      for clients in (self.clients, self.clients[1::2], self.clients, self.clients[0::2]):
        output = process.next(state, [d for _, d in clients])
        state = output.state
        outputs.append((output.metrics['client_work'], state.client_work['clustering']))
      runs[orientation] = outputs
    evidence = 0.0
    for round_num, ((paper, paper_clustering), (anchored, clustering)) in enumerate(
        zip(runs['paper'], runs['prior_anchored']), start=1):
      self.assertAllClose(anchored['q_bar'], paper['q_bar'], msg=f'round {round_num}')
      evidence += (2 * abs(2 * round_num / 4 - 1) - 1) * (2 * paper['q_bar'] - 1)  # q~(t) = |2 t / 4 - 1|.
      swapped = round_num == 4 and evidence < 0
      self.assertEqual(anchored['clusters_swapped'], float(swapped), msg=f'round {round_num}')
      order = [1, 0] if swapped else [0, 1]
      self.assertAllClose(clustering['centers'], paper_clustering['centers'][order], atol=1e-6)
      alpha_2 = paper_clustering['scales'][1]
      self.assertAllClose(clustering['scales'], [1.0, 1.0 / alpha_2 if swapped else alpha_2], atol=1e-6)
      self.assertAllEqual(clustering['branches'], order)
    # Mode 0 sits in cluster 2 with this seed: round 2 (q~ = 0) has q-bar 1 and round 4 (q~ = 1) q-bar 0, against
    # the prior, and the period ends in a swap (with the two rounds' modes exchanged the evidence is +2: no swap).
    self.assertLess(evidence, 0.0)

  def test_no_per_client_value_reaches_the_server(self):
    for orientation in fedtkm.ORIENTATIONS:
      process = fedtkm.build_process(_model_fn, lambda batch: batch, self.element_spec, 0.1, _SERVER_STEP,
                                     num_branches=2, num_modes=2, config=fedtkm.Config(orientation=orientation))
      moved = aggregation_only.clients_to_server_intrinsics(process.next)
      self.assertIn('federated_sum', moved)
      self.assertContainsSubset(moved, ['federated_sum', 'federated_mean', 'federated_weighted_mean'])
      self.assertEmpty(aggregation_only.per_client_leaks(process.next), orientation)
    # The check can fail: FedTEM collects one score per client at the server.
    fedtem_process = fedtem.build_process(_model_fn, lambda batch: batch, self.element_spec, 0.1, _SERVER_STEP,
                                          num_branches=2, num_modes=2, config=fedtem.Config())
    leaks = aggregation_only.per_client_leaks(fedtem_process.next)
    self.assertTrue(any('federated_aggregate' in leak for leak in leaks), leaks)


if __name__ == '__main__':
  execution_context.install()
  tf.test.main()
