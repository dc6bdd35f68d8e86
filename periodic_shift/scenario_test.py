"""Tests the shift scenarios against their schedules: exact plans, binomial bounds, determinism, built datasets."""

import collections
import dataclasses

from absl.testing import absltest
import numpy as np
from scipy import stats
import tensorflow as tf
import tensorflow_federated as tff

from periodic_shift import client_sampler
from periodic_shift import concept_drift as concept_lib
from periodic_shift import day_probability
from periodic_shift import dirichlet_mixture
from periodic_shift import domains as domains_lib
from periodic_shift import evolving_domains as evolving_lib
from periodic_shift import mixture_drift
from periodic_shift import periodic as periodic_lib
from periodic_shift import scenario
from periodic_shift import scenarios
from periodic_shift import windowed as windowed_lib
from tasks import task as task_lib
from utils import settings as settings_lib


def _populations(sizes_per_base):
  ids = [[f'b{k}_{i}' for i in range(len(sizes))] for k, sizes in enumerate(sizes_per_base)]
  sizes = [dict(zip(base_ids, base_sizes)) for base_ids, base_sizes in zip(ids, sizes_per_base)]
  return ids, sizes


_NAMES = {module.Settings: module.NAME for module in scenarios.MODULES}


def _build(config, ids, sizes, clients_per_round, seed, num_classes=2, shift_free=False, total_rounds=256, period=32,
           window_rounds=32, images=False):
  """The scenario of `config` (a scenario module's Settings) over these populations, built through the registry."""
  return scenarios.build(_NAMES[type(config)], config, scenario.Population(ids, sizes, num_classes, images),
                         scenario.Schedule(clients_per_round, seed, total_rounds, period, window_rounds), shift_free)


class ScenarioContractTest(absltest.TestCase):
  """Every registered scenario module honours the contract of `periodic_shift.scenario`."""

  def test_every_module_declares_typed_settings_that_validate_at_their_defaults(self):
    self.assertLen(set(scenarios.SCENARIOS), len(scenarios.MODULES))
    ids, sizes = _populations([[12] * 300, [12] * 300])  # Room for every default population.
    for module in scenarios.MODULES:
      with self.subTest(scenario=module.NAME):
        self.assertTrue(module.Settings.__dataclass_params__.frozen)
        self.assertTrue(module.LENGTH_DEPENDENCE is None or '--total_rounds' in module.LENGTH_DEPENDENCE)
        declared = settings_lib.declared(module.Settings)
        self.assertNotEmpty(declared)
        for field in declared:
          self.assertIn(settings_lib.flag_type(module.Settings, field), (bool, int, float, str, list))
        config = scenarios.settings_from(module.NAME, {})
        self.assertEqual(config, module.Settings())
        built = _build(config, ids, sizes, clients_per_round=4, seed=0, num_classes=10, total_rounds=8, period=4)
        self.assertIsInstance(built, scenario.Scenario)
        self.assertNotEmpty(built.round_plan(1).clients)
        self.assertRegex(module.HEADLINE_METRIC, r'^[a-z_]+$')
        self.assertRegex(scenarios.run_name(module.NAME, config, scenario.Schedule(4, 0)), r'^[A-Za-z0-9_.+-]+$')
        settings_lib.check_finite(scenarios.settings_from(module.NAME, module.SMOKE_RUN.flags))

  def test_run_names_at_the_defaults_tell_the_scenarios_apart(self):
    names = [scenarios.run_name(module.NAME, module.Settings(), scenario.Schedule(4, 0)) for module in scenarios.MODULES]
    self.assertLen(set(names), len(names), names)

  def test_smoke_checks_find_what_a_run_misses(self):
    # A run that reports nothing of what its scenario declares fails every scenario's smoke check.
    rows = [{'round': 1.0}, {'round': 2.0}]
    for module in scenarios.MODULES:
      with self.subTest(scenario=module.NAME):
        try:
          problems = module.SMOKE_RUN.check(rows, {}, False)
        except KeyError as missing:  # A column the check reads, missing.
          problems = [f'no {missing}']
        self.assertNotEmpty(problems)

  def test_settings_from_values_keeps_defaults_for_missing_and_none(self):
    config = scenarios.settings_from('windowed', {'windowing': 'sliding', 'num_clients': None,
                                                  'corruptions': ['noise'],
                                                  'num_domains': 7})
    self.assertEqual(config, windowed_lib.Settings(windowing='sliding', corruptions=('noise',)))


class PeriodicScenarioTest(absltest.TestCase):

  def test_plan_is_the_round_sampler_sample(self):
    ids, sizes = _populations([[5] * 30, [5] * 40])
    config = periodic_lib.Settings(shift_fn='linear', shift_p=2.0)
    periodic = _build(config, ids, sizes, clients_per_round=6, seed=3, period=8)
    q = day_probability.build_day_probability_fn('linear', 8, 2.0, 30 / 70)
    sampler = client_sampler.RoundSampler(ids, 6, client_sampler.day_night_probabilities(q), 3)
    for round_num in range(1, 20):
      plan, sample = periodic.round_plan(round_num), sampler.sample(round_num)
      self.assertEqual([c.client_id for c in plan.clients], sample.client_ids)
      self.assertEqual([c.parts for c in plan.clients],
                       [(scenario.Part(int(mode), client_id),) for client_id, mode in zip(sample.client_ids,
                                                                                           sample.modes)])
      metrics = periodic.round_metrics(round_num, plan)
      self.assertAlmostEqual(metrics['q'], abs(2 * (round_num % 8) / 8 - 1) ** 2)
      self.assertAlmostEqual(metrics['day_fraction'], sample.mode_fraction(0))
    self.assertIsNone(periodic.test_weights(3))


class MixtureSharesTest(absltest.TestCase):

  def test_two_domains_follow_the_closed_forms(self):
    cycle = 200 / 3  # A fractional cycle, as 200 rounds over 3 cycles.
    for round_num in np.linspace(0, 200, 37):
      phi = np.mod(round_num, cycle) / cycle
      linear = mixture_drift.mixture_shares(round_num, 2, cycle, 'linear')
      cosine = mixture_drift.mixture_shares(round_num, 2, cycle, 'cosine')
      self.assertAlmostEqual(linear[0], 1 - abs(1 - 2 * phi))  # 0 -> 1 -> 0.
      self.assertAlmostEqual(cosine[0], 0.5 * (1 - np.cos(2 * np.pi * phi)))
      self.assertAlmostEqual(linear.sum(), 1.0)
      self.assertAlmostEqual(cosine.sum(), 1.0)
    self.assertAlmostEqual(mixture_drift.mixture_shares(0, 2, 10, 'linear')[0], 0.0)
    self.assertAlmostEqual(mixture_drift.mixture_shares(5, 2, 10, 'linear')[0], 1.0)
    np.testing.assert_allclose(mixture_drift.mixture_shares(7, 2, 10, 'none'), [0.5, 0.5])

  def test_three_domains_take_turns(self):
    rounds = np.arange(30)
    shares = np.stack([mixture_drift.mixture_shares(t, 3, 30, 'cosine') for t in rounds])
    np.testing.assert_allclose(shares.sum(axis=1), 1.0)
    peaks = [int(rounds[np.argmax(shares[:, k])]) for k in range(3)]
    self.assertEqual(peaks, [15, 5, 25])  # Domain k's weight peaks where phi + k / 3 = 1 / 2.


class MixtureDriftScenarioTest(absltest.TestCase):

  def setUp(self):
    super().setUp()
    rng = np.random.default_rng(0)
    self.ids, self.sizes = _populations([rng.integers(20, 80, 100).tolist(), rng.integers(20, 80, 120).tolist()])
    self.config = mixture_drift.Settings(num_cycles=3, mixture_schedule='linear', num_clients=80)

  def test_domain_counts_are_binomial_around_the_schedule(self):
    mixture = _build(self.config, self.ids, self.sizes, clients_per_round=10, seed=1, total_rounds=200)
    z_scores = []
    for round_num in range(1, 201):
      plan = mixture.round_plan(round_num)
      a = mixture.shares(round_num)[0]
      total = sum(part.num_examples for client in plan.clients for part in client.parts)
      first = sum(part.num_examples for client in plan.clients for part in client.parts if part.domain == 0)
      if 0 < a < 1:
        z_scores.append((first - total * a) / np.sqrt(total * a * (1 - a)))
      else:
        self.assertEqual(first, total * a)
      metrics = mixture.round_metrics(round_num, plan)
      self.assertAlmostEqual(metrics['domain_share_0'], first / total)
      self.assertAlmostEqual(metrics['scheduled_share_0'], a)
    z_scores = np.array(z_scores)
    self.assertLess(np.max(np.abs(z_scores)), 4.5)  # Every round within 4.5 binomial standard deviations.
    self.assertLess(abs(np.mean(z_scores)), 3 / np.sqrt(len(z_scores)))  # Unbiased.
    self.assertBetween(np.std(z_scores), 0.8, 1.2)  # Binomial, not over- or under-dispersed.

  def test_clients_keep_their_sources_and_budgets(self):
    mixture = _build(self.config, self.ids, self.sizes, clients_per_round=10, seed=1, total_rounds=200)
    sources = collections.defaultdict(set)
    for round_num in range(1, 60):
      plan = mixture.round_plan(round_num)
      self.assertLen({c.client_id for c in plan.clients}, 10)  # Without replacement.
      for client in plan.clients:
        for part in client.parts:
          sources[(client.client_id, part.domain)].add(part.source_id)
          self.assertLessEqual(part.num_examples, self.sizes[part.domain][part.source_id])
        budget = min(self.sizes[k][next(iter(sources[(client.client_id, k)]))] for k in range(2)
                     if sources[(client.client_id, k)])
        self.assertLessEqual(sum(part.num_examples for part in client.parts), budget)
    self.assertTrue(all(len(ids) == 1 for ids in sources.values()))  # One fixed source per client and domain.

  def test_same_seed_same_data_other_seed_other_data(self):
    first = _build(self.config, self.ids, self.sizes, clients_per_round=10, seed=1, total_rounds=200)
    again = _build(self.config, self.ids, self.sizes, clients_per_round=10, seed=1, total_rounds=200)
    other = _build(self.config, self.ids, self.sizes, clients_per_round=10, seed=2, total_rounds=200)
    self.assertEqual(first.round_plan(17), again.round_plan(17))
    self.assertNotEqual(first.round_plan(17), other.round_plan(17))

  def test_test_weights(self):
    current = _build(self.config, self.ids, self.sizes, clients_per_round=10, seed=1, total_rounds=200)
    np.testing.assert_allclose(current.test_weights(11), current.shares(11))
    balanced = _build(mixture_drift.Settings(mixture_test='balanced'), self.ids, self.sizes, clients_per_round=10,
                      seed=1)
    np.testing.assert_allclose(balanced.test_weights(11), [0.5, 0.5])

  def test_no_shift_has_constant_equal_shares(self):
    flat = _build(self.config, self.ids, self.sizes, clients_per_round=10, seed=1, shift_free=True, total_rounds=200)
    for round_num in (1, 30, 67):
      np.testing.assert_allclose(flat.shares(round_num), [0.5, 0.5])

  def test_bad_settings_name_the_flag(self):
    with self.assertRaisesRegex(ValueError, 'scenario must be one of'):
      scenarios.module('sine')
    for config, message in ((mixture_drift.Settings(num_cycles=200), 'num_cycles'),
                            (mixture_drift.Settings(mixture_schedule='step'), 'mixture_schedule'),
                            (mixture_drift.Settings(num_clients=101), '--num_clients')):
      with self.assertRaisesRegex(ValueError, message):
        _build(config, self.ids, self.sizes, clients_per_round=10, seed=1)


class EvolvingDomainsScenarioTest(absltest.TestCase):

  def setUp(self):
    super().setUp()
    self.ids, self.sizes = _populations([[10] * 60, [10] * 70])
    self.config = evolving_lib.Settings(num_domains=5, rotation_step=15.0, num_clients=12, evolving_base=1)

  def test_domains_rotate_by_m_delta_and_the_last_is_the_target(self):
    evolving = _build(self.config, self.ids, self.sizes, clients_per_round=4, seed=0)
    domain_list = evolving.domains(('day', 'night'), 10)
    self.assertEqual([d.rotation_degrees for d in domain_list], [0.0, 15.0, 30.0, 45.0, 60.0])
    self.assertEqual({d.base for d in domain_list}, {1})
    self.assertEqual(domain_list[-1].name, 'night_rot60')
    self.assertEqual([d.stage for d in domain_list], [0, 1, 2, 3, 4])
    np.testing.assert_array_equal(evolving.test_weights(3), [0, 0, 0, 0, 1])
    unexpected = _build(dataclasses.replace(self.config, target_extra_rotation=20.0), self.ids, self.sizes,
                                clients_per_round=4, seed=0)
    self.assertEqual(unexpected.domains(('day', 'night'), 10)[-1].rotation_degrees, 80.0)
    flat = _build(self.config, self.ids, self.sizes, clients_per_round=4, seed=0, shift_free=True)
    self.assertTrue(all(d.is_plain for d in flat.domains(('day', 'night'), 10)))

  def test_clients_hold_every_source_domain_from_disjoint_base_clients(self):
    evolving = _build(self.config, self.ids, self.sizes, clients_per_round=4, seed=0)
    sources = {}
    for round_num in range(1, 40):
      plan = evolving.round_plan(round_num)
      self.assertLen({c.client_id for c in plan.clients}, 4)
      for client in plan.clients:
        self.assertEqual([part.domain for part in client.parts], [0, 1, 2, 3])  # Never the target, 4.
        for part in client.parts:
          self.assertIn(part.source_id, self.ids[1])
          self.assertEqual(sources.setdefault((client.client_id, part.domain), part.source_id), part.source_id)
      self.assertEqual(evolving.round_metrics(round_num, plan), {'source_domains': 4.0})
    self.assertLen(set(sources.values()), len(sources))  # No base client serves two (client, domain) pairs.
    self.assertEqual(evolving.round_plan(9), _build(self.config, self.ids, self.sizes, 4, 0).round_plan(9))

  def test_dirichlet_label_weights_recover_the_concentration(self):
    ids, sizes = _populations([[10] * 6000])
    config = dataclasses.replace(self.config, evolving_base=0, num_domains=3, num_clients=2000, dirichlet_alpha=0.5)
    evolving = _build(config, ids, sizes, clients_per_round=4, seed=1, num_classes=5)
    weights = np.array(evolving.label_weights)
    self.assertEqual(weights.shape, (2000, 5))
    # Each class weight of Dir(0.5 1_5) is Beta(0.5, 2); its moments give alpha back.
    self.assertGreater(stats.kstest(weights[:, 3], stats.beta(0.5, 2.0).cdf).pvalue, 1e-3)
    mean, var = weights[:, 0].mean(), weights[:, 0].var()
    self.assertAlmostEqual((mean * (1 - mean) / var - 1) / 5, 0.5, delta=0.05)
    for client in evolving.round_plan(3).clients:  # The client's weights thin every one of its sources.
      c = int(client.client_id.split('_')[1])
      self.assertEqual({part.label_weights for part in client.parts}, {tuple(weights[c])})
    # One thinning seed in every round: a client keeps the same examples of its sources (task test below).
    self.assertLen({part.label_seed for r in (3, 4) for c in evolving.round_plan(r).clients for part in c.parts}, 1)
    iid = _build(self.config, self.ids, self.sizes, clients_per_round=4, seed=0)
    self.assertEqual({part.label_weights for c in iid.round_plan(1).clients for part in c.parts}, {None})
    with self.assertRaisesRegex(ValueError, 'dirichlet_alpha must be > 0'):
      dataclasses.replace(self.config, dirichlet_alpha=0.0).validate(scenario.Schedule(4, 0))

  def test_too_few_base_clients_names_the_flags(self):
    with self.assertRaisesRegex(ValueError, '--num_clients x --num_domains = 75 .* has 70'):
      _build(dataclasses.replace(self.config, num_clients=15), self.ids, self.sizes, 4, 0)

  def test_each_client_is_tested_on_its_own_target_data_from_a_base_client_of_its_own(self):
    config = dataclasses.replace(self.config, dirichlet_alpha=0.3)
    evolving = _build(config, self.ids, self.sizes, clients_per_round=4, seed=0, num_classes=10)
    target = evolving.evaluation_plans()['target']
    self.assertLen(target.test, 12)
    training_sources = {part.source_id for r in range(60) for c in evolving.round_plan(r).clients for part in c.parts}
    for c, (test, own) in enumerate(zip(target.test, target.personalization)):
      self.assertEqual(test.client_id, own.client_id)
      (part,) = test.parts
      self.assertEqual(part.domain, 4)
      self.assertNotIn(part.source_id, training_sources)
      self.assertEqual(part.label_weights, evolving.label_weights[c])
      self.assertEqual([p.domain for p in own.parts], [0, 1, 2, 3])
      self.assertEqual({p.order_seed for p in own.parts + test.parts}, {0})  # Fixed splits, the same every round.
    self.assertLen({test.parts[0].source_id for test in target.test}, 12)


class ConceptDriftScenarioTest(absltest.TestCase):

  def setUp(self):
    super().setUp()
    self.ids, self.sizes = _populations([[40] * 30, [25] * 20])

  def _build(self, **settings):
    config = concept_lib.Settings(drift_start=0.2, drift_end=0.4, drift_length=10, concept_period=8, **settings)
    return _build(config, self.ids, self.sizes, clients_per_round=50, seed=4, total_rounds=100)

  def _concepts(self, drift, round_num):
    """client -> {concept: examples} in the round (every client takes part: m = population)."""
    result = {}
    for client in drift.round_plan(round_num).clients:
      base = int(client.client_id.split('/')[0])
      result[client.client_id] = {part.domain - 2 * base: part.num_examples or self.sizes[base][part.source_id]
                                  for part in client.parts}
    return result

  def test_sudden_drift_switches_every_client_at_its_change_point(self):
    drift = self._build(drift_type='sudden')
    points = [drift.change_point(i) for i in range(50)]
    self.assertBetween(min(points), 20, 40)
    self.assertBetween(max(points), 20, 40)
    self.assertGreater(len(set(points)), 10)  # Spread over the interval, not one shared change point.
    names = [f'{b}/{c}' for b, ids in enumerate(self.ids) for c in ids]
    for round_num in (1, 25, 35, 60):
      concepts = self._concepts(drift, round_num)
      for index, name in enumerate(names):
        self.assertEqual(list(concepts[name]), [1 if round_num >= points[index] else 0])

  def test_incremental_drift_splits_clients_binomially_into_disjoint_parts(self):
    drift = self._build(drift_type='incremental')
    z_scores = []
    for round_num in range(15, 55):
      for client in drift.round_plan(round_num).clients:
        index = [f'{b}/{c}' for b, ids in enumerate(self.ids) for c in ids].index(client.client_id)
        _, _, share = drift.concept_share(index, round_num)
        size = self.sizes[int(client.client_id[0])][client.parts[0].source_id]
        moved = sum(part.num_examples for part in client.parts if part.domain % 2 == 1)
        self.assertEqual(sum(part.num_examples or size for part in client.parts), size)
        if len(client.parts) == 2:  # Disjoint ranges of the one shuffled source.
          self.assertEqual(client.parts[1].skip, client.parts[0].num_examples)
        self.assertAlmostEqual(share, np.clip((round_num - drift.change_point(index) + 1) / 10, 0, 1))
        if 0 < share < 1:
          z_scores.append((moved - size * share) / np.sqrt(size * share * (1 - share)))
    self.assertLess(abs(np.mean(z_scores)), 3 / np.sqrt(len(z_scores)))
    self.assertBetween(np.std(z_scores), 0.8, 1.2)

  def test_recurring_concepts_come_back(self):
    drift = self._build(drift_type='recurring', num_concepts=3)
    point = drift.change_point(0)
    sequence = [drift.concept_share(0, t)[0] for t in range(point - 2, point + 26)]
    self.assertEqual(sequence, [0, 0] + [1] * 8 + [2] * 8 + [0] * 8 + [1] * 2)

  def test_concepts_are_distinct_label_permutations(self):
    domain_list = self._build(drift_type='sudden', num_concepts=3).domains(('day', 'night'), 5)
    self.assertEqual([d.name for d in domain_list], ['day_c0', 'day_c1', 'day_c2', 'night_c0', 'night_c1',
                                                     'night_c2'])
    self.assertEqual([d.base for d in domain_list], [0, 0, 0, 1, 1, 1])
    self.assertIsNone(domain_list[0].label_permutation)
    permutations = {d.label_permutation for d in domain_list[1:3]}
    self.assertLen(permutations, 2)
    self.assertNotIn(tuple(range(5)), permutations)
    self.assertEqual([sorted(p) for p in permutations], [list(range(5))] * 2)

  def test_no_shift_keeps_concept_zero(self):
    config = concept_lib.Settings(drift_type='sudden')
    flat = _build(config, self.ids, self.sizes, clients_per_round=50, seed=4, shift_free=True, total_rounds=100)
    self.assertEqual(flat.round_metrics(90, flat.round_plan(90)), {'concept_share_0': 1.0, 'concept_share_1': 0.0})


class WindowedScenarioTest(absltest.TestCase):

  def setUp(self):
    super().setUp()
    self.ids, self.sizes = _populations([[30] * 41, [20] * 60])

  def _build(self, images=False, **settings):
    config = windowed_lib.Settings(**settings)
    return _build(config, self.ids, self.sizes, clients_per_round=101, seed=2, num_classes=4, total_rounds=50,
                  window_rounds=10, images=images)

  def test_image_regimes_draw_the_common_corruptions_from_the_lowest_severity_on(self):
    drawn = set()
    for seed in range(20):
      config = windowed_lib.Settings(min_window_severity=3)
      windowed = _build(config, self.ids, self.sizes, clients_per_round=101, seed=seed, num_classes=4,
                        total_rounds=50, window_rounds=10, images=True)
      for family, severity in windowed.regimes[1:]:
        self.assertIn(family, domains_lib.COMMON_CORRUPTIONS)
        self.assertBetween(severity, 3, 5)
        drawn.add((family, severity))
    self.assertGreater(len({family for family, _ in drawn}), 7)  # 80 draws of 10 families.
    self.assertEqual({severity for _, severity in drawn}, {3, 4, 5})

  def test_exactly_the_switch_fraction_moves_at_every_boundary(self):
    windowed = self._build()
    self.assertLen(windowed.regimes, 5)
    self.assertEqual(windowed.regimes[0], (None, 0))
    for family, severity in windowed.regimes[1:]:
      self.assertIn(family, domains_lib.VECTOR_CORRUPTIONS)  # Vector inputs by default.
      self.assertBetween(severity, 1, 5)
    for window in range(1, 5):
      moved = windowed.assignments[window] != windowed.assignments[window - 1]
      self.assertEqual(int(moved.sum()), 50)  # floor(0.5 x 101).
      self.assertTrue(np.all(windowed.assignments[window][moved] == window))
    # Tumbling: every client of round t holds its window's regime only.
    for round_num in (1, 10, 11, 35, 50):
      window = (round_num - 1) // 10
      for client in windowed.round_plan(round_num).clients:
        self.assertLen(client.parts, 1)
    metrics = windowed.round_metrics(11, windowed.round_plan(11))
    self.assertEqual(metrics['window'], 1.0)
    sizes = [30] * 41 + [20] * 60
    moved = windowed.assignments[1] == 1
    self.assertAlmostEqual(metrics['new_regime_share'], np.dot(sizes, moved) / sum(sizes))  # All take part.

  def test_test_weights_are_the_windows_population_shares(self):
    windowed = self._build()
    sizes = np.array([30] * 41 + [20] * 60, float)
    bases = np.array([0] * 41 + [1] * 60)
    for round_num in (1, 10, 11, 27, 50):
      window = (round_num - 1) // 10
      weights = windowed.test_weights(round_num).reshape(2, 5)  # [base, regime]
      for base in (0, 1):
        for regime in range(5):
          held = (bases == base) & (windowed.assignments[window] == regime)
          self.assertAlmostEqual(weights[base, regime], sizes[held].sum() / sizes.sum())
      self.assertEqual(weights[:, window + 1:].sum(), 0.0)  # Regimes still to come weigh nothing.

  def test_sliding_windows_blend_regimes_over_the_overlap(self):
    windowed = self._build(windowing='sliding', window_overlap=4)
    mover = int(np.flatnonzero(windowed.assignments[1] == 1)[0])
    stayer = int(np.flatnonzero(windowed.assignments[1] == 0)[0])
    for offset in range(6):
      round_num = 11 + offset
      old, new, share = windowed._regime_shares(mover, round_num)  # pylint: disable=protected-access
      self.assertEqual((old, new, share), (0, 1, (offset + 1) / 5) if offset < 4 else (1, 1, 0.0))
      self.assertEqual(windowed._regime_shares(stayer, round_num), (0, 0, 0.0))  # pylint: disable=protected-access

  def test_label_weights_are_dirichlet_and_thin_the_labels(self):
    windowed = self._build(label_skew_alpha=0.5)
    self.assertIsNone(windowed.label_weights(0))
    weights = np.array([windowed.label_weights(r) for r in range(1, 5)])
    np.testing.assert_allclose(weights.sum(axis=1), 1.0, rtol=1e-6)
    self.assertIsNone(self._build(label_skew_alpha=0.0).label_weights(2))
    # A client of 4,000 examples with uniform labels keeps label y with probability w_y / max w.
    labels = np.arange(4000) % 4
    data = [tff.simulation.datasets.TestClientData({'c0': collections.OrderedDict(
        x=np.zeros((4000, 1), np.float32), y=labels.astype(np.int32))})]
    task = task_lib.Task(name='t', train_data=data, client_sizes=[{'c0': 4000}], test_data=[], test_sizes=[],
                         batch_fn=lambda b: b, model_fn=None, num_classes=4, mode_names=('a',))
    w = weights[0]
    plan = scenario.ClientPlan('c0', (scenario.Part(0, 'c0', label_weights=tuple(w)),))
    spec = tff.simulation.baselines.ClientSpec(num_epochs=1, batch_size=100)
    kept = np.concatenate([raw['y'] for raw, _ in task.plan_dataset(plan, spec, (0, 5)).as_numpy_iterator()])
    for label in range(4):
      p = w[label] / w.max()
      count = int(np.sum(kept == label))
      self.assertLess(abs(count - 1000 * p), 4 * np.sqrt(1000 * p * (1 - p)) + 1e-9, f'label {label}')

  def _size(self, client_id: str) -> int:
    base, source_id = client_id.split('/')
    return self.sizes[int(base)][source_id]

  def _held_examples(self, windowed, round_num: int, plan=None) -> dict[str, tuple[set, ...]]:
    """Per client of round `round_num`'s plan (default: its participants'), the identities of the examples each of
    its parts yields, read from the datasets the task builds (x holds an example's identity, its label is the
    identity mod 4)."""
    data = [tff.simulation.datasets.TestClientData({client_id: collections.OrderedDict(
        x=(1000 * base + 100 * int(client_id.split('_')[1]) + np.arange(size, dtype=np.float32))[:, np.newaxis],
        y=np.arange(size, dtype=np.int32) % 4) for client_id, size in self.sizes[base].items()}) for base in (0, 1)]
    task = task_lib.Task(name='t', train_data=data, client_sizes=self.sizes, test_data=[], test_sizes=[],
                         batch_fn=lambda b: b, model_fn=None, num_classes=4, mode_names=('a', 'b'))
    task = task.with_domains(windowed.domains(['a', 'b'], 4))
    spec = tff.simulation.baselines.ClientSpec(num_epochs=1, batch_size=100)
    held = {}
    for position, client in enumerate((plan or windowed.round_plan(round_num)).clients):
      held[client.client_id] = tuple(
          {int(x) for raw, _ in task.plan_dataset(scenario.ClientPlan(client.client_id, (part,)), spec,
                                                  (round_num, position)).unbatch().as_numpy_iterator()
           for x in raw['x']} for part in client.parts)
    return held

  def _census_checks(self, windowed) -> list[dict]:
    """Per census after W0's, per party: whether it moved, its held examples (label-thinned) in the window's new
    regime and in older ones, and the labels it holds then and held at the census before."""
    rounds = windowed.census_rounds()
    plans = [windowed.census_plan(r) for r in rounds]
    held = [self._held_examples(windowed, r, plan) for r, plan in zip(rounds, plans)]
    regimes = windowed.domain_regimes()
    labels = lambda examples: np.array(sorted(examples), dtype=np.int64) % 4  # Identity mod 4 is the label.
    checks = []
    for window in range(1, len(rounds)):
      for index, client in enumerate(plans[window].clients):
        parts = held[window][client.client_id]
        new = set().union(*(examples for part, examples in zip(client.parts, parts)
                            if regimes[part.domain] == window))
        now = set().union(*parts)
        checks.append(dict(moved=bool(windowed.assignments[window, index] != windowed.assignments[window - 1, index]),
                           window=window, new=len(new), old=len(now - new), labels=labels(now),
                           before=labels(set().union(*held[window - 1][client.client_id]))))
    return checks

  def test_a_sliding_census_finds_every_mover_in_its_new_regime_and_stable_parties_unchanged(self):
    # The Fashion-MNIST setup's shape: sliding windows, overlap 4, Dir(1) label weights thinning each new regime.
    build = lambda total_rounds=50, **settings: _build(
        windowed_lib.Settings(windowing='sliding', window_overlap=4, num_clients=40, **settings), self.ids,
        self.sizes, clients_per_round=8, seed=2, num_classes=4, total_rounds=total_rounds, window_rounds=10)
    windowed = build()
    self.assertEqual(windowed.census_rounds(), [10, 15, 25, 35, 45])
    settled = self._census_checks(windowed)
    movers = [check for check in settled if check['moved']]
    self.assertLen(movers, 80)  # 20 of the 40 parties at each of the 4 boundaries.
    for check in movers:  # All of a mover's data are in its new regime.
      self.assertEqual(check['old'], 0, check)
    # The parties a majority reading calls stable are those that did not move; their labels at the census and at the
    # one before are two samples of one distribution: an independent permutation test of the label counts (scipy,
    # the chi-square statistic) flags them at most at its level alpha = 0.05, within three standard errors.
    stable = [check for check in settled if check['new'] <= check['old']]
    self.assertEqual(len(stable), 80)
    self.assertFalse(any(check['moved'] for check in stable))

    def chi_square(before, now):
      counts = np.stack([np.bincount(before, minlength=4), np.bincount(now, minlength=4)]).astype(float)
      expected = counts.sum(1, keepdims=True) * counts.sum(0, keepdims=True) / counts.sum()
      return np.sum(np.where(expected > 0, (counts - expected)**2 / np.maximum(expected, 1e-12), 0.0))

    rng = np.random.default_rng(0)
    alarms = [stats.permutation_test((check['before'], check['labels']), chi_square, permutation_type='independent',
                                     n_resamples=199, vectorized=False, alternative='greater',
                                     random_state=rng).pvalue <= 0.05 for check in stable]
    self.assertLessEqual(np.mean(alarms), 0.05 + 3 * np.sqrt(0.05 * 0.95 / len(stable)))
    # The midpoint reading (round start + 2) checks most movers while their new regime is a minority of their data
    # (W1's census: 20 movers).
    early = [check for check in self._census_checks(build(20, census_round='midpoint')) if check['moved']]
    self.assertLen(early, 20)
    self.assertLess(np.mean([check['new'] > check['old'] for check in early]), 0.5)

  def test_consecutive_windows_hold_disjoint_chunks_and_one_chunk_replays(self):
    windowed = self._build(label_skew_alpha=0.0)  # Every example kept: the chunks are whole.
    rounds = {window: self._held_examples(windowed, 1 + 10 * window) for window in range(3)}
    for client_id, sets in rounds[0].items():
      chunk = [set().union(*rounds[window][client_id]) for window in range(3)]
      self.assertEmpty(chunk[0] & chunk[1], client_id)  # Fresh examples in the next window,
      self.assertEqual(chunk[0], chunk[2], client_id)  # chunk w mod 2,
      size = self._size(client_id)
      self.assertLen(chunk[0] | chunk[1], size)  # and the two chunks are the client's data.
      self.assertBetween(len(chunk[0]), size // 2, size - size // 2)
    self.assertEqual(self._held_examples(windowed, 5), rounds[0])  # The same chunk in every round of a window.
    replayed = self._build(label_skew_alpha=0.0, window_chunks=1)
    for client_id, sets in self._held_examples(replayed, 11).items():
      self.assertLen(set().union(*sets), self._size(client_id))

  def test_a_sliding_window_splits_the_windows_chunk(self):
    windowed = self._build(label_skew_alpha=0.0, windowing='sliding', window_overlap=4)
    tumbling = self._build(label_skew_alpha=0.0)
    split, whole = self._held_examples(windowed, 12), self._held_examples(tumbling, 12)
    self.assertGreater(sum(len(sets) == 2 for sets in split.values()), 0)  # Movers hold both regimes.
    for client_id, sets in split.items():
      self.assertEqual(set().union(*sets), set().union(*whole[client_id]), client_id)
      if len(sets) == 2:
        self.assertEmpty(sets[0] & sets[1])

  def test_num_clients_draws_the_population_that_trains_and_reports(self):
    config = windowed_lib.Settings(num_clients=30)
    windowed = _build(config, self.ids, self.sizes, clients_per_round=8, seed=2, num_classes=4, total_rounds=50,
                      window_rounds=10)
    census = {client.client_id for client in windowed.census_plan(10).clients}  # W0's last round.
    self.assertLen(census, 30)
    sampled = {client.client_id for r in range(1, 51) for client in windowed.round_plan(r).clients}
    self.assertLessEqual(sampled, census)
    self.assertEqual(windowed.census_rounds(), [10, 11, 21, 31, 41])
    self.assertIsNone(windowed.census_plan(12))
    fixed = _build(dataclasses.replace(config, window_severity=4), self.ids, self.sizes, clients_per_round=8, seed=2,
                   num_classes=4, total_rounds=50, window_rounds=10)
    self.assertEqual([family for family, _ in fixed.regimes], [family for family, _ in windowed.regimes])
    self.assertEqual([severity for _, severity in fixed.regimes], [0, 4, 4, 4, 4])
    # The cohort scope: the census of window 2 (round 11) is the union of rounds 11-20's participants.
    cohort = _build(dataclasses.replace(config, census_scope='cohort'), self.ids, self.sizes, clients_per_round=2,
                    seed=2, num_classes=4, total_rounds=50, window_rounds=10)
    trained = {client.client_id for r in range(11, 21) for client in cohort.round_plan(r).clients}
    self.assertEqual({client.client_id for client in cohort.census_plan(11).clients}, trained)
    self.assertLess(len(trained), 30)
    for too_few in (5, 102):
      with self.assertRaisesRegex(ValueError, '--num_clients must be between'):
        _build(dataclasses.replace(config, num_clients=too_few), self.ids, self.sizes, clients_per_round=8, seed=2,
               num_classes=4, total_rounds=50, window_rounds=10)

  def test_no_shift_stays_in_the_clean_regime(self):
    config = windowed_lib.Settings()
    flat = _build(config, self.ids, self.sizes, clients_per_round=101, seed=2, shift_free=True, num_classes=4,
                  total_rounds=50, window_rounds=10)
    self.assertEqual(flat.num_domains, 2)
    self.assertEqual(flat.round_metrics(45, flat.round_plan(45)), {'window': 0.0, 'new_regime_share': 0.0})


class DirichletMixtureScenarioTest(tf.test.TestCase):

  def _build(self, ids, sizes, **settings):
    return _build(dirichlet_mixture.Settings(**settings), ids, sizes, clients_per_round=4, seed=5, num_classes=10)

  def test_mixture_weights_recover_the_dirichlet_concentration(self):
    ids, sizes = _populations([[100] * 3000])
    mixtures = self._build(ids, sizes, component_alpha=0.4).mixture_weights  # M = 2: base and transformed.
    self.assertEqual(mixtures.shape, (3000, 2))
    # The first weight of Dir(0.4, 0.4) is Beta(0.4, 0.4); its moments give alpha back.
    self.assertGreater(stats.kstest(mixtures[:, 0], stats.beta(0.4, 0.4).cdf).pvalue, 1e-3)
    mean, var = mixtures[:, 0].mean(), mixtures[:, 0].var()
    self.assertAlmostEqual((mean * (1 - mean) / var - 1) / 2, 0.4, delta=0.04)
    ids3, sizes3 = _populations([[50] * 2000] * 3)
    three = self._build(ids3, sizes3, dirichlet_components='bases', component_alpha=2.0).mixture_weights
    self.assertEqual(three.shape, (2000, 3))
    self.assertGreater(stats.kstest(three[:, 2], stats.beta(2.0, 4.0).cdf).pvalue, 1e-3)

  def test_component_counts_are_multinomial_and_splits_60_20_20(self):
    ids, sizes = _populations([[1000] * 400])
    mixture = self._build(ids, sizes, unseen_fraction=0.25)
    counts = mixture.component_counts
    self.assertAllEqual(counts.sum(axis=1), np.full(400, 1000))
    # n_c1 ~ Binomial(1000, pi_c1): standardized residuals are ~ N(0, 1).
    pi = mixture.mixture_weights[:, 0]
    z = (counts[:, 0] - 1000 * pi) / np.sqrt(np.maximum(1000 * pi * (1 - pi), 1e-9))
    self.assertLess(abs(z[pi * (1 - pi) > 0.01].mean()), 0.2)
    self.assertBetween(z[pi * (1 - pi) > 0.01].std(), 0.85, 1.15)
    self.assertLen(mixture.unseen_clients, 100)
    self.assertEmpty(set(mixture.unseen_clients) & set(mixture.training_clients))
    plans = {split: {p.client_id: p for p in mixture.split_plans(split)} for split in dirichlet_mixture.SPLITS}
    for c in mixture.training_clients[:50]:
      for m, n in enumerate(counts[c]):
        taken = [sum(part.num_examples for part in plans[split][f'client_{c}'].parts if part.domain == m)
                 for split in dirichlet_mixture.SPLITS]
        self.assertEqual(sum(taken), n)
        self.assertAllClose(taken, [0.6 * n, 0.2 * n, 0.2 * n], atol=2.0)  # Floors; the rest to test.
    for round_num in range(1, 30):  # Every round trains on the clients' fixed train splits, never unseen ones.
      for client in mixture.round_plan(round_num).clients:
        self.assertEqual(client, plans['train'][client.client_id])
    held_out = mixture.evaluation_plans()
    self.assertEqual([plan.client_id for plan in held_out['personalized'].personalization],
                     [plan.client_id for plan in held_out['personalized'].test])
    self.assertEqual(held_out['personalized'].personalization, tuple(plans['train'].values()))
    unseen = held_out['unseen']
    self.assertLen(unseen.test, 100)
    self.assertEqual([plan.client_id for plan in unseen.personalization], [plan.client_id for plan in unseen.test])
    adapted = sum(part.num_examples for plan in unseen.personalization for part in plan.parts)
    tested = sum(part.num_examples for plan in unseen.test for part in plan.parts)
    self.assertAlmostEqual(adapted / 100000, 0.5, delta=0.002)
    self.assertAlmostEqual(tested / 100000, 0.5, delta=0.002)
    for own, test in zip(unseen.personalization, unseen.test):  # The halves are disjoint ranges of each source.
      for a in own.parts:
        for b in (b for b in test.parts if b.source_id == a.source_id):
          self.assertTrue(a.skip + a.num_examples <= b.skip or b.skip + b.num_examples <= a.skip)

  def test_splits_are_disjoint_complete_and_round_independent(self):
    data = [tff.simulation.datasets.TestClientData({f'b0_{i}': collections.OrderedDict(
        x=np.zeros([40, 4], np.float32), y=np.zeros([40], np.int32), id=np.arange(40) + 100 * i)
        for i in range(6)})]
    task = task_lib.Task(name='t', train_data=data, client_sizes=[{f'b0_{i}': 40 for i in range(6)}], test_data=[],
                         test_sizes=[], batch_fn=lambda b: b, model_fn=None, num_classes=3, mode_names=('a',))
    ids, sizes = [sorted(data[0].client_ids)], [{f'b0_{i}': 40 for i in range(6)}]
    mixture = self._build(ids, sizes)
    task = task.with_domains(mixture.domains(['a'], 3))
    spec = tff.simulation.baselines.ClientSpec(num_epochs=1, batch_size=7)

    def train_examples(client_id, shuffle_seed):
      plan = next(p for p in mixture.split_plans('train') if p.client_id == client_id)
      return sorted((int(raw['id']), int(domain))
                    for raw, domain in task.plan_dataset(plan, spec, shuffle_seed).unbatch().as_numpy_iterator())

    def held_out_examples(split, client_id):
      plan = next(p for p in mixture.split_plans(split) if p.client_id == client_id)
      return sorted((int(e['id']), int(e['mode'])) for e in task.held_out_dataset([plan], 7).unbatch()
                    .as_numpy_iterator())

    for c in range(6):
      client_id = f'client_{c}'
      train = train_examples(client_id, shuffle_seed=(0, 1))
      self.assertEqual(train, train_examples(client_id, shuffle_seed=(0, 9)))  # Another round, the same split.
      examples = train + held_out_examples('validation', client_id) + held_out_examples('test', client_id)
      self.assertEqual(sorted(i for i, _ in examples), list(np.arange(40) + 100 * c))  # Disjoint and complete.
      domains = [d for _, d in examples]
      self.assertEqual([domains.count(m) for m in (0, 1)], list(mixture.component_counts[c]))
    for batch in task.held_out_dataset(mixture.split_plans('test'), 3).as_numpy_iterator():
      self.assertLen(set(batch['id'] // 100), 1)  # Every batch holds one client's examples.

    # Tuning batches (shuffle_seed): the same examples, the domains mixed instead of one after another, an order of
    # the seed alone, a new order each pass.
    for plan in mixture.split_plans('train'):
      in_parts = [int(e['mode']) for e in task.held_out_dataset([plan], 7).unbatch().as_numpy_iterator()]
      if min(in_parts.count(0), in_parts.count(1)) >= 3:
        break
    self.assertEqual(in_parts, sorted(in_parts))  # Without a seed: part after part.
    shuffled = lambda seed: [(int(e['id']), int(e['mode'])) for e in task.held_out_dataset(
        [plan], 7, shuffle_seed=seed).repeat(2).unbatch().as_numpy_iterator()]
    first = shuffled(3)
    self.assertEqual(first, shuffled(3))
    self.assertNotEqual(first, shuffled(4))
    one_pass = len(in_parts)
    self.assertEqual(sorted(first[:one_pass]), sorted(first[one_pass:]))
    self.assertNotEqual(first[:one_pass], first[one_pass:])
    self.assertEqual(sorted(m for _, m in first[:one_pass]), in_parts)
    self.assertNotEqual([m for _, m in first[:one_pass]], in_parts)

  def test_transformed_component_is_rot90_flip_invert_with_a_permutation(self):
    ids, sizes = _populations([[10] * 8])
    base, transformed = self._build(ids, sizes).domains(['digits'], 10)
    self.assertTrue(base.is_plain)
    self.assertEqual((transformed.base, transformed.rotation_degrees, transformed.flip, transformed.invert),
                     (0, 90.0, True, True))
    self.assertEqual(sorted(transformed.label_permutation), list(range(10)))
    self.assertNotEqual(transformed.label_permutation, tuple(range(10)))

  def test_no_shift_mixes_equally_and_bad_settings_name_the_flag(self):
    ids, sizes = _populations([[100] * 50])
    config = dirichlet_mixture.Settings()
    flat = _build(config, ids, sizes, clients_per_round=4, seed=5, shift_free=True)
    self.assertAllClose(flat.mixture_weights, np.full((50, 2), 0.5))
    with self.assertRaisesRegex(ValueError, 'component_alpha must be > 0'):
      dirichlet_mixture.Settings(component_alpha=0.0).validate(scenario.Schedule(4, 5))
    with self.assertRaisesRegex(ValueError, 'dirichlet_components must be one of'):
      dirichlet_mixture.Settings(dirichlet_components='both').validate(scenario.Schedule(4, 5))
    with self.assertRaisesRegex(ValueError, '--clients_per_round must be between 1 and the training clients'):
      _build(config, ids, sizes, clients_per_round=60, seed=5)


class PlanDatasetTest(tf.test.TestCase):

  def test_parts_of_one_source_split_it_disjointly(self):
    data = [tff.simulation.datasets.TestClientData({'c0': collections.OrderedDict(
        x=np.arange(20, dtype=np.float32)[:, None], y=np.zeros([20], np.int32))})]
    task = task_lib.Task(name='t', train_data=data, client_sizes=[{'c0': 20}], test_data=[], test_sizes=[],
                         batch_fn=lambda b: b, model_fn=None, num_classes=1, mode_names=('a',))
    task = task.with_domains([domains_lib.Domain('a', 0), domains_lib.Domain('b', 0)])
    plan = scenario.ClientPlan('c0', (scenario.Part(0, 'c0', 13), scenario.Part(1, 'c0', 7, skip=13)))
    spec = tff.simulation.baselines.ClientSpec(num_epochs=2, batch_size=5)
    elements = list(task.plan_dataset(plan, spec, shuffle_seed=(0, 1)).unbatch().as_numpy_iterator())
    by_domain = {d: sorted(float(raw['x'][0]) for raw, domain in elements if domain == d) for d in (0, 1)}
    self.assertLen(by_domain[0], 26)
    self.assertLen(by_domain[1], 14)
    self.assertEqual(sorted(set(by_domain[0]) | set(by_domain[1])), list(np.arange(20.0)))  # Disjoint, complete.
    self.assertEqual(by_domain[0], sorted(list(set(by_domain[0])) * 2))  # The same 13 examples in both epochs.

  def test_examples_carry_their_domain_in_the_planned_counts(self):
    def base(offset, size):
      return {f'c{i}': collections.OrderedDict(x=np.full([size, 2], offset + i, np.float32),
                                               y=np.zeros([size], np.int32)) for i in range(3)}
    data = [tff.simulation.datasets.TestClientData(base(0, 12)), tff.simulation.datasets.TestClientData(base(100, 9))]
    task = task_lib.Task(name='t', train_data=data, client_sizes=[{f'c{i}': 12 for i in range(3)},
                                                                   {f'c{i}': 9 for i in range(3)}],
                         test_data=[], test_sizes=[], batch_fn=lambda b: b, model_fn=None, num_classes=1)
    plan = scenario.ClientPlan('client_0', (scenario.Part(0, 'c2', 5), scenario.Part(1, 'c1', 4)))
    spec = tff.simulation.baselines.ClientSpec(num_epochs=2, batch_size=3)
    elements = list(task.plan_dataset(plan, spec, shuffle_seed=(0, 7)).unbatch().as_numpy_iterator())
    self.assertLen(elements, 18)  # (5 + 4) examples, 2 epochs.
    for raw, domain in elements:
      self.assertEqual(raw['x'][0], 2.0 if domain == 0 else 101.0)  # Each from its planned source.
    self.assertEqual(sum(domain == 0 for _, domain in elements), 10)
    again = list(task.plan_dataset(plan, spec, shuffle_seed=(0, 7)).unbatch().as_numpy_iterator())
    self.assertEqual([d for _, d in elements], [d for _, d in again])

  def test_label_weights_thin_relative_to_the_labels_the_source_holds(self):
    labels = np.arange(4000, dtype=np.int32) % 2  # Labels 0 and 1 only, of three classes.
    data = [tff.simulation.datasets.TestClientData({'c0': collections.OrderedDict(
        x=np.zeros([4000, 1], np.float32), y=labels)})]
    task = task_lib.Task(name='t', train_data=data, client_sizes=[{'c0': 4000}], test_data=[], test_sizes=[],
                         batch_fn=lambda b: b, model_fn=None, num_classes=3)
    plan = scenario.ClientPlan('c0', (scenario.Part(0, 'c0', label_weights=(0.1, 0.2, 0.7)),))
    spec = tff.simulation.baselines.ClientSpec(num_epochs=1, batch_size=100)
    kept = np.concatenate([raw['y'] for raw, _ in
                           task.plan_dataset(plan, spec, shuffle_seed=(0, 2)).as_numpy_iterator()])
    # Label 2 (the largest weight) is absent: label 1 is kept always, label 0 with probability 0.1 / 0.2.
    self.assertEqual(np.sum(kept == 1), 2000)
    self.assertAlmostEqual(np.sum(kept == 0), 1000, delta=4 * np.sqrt(2000 * 0.25))

  def test_thinning_is_per_part_and_keeps_the_same_examples_in_every_round(self):
    # Two sources of 2,000 examples with labels 0 and 1 in equal shares; the first part keeps label 0 with
    # probability 0.25 / 1, the second part (other weights, another source) label 1 with probability 0.5 / 1.
    data = [tff.simulation.datasets.TestClientData({c: collections.OrderedDict(
        x=np.arange(2000, dtype=np.float32)[:, None] + offset, y=np.arange(2000, dtype=np.int32) % 2)
        for c, offset in (('c0', 0), ('c1', 10000))})]
    task = task_lib.Task(name='t', train_data=data, client_sizes=[{'c0': 2000, 'c1': 2000}], test_data=[],
                         test_sizes=[], batch_fn=lambda b: b, model_fn=None, num_classes=2)
    spec = tff.simulation.baselines.ClientSpec(num_epochs=1, batch_size=100)

    def kept(label_seed: int, shuffle_seed: tuple[int, int]) -> np.ndarray:
      plan = scenario.ClientPlan('c', (scenario.Part(0, 'c0', label_weights=(0.2, 0.8), label_seed=label_seed),
                                       scenario.Part(0, 'c1', label_weights=(0.6, 0.3), label_seed=label_seed)))
      batches = task.plan_dataset(plan, spec, shuffle_seed).as_numpy_iterator()
      return np.concatenate([raw['x'][:, 0] for raw, _ in batches]).astype(int)

    first = kept(label_seed=1, shuffle_seed=(0, 2))
    counts = {(source, label): np.sum((first // 10000 == source) & (first % 2 == label)) for source in (0, 1)
              for label in (0, 1)}
    self.assertEqual((counts[0, 1], counts[1, 0]), (1000, 1000))  # Each part's most weighted label is all kept.
    for source, label, p in ((0, 0, 0.25), (1, 1, 0.5)):
      self.assertAlmostEqual(counts[source, label], 1000 * p, delta=4 * np.sqrt(1000 * p * (1 - p)))
    self.assertCountEqual(kept(label_seed=1, shuffle_seed=(0, 3)), first)  # Another round: the same examples.
    self.assertNotEqual(set(kept(label_seed=4, shuffle_seed=(0, 2))), set(first))

  def test_a_client_of_one_domain_gets_the_periodic_pipeline(self):
    data = [tff.simulation.datasets.TestClientData({'c0': collections.OrderedDict(
        x=np.arange(10, dtype=np.float32)[:, None], y=np.zeros([10], np.int32))})]
    task = task_lib.Task(name='t', train_data=data, client_sizes=[{'c0': 10}], test_data=[], test_sizes=[],
                         batch_fn=lambda b: b, model_fn=None, num_classes=1)
    spec = tff.simulation.baselines.ClientSpec(num_epochs=1, batch_size=4)
    planned = task.plan_dataset(scenario.ClientPlan('c0', (scenario.Part(0, 'c0'),)), spec, shuffle_seed=(0, 3))
    direct = task.client_dataset(0, 'c0', spec, shuffle_seed=(0, 3))
    for a, b in zip(planned.as_numpy_iterator(), direct.as_numpy_iterator()):
      self.assertAllEqual(a[0]['x'], b[0]['x'])


if __name__ == '__main__':
  tf.test.main()
