"""Checks ShiftEx's server steps (Bhope et al., 2025, Algorithm 2) on constructed profiles and weights, the pool
edits of `algorithms.core.network_pool` against numpy, and a short run on the windowed scenario that must detect
shifts at about the calibrated false-alarm level and spawn an expert."""

import collections
import json
import os

from absl.testing import absltest
import numpy as np
import scipy.stats
import tensorflow as tf
import tensorflow_federated as tff

from algorithms.core import facility_location
from algorithms.core import network_pool
from algorithms.methods import shiftex
from models import multi_branch
from tests import in_process_run


def _networks(count: int) -> tf.keras.Model:
  def network():
    inputs = tf.keras.Input([3])
    hidden = tf.keras.layers.Dense(4)(inputs)
    return multi_branch.build_multi_branch_model(tf.keras.Model(inputs, hidden), 1, 2)
  return multi_branch.build_multi_network_model(network, count, stack_features=True)


def _state(config, **values):
  return tf.nest.map_structure(tf.constant, shiftex.initial_server_state(2, 3, 4, config)._replace(**values))


class NetworkPoolTest(tf.test.TestCase):

  def test_mixing_copies_and_averages_networks_and_resets_their_moments(self):
    model = _networks(3)
    trainable_index, non_trainable_index = network_pool.network_index(model, 3)
    rng = np.random.default_rng(0)
    weights = tff.learning.models.ModelWeights(
        trainable=[tf.constant(rng.normal(size=v.shape), tf.float32) for v in model.trainable_variables],
        non_trainable=[])
    moments = [tf.constant(rng.normal(size=v.shape), tf.float32) for v in model.trainable_variables]
    finalizer = collections.OrderedDict(step=tf.constant(3), accumulator=moments, preconditioner=moments)
    state = tff.learning.templates.LearningAlgorithmState(weights, (), (), (), finalizer)
    # Network 1 keeps its weights, network 2 becomes 0.25 n1 + 0.75 n2, network 3 a copy of network 1.
    mixing = tf.constant([[1, 0, 0], [0.25, 0.75, 0], [1, 0, 0]], tf.float32)
    edited = network_pool.mixed_state(state, trainable_index, non_trainable_index, mixing)
    for j in range(len(trainable_index[0])):
      n1, n2 = (weights.trainable[trainable_index[k][j]].numpy() for k in range(2))
      self.assertAllClose(edited.global_model_weights.trainable[trainable_index[0][j]], n1)
      self.assertAllClose(edited.global_model_weights.trainable[trainable_index[1][j]], 0.25 * n1 + 0.75 * n2)
      self.assertAllClose(edited.global_model_weights.trainable[trainable_index[2][j]], n1)
      for name in network_pool.MOMENTS:
        self.assertAllClose(edited.finalizer[name][trainable_index[0][j]], moments[trainable_index[0][j]])
        for k in (1, 2):  # Changed networks start their optimizer afresh.
          self.assertAllEqual(edited.finalizer[name][trainable_index[k][j]],
                              tf.zeros_like(moments[trainable_index[k][j]]))


class AssignClustersTest(tf.test.TestCase):
  """Expert 1's memory at (0, 0); shifted parties near it, near (10, 0), and one alone at (0, 10)."""

  def test_reuse_spawn_and_local_fine_tuning(self):
    config = shiftex.Config(num_branches=4, census_capacity=12, min_cluster_size=2,
                            epsilon=0.5)
    rng = np.random.default_rng(1)
    profiles = np.concatenate([rng.normal(0, 0.1, (5, 2)), rng.normal([10, 0], 0.1, (5, 2)), [[0, 10]],
                               np.zeros((1, 2))]).astype(np.float32)
    state = _state(config, pending_profiles=profiles, pending_count=np.int32(11), profile_gamma=np.float32(0.1))
    result = shiftex.assign_clusters(state, config)
    self.assertEqual(int(result['num_centroids']), 3)
    centroids = result['centroids'].numpy()[:3]
    ids = result['centroid_id'].numpy()[:3]
    by_place = {tuple(np.round(c).astype(int)): i for c, i in zip(centroids, ids)}
    self.assertEqual(by_place[(0, 0)], 0)  # Within epsilon of expert 1's memory: reused.
    self.assertEqual(by_place[(10, 0)], 1)  # Far from every memory: a new expert, id 1 ...
    self.assertEqual(by_place[(0, 10)], -1)  # One party, below gamma: local fine-tuning.
    self.assertEqual(int(result['id_slot'][1]), 1)  # ... in the first free slot,
    self.assertAllEqual(result['mixing'][1], [0, 0, 0, 1])  # cloned from theta_0 (the last slot),
    self.assertAllClose(result['memory'][1], centroids[ids == 1][0])  # with the cluster's centroid as memory.
    self.assertAllEqual(result['active'], [True, True, False, False])
    # Reuse moves expert 1's memory halfway (rho = 0.5) to its cluster's centroid.
    self.assertAllClose(result['memory'][0], 0.5 * centroids[ids == 0][0], atol=1e-6)
    self.assertEqual((float(result['spawned']), float(result['reused'])), (1.0, 1.0))

  def test_small_assignments_are_scored_against_the_exact_optimum(self):
    config = shiftex.Config(num_branches=4, census_capacity=8, min_cluster_size=2, epsilon=0.5,
                            imbalance_weight=0.0, new_expert_cost=0.1)
    profiles = np.zeros((8, 2), np.float32)
    profiles[:4] = [[0, 0.1], [0.1, 0], [10, 0], [10, 0.1]]
    state = _state(config, pending_profiles=profiles, pending_count=np.int32(4), profile_gamma=np.float32(0.1),
                   pending_sizes=np.ones(8, np.float32))
    result = shiftex.assign_clusters(state, config)
    self.assertEqual(float(result['solved_exactly']), 1.0)
    # Reuse expert 1 for the two near it, one new expert for the two far ones: the optimum on this instance.
    self.assertAllClose(result['objective'], result['optimal_objective'], rtol=1e-5)
    self.assertGreater(float(result['objective']), 0.1)  # lambda of the new expert and the parties' distances.
    many = _state(config, pending_profiles=np.random.default_rng(3).normal(size=(8, 2)).astype(np.float32),
                  pending_count=np.int32(8), profile_gamma=np.float32(0.1), pending_sizes=np.ones(8, np.float32))
    self.assertEqual(float(shiftex.assign_clusters(many, config)['solved_exactly']), 0.0)

  def test_a_cluster_reusing_an_expert_spawned_for_another_is_scored_as_that_new_expert(self):
    # Two clusters far from expert 1's memory and within epsilon of each other: the first spawns, the second reuses
    # the new expert. Scored on a slot closed before the assignment, Eq. 2 was inf (a stopped grid run, measured).
    config = shiftex.Config(num_branches=4, census_capacity=8, min_cluster_size=2,
                            epsilon=0.5, imbalance_weight=0.0, new_expert_cost=0.1)
    profiles = np.zeros((8, 2), np.float32)
    profiles[:8] = [[10, 0], [10, 0.05], [10.05, 0], [10, -0.05], [11, 0], [11, 0.05], [11.05, 0], [11, -0.05]]
    state = _state(config, pending_profiles=profiles, pending_count=np.int32(8), profile_gamma=np.float32(0.1),
                   pending_sizes=np.ones(8, np.float32))
    result = shiftex.assign_clusters(state, config)
    self.assertEqual(int(result['num_centroids']), 2)
    self.assertEqual((float(result['spawned']), float(result['reused'])), (1.0, 1.0))
    self.assertAllEqual(result['centroid_id'][:2], [1, 1])  # Both clusters on the new expert (id 1).
    self.assertTrue(np.isfinite(float(result['objective'])))
    self.assertAllClose(result['objective'], facility_location.objective(
        tf.fill([1, 8], 4), tf.constant(profiles), state.pending_histograms, tf.ones([8]), state.memory,
        state.active, gamma_k=0.1, new_expert_cost=0.1, imbalance_weight=0.0)[0], rtol=1e-5)

  def test_a_full_pool_reuses_the_nearest_expert(self):
    config = shiftex.Config(num_branches=2, census_capacity=4, epsilon=0.5)  # One expert slot.
    profiles = np.array([[10, 0], [10.1, 0], [9.9, 0], [10, 0.1]], np.float32)
    result = shiftex.assign_clusters(
        _state(config, pending_profiles=profiles, pending_count=np.int32(4), profile_gamma=np.float32(0.1)), config)
    self.assertEqual(int(result['centroid_id'][0]), 0)
    self.assertEqual(float(result['spawned']), 0.0)
    self.assertEqual((float(result['reused']), float(result['reused_forced'])), (1.0, 1.0))  # Not on merit.

  def test_the_reuse_test_reuses_clusters_of_the_experts_distribution(self):
    # Expert 1's memory keeps MEMORY_PROFILES profiles ~ N(0, I_2). A cluster of 20 parties of the same distribution
    # reuses it with probability 1 - alpha; one shifted by 1.5 standard deviations does not. The pool has free slots,
    # so every decision is on merit.
    config = shiftex.Config(num_branches=4, census_capacity=64, min_cluster_size=2, max_clusters=1)
    rng = np.random.default_rng(7)
    reuses = {0.0: 0, 1.5: 0}
    for trial in range(100):
      kept = np.zeros((4, shiftex.MEMORY_PROFILES, 2), np.float32)
      kept[0] = rng.normal(size=(shiftex.MEMORY_PROFILES, 2))
      memory = np.zeros((4, 2), np.float32)
      memory[0] = kept[0].mean(0)
      for shift in reuses:
        profiles = np.zeros((64, 2), np.float32)
        profiles[:20] = rng.normal(size=(20, 2)) + [shift, 0]
        state = _state(config, pending_profiles=profiles, pending_count=np.int32(20), memory=memory,
                       memory_profiles=kept, memory_sizes=np.array([shiftex.MEMORY_PROFILES, 0, 0, 0], np.int32),
                       profile_gamma=np.float32(0.5), round_num=np.int32(trial))
        result = shiftex.assign_clusters(state, config)
        reuses[shift] += int(result['reused'])
        self.assertEqual(float(result['reused_forced']), 0.0)
        if int(result['spawned']):  # A new expert keeps its cluster's 20 profiles.
          self.assertEqual(int(result['memory_sizes'][1]), 20)
          self.assertAllClose(np.sort(result['memory_profiles'][1, :20].numpy(), 0), np.sort(profiles[:20], 0))
    self.assertBetween(reuses[0.0], 85, 99)  # 1 - alpha = 95%: Binomial(100, 0.95) within about 3 sd.
    self.assertLess(reuses[1.5], 5)

  def test_distinct_examples_keeps_each_input_once_at_its_first_place(self):
    x = np.random.default_rng(0).normal(size=(7, 3, 2)).astype(np.float32)
    order = [3, 1, 3, 0, 1, 6, 2, 0]  # Two epochs' worth of repeats.
    kept = shiftex.distinct_examples({'x': tf.constant(x[order]), 'y': tf.constant(order)})
    self.assertAllEqual(kept['y'], [3, 1, 0, 6, 2])
    self.assertAllClose(kept['x'], x[[3, 1, 0, 6, 2]])

  def test_a_memory_moves_a_share_rho_of_its_profiles_to_the_cluster(self):
    rows = np.zeros((shiftex.MEMORY_PROFILES, 1), np.float32)
    new_rows = np.arange(1, 301, dtype=np.float32)[:, None]
    valid = np.arange(300) < 250
    moved, size = shiftex.mixed_sample(tf.constant(rows), tf.constant(100), tf.constant(new_rows), tf.constant(valid),
                                       0.5, tf.constant([0, 1]))
    moved = moved.numpy()[:, 0]
    self.assertEqual(int(size), shiftex.MEMORY_PROFILES)
    replaced = moved[:100] > 0
    self.assertBetween(replaced.mean(), 0.35, 0.65)  # Binomial(100, 0.5) within 3 sd.
    self.assertTrue(np.all(moved[100:] > 0))  # Free rows filled ...
    taken = moved[moved > 0]
    self.assertEqual(len(set(taken)), len(taken))  # ... with distinct new rows,
    self.assertTrue(np.all(taken <= 250))  # and only valid ones.


class FlipsTest(tf.test.TestCase):

  def test_every_label_cluster_of_an_expert_carries_the_same_weight(self):
    config = shiftex.Config(num_branches=3, max_clusters=3)
    centroids = np.array([[1, 0, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]], np.float32)
    counts = np.array([[6, 2, 0], [0, 0, 5], [0, 0, 0]], np.float32)  # Expert 1: six parties of cluster 0, two of 1.
    state = _state(config, label_centroids=centroids, num_label_clusters=np.int32(3), label_counts=counts)
    factors = {}
    for cluster, histogram in ((0, [0.9, 0.1, 0, 0]), (1, [0, 0.2, 0.8, 0])):
      got, factors[cluster] = shiftex.flips_balance(tf.constant(histogram), tf.constant(0), state, config)
      self.assertEqual(int(got), cluster)
    self.assertAllClose(6 * factors[0], 2 * factors[1])  # Equal totals ...
    self.assertAllClose(6 * factors[0] + 2 * factors[1], 8.0)  # ... of the same sum as unweighted.
    _, alone = shiftex.flips_balance(tf.constant([0.0, 0, 0, 1]), tf.constant(1), state, config)
    self.assertAllClose(alone, 1.0)  # One cluster among expert 2's parties: nothing to balance.
    unclustered = _state(config)
    self.assertAllClose(shiftex.flips_balance(tf.constant([1.0, 0, 0, 0]), tf.constant(0), unclustered, config)[1],
                        1.0)


class MergeExpertsTest(tf.test.TestCase):

  def _merge(self, round_num, second_scale):
    config = shiftex.Config(num_branches=4, window_rounds=5)
    model = _networks(4)
    trainable_index, _ = network_pool.network_index(model, 4)
    rng = np.random.default_rng(2)
    base = [rng.normal(size=v.shape).astype(np.float32) for v in model.get_layer('network_1').trainable_variables]
    other = [rng.normal(size=v.shape).astype(np.float32) for v in base]
    per_network = [base, [second_scale * b for b in base], other, other]
    trainable = [None] * len(model.trainable_variables)
    for k in range(4):
      for j, i in enumerate(trainable_index[k]):
        trainable[i] = tf.constant(per_network[k][j])
    state = _state(config, round_num=np.int32(round_num), active=np.array([1, 1, 1, 0], bool),
                   examples_seen=np.array([300, 100, 50, 0], np.float32),
                   id_slot=np.array([0, 1, 2] + [-1] * 253, np.int32), slot_id=np.array([0, 1, 2, -1], np.int32))
    weights = tff.learning.models.ModelWeights(trainable=trainable, non_trainable=[])
    return shiftex.merge_experts(weights, state, trainable_index, config)

  def test_similar_experts_merge_at_a_window_end_weighted_by_examples(self):
    state, merges = self._merge(round_num=10, second_scale=1.001)  # cos(n1, n2) = 1 > tau.
    self.assertEqual(float(merges), 1.0)
    self.assertAllClose(state.mixing[0], [0.75, 0.25, 0, 0])  # 300 and 100 examples.
    self.assertAllEqual(state.active, [True, False, True, False])
    self.assertEqual(int(state.id_slot[1]), 0)  # Parties of expert id 1 follow the merged expert.
    self.assertAllEqual(state.examples_seen, [400, 0, 50, 0])

  def test_no_merge_inside_a_window_or_of_dissimilar_experts(self):
    for round_num, scale in ((7, 1.001), (10, -1.0)):
      state, merges = self._merge(round_num, scale)
      self.assertEqual(float(merges), 0.0)
      self.assertAllEqual(state.mixing, np.eye(4))


class ReadingsTest(tf.test.TestCase):
  """The readings the ablation compares: W0's fixed thresholds, a clone of the nearest expert, the oracle."""

  def test_w0_thresholds_are_the_null_quantiles_over_the_census_parties(self):
    config = shiftex.Config(num_branches=4, census_capacity=12, window_rounds=5, alpha=0.25,
                            detection='w0_threshold', oracle_assignment=True)
    rng = np.random.default_rng(5)
    parties = 10
    null_mmd, null_jsd = rng.uniform(size=parties).astype(np.float32), rng.uniform(size=parties).astype(np.float32)
    sizes = np.full(parties, 50.0, np.float32)
    sizes[0] = 3.0  # Too few examples for a null: left out.
    valid = np.ones(parties, bool)
    valid[1] = False
    domains = np.array([2, 2, 2, 1, 2, 0, 2, 1, 2, 0], np.int32)
    reports = dict(valid=valid, census=np.ones(parties, bool), shifted=np.zeros(parties, bool),
                   profile=rng.normal(size=(parties, 2)).astype(np.float32),
                   histogram=np.full((parties, 4), 0.25, np.float32), size=sizes, null_mmd=null_mmd,
                   null_jsd=null_jsd, domain=domains)
    sums = dict(slot_examples=np.zeros(4, np.float32), routing=np.zeros((3, 4), np.float32),
                label_counts=np.zeros((4, 4), np.float32))
    state = shiftex.server_update(_state(config, round_num=np.int32(5)), tf.nest.map_structure(tf.constant, reports),
                                  tf.nest.map_structure(tf.constant, sums), config)
    used = valid & (sizes >= 4)
    # 8 parties: the ceil(0.75 * 8) = 6th smallest of each statistic, numpy's inverse of the empirical cdf.
    self.assertAllClose(state.thresholds, [np.quantile(null_mmd[used], 0.75, method='inverted_cdf'),
                                           np.quantile(null_jsd[used], 0.75, method='inverted_cdf')])
    self.assertEqual(int(state.expert_domain[0]), 2)  # Expert 1 serves the domain most census parties hold.
    later = shiftex.server_update(state._replace(round_num=tf.constant(6, tf.int32)),
                                  tf.nest.map_structure(tf.constant, dict(reports, null_mmd=null_mmd * 0 + 9.0)),
                                  tf.nest.map_structure(tf.constant, sums), config)
    self.assertAllClose(later.thresholds, state.thresholds)  # Fixed after W0's census.

  def test_a_party_s_null_statistics_are_those_of_two_samples_without_shift(self):
    # A party's 200 embeddings ~ N(0, I_3) and labels ~ p over 4 classes: its null MMD^2 has the distribution of
    # MMD^2 between two fresh samples of 32 of N(0, I_3) (Kolmogorov-Smirnov), and its null JSD the mean of the JSD
    # between two multinomial draws of 200 labels from its label shares (numpy).
    config = shiftex.Config(samples=32)
    rng = np.random.default_rng(11)
    p = np.array([0.4, 0.3, 0.2, 0.1])
    nulls, fresh, jsds = [], [], []
    null_fn = tf.function(lambda x, y, seed: shiftex.null_statistics(x, y, 4, seed, config))
    mmd_fn = tf.function(lambda x, y: shiftex.window_mmd(x, tf.ones([32]), y, tf.ones([32]), False))
    for trial in range(300):
      x = rng.normal(size=(200, 3)).astype(np.float32)
      y = rng.choice(4, size=200, p=p).astype(np.int32)
      null_mmd, null_jsd = null_fn(x, y, tf.constant([trial, 1]))
      nulls.append(float(null_mmd))
      jsds.append(float(null_jsd))
      fresh.append(float(mmd_fn(rng.normal(size=(32, 3)).astype(np.float32),
                                rng.normal(size=(32, 3)).astype(np.float32))))
    self.assertGreater(scipy.stats.ks_2samp(nulls, fresh).pvalue, 0.01)
    reference = []
    for _ in range(2000):
      q = np.bincount(rng.choice(4, size=200, p=p), minlength=4) / 200.0
      r = np.bincount(rng.choice(4, size=200, p=p), minlength=4) / 200.0
      m = (q + r) / 2
      kl = lambda a, b: np.sum(np.where(a > 0, a * np.log(np.where(a > 0, a, 1) / b), 0.0))
      reference.append(0.5 * kl(q, m) + 0.5 * kl(r, m))
    # The resamples draw from the party's empirical shares, not p: within 5 standard errors of the reference mean.
    self.assertLess(abs(np.mean(jsds) - np.mean(reference)), 5 * np.std(reference) / np.sqrt(len(jsds)))

  def test_a_new_expert_copies_the_nearest_expert_with_clone_source_nearest(self):
    profiles = np.array([[10, 0], [10.1, 0], [9.9, 0], [10, 0.1]], np.float32)
    for source, row in (('bootstrap', [0, 0, 0, 1]), ('nearest', [1, 0, 0, 0])):
      config = shiftex.Config(num_branches=4, census_capacity=4, epsilon=0.5, clone_source=source)
      result = shiftex.assign_clusters(
          _state(config, pending_profiles=profiles, pending_count=np.int32(4), profile_gamma=np.float32(0.1)), config)
      self.assertEqual(float(result['spawned']), 1.0)
      self.assertAllEqual(result['mixing'][1], row)

  def test_the_oracle_clusters_by_true_domain_and_reuses_each_domain_s_expert(self):
    # Six parties whose profiles all sit on expert 1's memory (k-means and the MMD would reuse it), of true domains
    # 1 and 2: the oracle spawns one expert per domain; a later census of those domains reuses them.
    config = shiftex.Config(num_branches=4, census_capacity=8, min_cluster_size=2, oracle_assignment=True)
    profiles = np.zeros((8, 2), np.float32)
    domains = np.array([1, 2, 1, 2, 1, 2, -1, -1], np.int32)
    state = _state(config, pending_profiles=profiles, pending_count=np.int32(6), profile_gamma=np.float32(0.1),
                   pending_domains=domains, expert_domain=np.array([0, -1, -1, -1], np.int32))
    result = shiftex.assign_clusters(state, config)
    self.assertEqual((float(result['spawned']), float(result['reused'])), (2.0, 0.0))
    self.assertAllEqual(result['expert_domain'], [0, 1, 2, -1])
    self.assertAllEqual(result['centroid_id'][:2], [1, 2])  # Domain 1's cluster first, on the first new expert.
    again = state._replace(**{key: result[key] for key in ('active', 'memory', 'memory_profiles', 'memory_sizes',
                                                          'id_slot', 'slot_id', 'next_id', 'expert_domain')},
                           pending_domains=tf.constant([2, 2, 0, 0, -1, -1, -1, -1], tf.int32),
                           pending_count=tf.constant(4, tf.int32))
    second = shiftex.assign_clusters(again, config)
    self.assertEqual((float(second['spawned']), float(second['reused'])), (0.0, 2.0))
    self.assertAllEqual(second['centroid_id'][:2], [0, 2])  # Domains 0 and 2 in order: experts 1 and id 2.


class ShiftExRunTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    in_process_run.start_worker()

  def test_detects_window_shifts_and_spawns_an_expert(self):
    root = self.create_tempdir().full_path
    status, stderr = in_process_run.run([
        '--task=synthetic', '--algorithm=shiftex', '--scenario=windowed', '--window_rounds=8', '--num_branches=4',
        '--total_rounds=24', '--clients_per_round=40', '--num_clients=200', '--rounds_per_eval=8',
        '--eval_batch_size=500', '--server_optimizer=adam',  # The measurements' step; ShiftEx's default averages.
        f'--root_output_dir={root}', '--experiment_name=s'])
    self.assertEqual(status, 0, stderr[-3000:])
    rows = [{k: float(v) for k, v in row.items() if v} for row in in_process_run.metrics_rows(os.path.join(root, 's'))]
    total = lambda key: sum(row.get(key, 0.0) for row in rows)
    self.assertEqual(total('true_shifts') + total('stable_checks'), 2 * 200)  # Every party at both censuses.
    # Every party is checked at each census (100 move and 100 stay per window here). Measured with all 660 parties:
    # 49.7% of the moves found, 8.2% false alarms (two tests of level 5%: at most 9.75% for a party that stayed).
    self.assertGreater(total('detected_shifts') / total('true_shifts'), 0.35)
    self.assertLess(total('false_alarms') / total('stable_checks'), 0.13)
    self.assertGreaterEqual(total('spawned'), 1.0)
    self.assertGreaterEqual(rows[-1]['num_experts'], 2.0)
    with open(os.path.join(root, 's', 'summary.json')) as f:
      self.assertGreater(json.load(f)['final_metrics']['test_mixture_accuracy'], 0.5)

  def test_sliding_windows_check_every_party_at_every_census(self):
    # Sliding windows hold W1's census in round 13 (start 9 + overlap 4, where every mover holds only its new
    # regime): the parties that trained in rounds 9-12 compare with their W0 data too, not with their data of those
    # rounds. Three local epochs: the tests see each example once, so the parties that stayed raise false alarms at
    # about the level.
    root = self.create_tempdir().full_path
    status, stderr = in_process_run.run([
        '--task=synthetic', '--algorithm=shiftex', '--scenario=windowed', '--windowing=sliding', '--window_overlap=4',
        '--window_rounds=8', '--num_branches=4', '--total_rounds=16', '--clients_per_round=40', '--num_clients=200',
        '--client_epochs=3', '--rounds_per_eval=8', '--eval_batch_size=500', f'--root_output_dir={root}',
        '--experiment_name=s'])
    self.assertEqual(status, 0, stderr[-3000:])
    rows = [{k: float(v) for k, v in row.items() if v} for row in in_process_run.metrics_rows(os.path.join(root, 's'))]
    censuses = [row for row in rows if row.get('census_reporters', 0.0) > 0]
    self.assertEqual([int(row['round']) for row in censuses], [13])
    trained_before = {int(row['round']) for row in rows if 9.0 <= row['round'] <= 12.0}
    self.assertEqual(trained_before, {9, 10, 11, 12})  # 160 participations before the census, in W1.
    self.assertEqual(censuses[0]['census_checked'], 200.0)
    self.assertEqual(censuses[0]['census_reporters'], 200.0)
    self.assertEqual(censuses[0]['true_shifts'] + censuses[0]['stable_checks'], 200.0)
    # Two tests of level 5%: at most 9.75% for a party that stayed (about 100 here; 0.2 is 3.4 sd above).
    self.assertLess(censuses[0]['false_alarms'] / censuses[0]['stable_checks'], 0.2)
    with open(os.path.join(root, 's', 'summary.json')) as f:
      detection = json.load(f)['detection']
    self.assertEqual(detection['census_checked'], [{'round': 13, 'scope': 200.0, 'checked': 200.0}])
    self.assertEqual(detection['unchecked'], 0.0)


if __name__ == '__main__':
  absltest.main()
