"""Tests the window, forgetting and mixture-drift metrics against values worked out by hand on small accuracy series
and against scipy's Pearson correlation; the detection rates by hand and the regime ARI against scikit-learn."""

from absl.testing import absltest
import numpy as np
from scipy import stats
from sklearn import metrics

from experiment.core import shift_metrics


class WindowMetricsTest(absltest.TestCase):

  # Windows start at rounds 1, 6 and 11; evaluated every round.
  ROUNDS = list(range(1, 16))
  ACCURACIES = [0.2, 0.5, 0.7, 0.8, 0.75,    # Window 1: max 0.8, last 0.75.
                0.3, 0.5, 0.7, 0.72, 0.9,    # Window 2: drop 0.75 - 0.3; 95% of 0.75 = 0.7125 first at round 9.
                0.95, 0.9, 0.97, 0.6, 0.7]   # Window 3: rises across the shift (drop -0.05), recovered at once.

  def test_drop_recovery_and_max_by_hand(self):
    metrics = shift_metrics.window_metrics(self.ROUNDS, self.ACCURACIES, [1, 6, 11])
    first, second, third = metrics
    self.assertEqual((first.window, first.max_accuracy, first.drop, first.recovery_rounds), (1, 0.8, None, None))
    self.assertAlmostEqual(second.drop, 0.45)
    self.assertEqual(second.recovery_rounds, 3)  # Round 9 - round 6.
    self.assertTrue(second.recovered)
    self.assertEqual(second.max_accuracy, 0.9)
    self.assertAlmostEqual(third.drop, -0.05)
    self.assertEqual(third.recovery_rounds, 0)
    self.assertEqual(third.max_accuracy, 0.97)

  def test_pre_shift_max_reading_and_no_recovery(self):
    # Pre-shift = the max of window 1 (0.8): 95% is 0.76, which window 2 reaches only at round 10.
    second = shift_metrics.window_metrics(self.ROUNDS, self.ACCURACIES, [1, 6, 11], pre_shift='max')[1]
    self.assertAlmostEqual(second.drop, 0.5)
    self.assertEqual(second.recovery_rounds, 4)
    never = shift_metrics.window_metrics([2, 4, 6, 8], [0.9, 0.9, 0.1, 0.5], [1, 5])[1]
    self.assertIsNone(never.recovery_rounds)
    self.assertFalse(never.recovered)
    self.assertAlmostEqual(never.drop, 0.8)

  def test_sparse_evaluations_count_rounds_from_the_window_start(self):
    # Evaluated every 4 rounds; the window starts at round 9, first evaluated at 12, recovered at 16.
    metrics = shift_metrics.window_metrics([4, 8, 12, 16], [0.5, 0.8, 0.2, 0.79], [1, 9])
    self.assertEqual(metrics[1].recovery_rounds, 7)
    with self.assertRaisesRegex(ValueError, 'pre_shift must be one of'):
      shift_metrics.window_metrics([1], [0.5], [1], pre_shift='mean')


class ForgettingTest(absltest.TestCase):

  def test_recurring_concept_loss_by_hand(self):
    # Concepts A (0), B (1), A, B. A peaks at 0.8 in its first phase and is at 0.5 when it returns: 0.3 lost.
    # B peaks at 0.9, returns at 0.6: 0.3 lost.
    schedule = [0, 0, 1, 1, 0, 0, 1]
    accuracies = {0: [0.6, 0.8, 0.5, 0.4, 0.5, 0.85, 0.7],
                  1: [0.1, 0.1, 0.7, 0.9, 0.5, 0.55, 0.6]}
    self.assertEqual({k: round(v, 6) for k, v in shift_metrics.forgetting(schedule, accuracies).items()},
                     {0: 0.3, 1: 0.3})

  def test_concepts_that_never_return_and_averaging_over_returns(self):
    schedule = [0, 1, 0, 2, 0]
    accuracies = {0: [0.9, 0.5, 0.7, 0.3, 0.4], 1: [0.0] * 5, 2: [0.0] * 5}
    # A returns twice: 0.9 - 0.7 = 0.2, then 0.7 - 0.4 = 0.3 (its best in its last phase was 0.7).
    self.assertEqual({k: round(v, 6) for k, v in shift_metrics.forgetting(schedule, accuracies).items()}, {0: 0.25})

  def test_from_metrics_rows(self):
    # Two bases x two concepts; the trained concept follows the larger share; unevaluated rows are skipped.
    rows = [{'round': 1, 'concept_share_0': 1.0, 'concept_share_1': 0.0},
            {'round': 2, 'concept_share_0': 0.9, 'concept_share_1': 0.1, 'test_accuracy': 0.0,
             'a_c0': 0.8, 'b_c0': 0.6, 'a_c1': 0.1, 'b_c1': 0.1},
            {'round': 4, 'concept_share_0': 0.2, 'concept_share_1': 0.8, 'test_accuracy': 0.0,
             'a_c0': 0.3, 'b_c0': 0.1, 'a_c1': 0.9, 'b_c1': 0.7},
            {'round': 6, 'concept_share_0': 0.7, 'concept_share_1': 0.3, 'test_accuracy': 0.0,
             'a_c0': 0.5, 'b_c0': 0.3, 'a_c1': 0.2, 'b_c1': 0.2}]
    # Concept 0: best 0.7 (mean of 0.8 and 0.6) while trained, 0.4 when it returns.
    forgetting = shift_metrics.concept_forgetting(rows, [['a_c0', 'b_c0'], ['a_c1', 'b_c1']])
    self.assertEqual({k: round(v, 6) for k, v in forgetting.items()}, {0: 0.3})


class MixtureDriftTest(absltest.TestCase):

  def test_std_over_the_last_two_of_three_cycles_by_hand(self):
    # 3 cycles over 12 rounds: the last two are rounds 5-12, evaluated at 6, 8, 10, 12.
    rounds = [2, 4, 6, 8, 10, 12]
    accuracies = [0.0, 1.0, 0.5, 0.7, 0.5, 0.7]  # Mean 0.6 over the last two cycles, deviations +-0.1.
    self.assertAlmostEqual(shift_metrics.std_over_last_cycles(rounds, accuracies, 12, 3), 0.1)
    # With fewer cycles than two, every evaluation counts.
    self.assertAlmostEqual(shift_metrics.std_over_last_cycles(rounds, accuracies, 12, 1.5),
                           np.sqrt(np.mean((np.array(accuracies) - np.mean(accuracies)) ** 2)))

  def test_share_correlation_is_signed_for_the_component_the_run_matches_to_base_0(self):
    rng = np.random.default_rng(0)
    imposed = np.abs(np.sin(np.linspace(0, 3 * np.pi, 40)))
    tracking = 0.8 * imposed + 0.1 * rng.random(40)  # Components are unlabelled: component 1 tracks base 0.

    def rows(base_0_component: int):
      # Training routing counts: most of base 0's clients went to `base_0_component` over the run.
      counts = {f'train_routing_count_0_{base_0_component}': 3.0, f'train_routing_count_0_{1 - base_0_component}': 1.0,
                f'train_routing_count_1_{1 - base_0_component}': 3.0, f'train_routing_count_1_{base_0_component}': 0.0}
      return [{'round': t + 1, 'scheduled_share_0': a, 'learned_share_0': 1 - b, 'learned_share_1': b, **counts}
              for t, (a, b) in enumerate(zip(imposed, tracking))]

    self.assertEqual(shift_metrics.tracking_share(rows(1)), 'learned_share_1')
    self.assertAlmostEqual(shift_metrics.share_correlation(rows(1)), stats.pearsonr(tracking, imposed)[0])
    self.assertGreater(shift_metrics.share_correlation(rows(1)), 0.9)
    # Matched the other way, the share moves against base 0's and the correlation says so.
    self.assertAlmostEqual(shift_metrics.share_correlation(rows(0)), -stats.pearsonr(tracking, imposed)[0])

  def test_the_floor_is_what_random_walks_reach_and_noise_stays_below_it(self):
    imposed = np.abs(np.sin(np.linspace(0, 3 * np.pi, 96)))
    rows = [{'round': t + 1, 'scheduled_share_0': a} for t, a in enumerate(imposed)]
    floor = shift_metrics.share_correlation_floor(rows)
    rng = np.random.default_rng(5)
    walks = np.cumsum(rng.normal(size=(3000, 96)), axis=1)
    reference = np.quantile([abs(stats.pearsonr(walk, imposed)[0]) for walk in walks], 0.95)
    self.assertAlmostEqual(floor, reference, delta=0.03)  # Independent draws: the quantile to sampling error.
    self.assertGreater(floor, 0.3)  # Slowly wandering series correlate with a smooth schedule by chance.
    noise = [abs(stats.pearsonr(walk, imposed)[0]) for walk in np.cumsum(rng.normal(size=(400, 96)), axis=1)]
    self.assertAlmostEqual(np.mean(np.array(noise) > floor), 0.05, delta=0.03)
    self.assertIsNone(shift_metrics.share_correlation_floor([{'scheduled_share_0': 0.5}] * 3))

  def test_no_learned_share_or_a_constant_series_has_no_correlation(self):
    self.assertIsNone(shift_metrics.share_correlation([{'scheduled_share_0': 0.5}, {'scheduled_share_0': 1.0}]))
    constant = [{'scheduled_share_0': 0.5, 'learned_share_0': 0.2}, {'scheduled_share_0': 0.5, 'learned_share_0': 0.4}]
    self.assertIsNone(shift_metrics.share_correlation(constant))
    without_counts = [{'scheduled_share_0': a, 'learned_share_0': a} for a in (0.1, 0.5, 0.9)]
    self.assertIsNone(shift_metrics.share_correlation(without_counts))
    unscheduled = [{'learned_share_0': a, 'train_routing_count_0_0': 1.0} for a in (0.1, 0.5, 0.9)]
    self.assertIsNone(shift_metrics.tracking_share(unscheduled))  # No schedule: nothing to track.



class DetectionTest(absltest.TestCase):

  def test_rates_by_test_and_power_by_severity_by_hand(self):
    # Domains: 0 clean, 1 severity 2, 2 severity 5, 3 severity 2. Two census rounds.
    rows = [dict(round=1, true_shifts=4, detected_shifts=3, stable_checks=10, false_alarms=1, detected_covariate=2,
                 detected_label=2, false_alarms_covariate=1, false_alarms_label=0, moved_1=2, found_1=1, moved_2=2,
                 found_2=2),
            dict(round=2),
            dict(round=3, true_shifts=2, detected_shifts=1, stable_checks=10, false_alarms=0, detected_covariate=0,
                 detected_label=1, false_alarms_covariate=0, false_alarms_label=0, moved_3=2, found_3=1)]
    summary = shift_metrics.detection_summary(rows, [0, 2, 5, 2])
    self.assertEqual((summary['checks_moved'], summary['checks_stayed']), (6, 20))
    self.assertAlmostEqual(summary['detection_rate'], 4 / 6)
    self.assertAlmostEqual(summary['false_alarm_rate'], 1 / 20)
    self.assertAlmostEqual(summary['detection_rate_covariate'], 2 / 6)
    self.assertAlmostEqual(summary['detection_rate_label'], 3 / 6)
    self.assertEqual(summary['detection_rate_by_severity'],
                     {'2': {'moved': 4.0, 'detection_rate': 0.5}, '5': {'moved': 2.0, 'detection_rate': 1.0}})
    self.assertIsNone(shift_metrics.detection_summary([dict(round=1)], [0]))

  def test_regime_ari_pools_the_bases_of_a_regime_and_matches_sklearn(self):
    # Two bases x two regimes: domain b * 2 + r. Window 2 (rounds 3-4): experts follow the regime, not the base.
    rng = np.random.default_rng(0)
    regimes = [0, 1, 0, 1]
    rows, labels = [], {2: ([], [])}
    for round_num in range(1, 5):
      row = {'round': round_num}
      for domain in range(4):
        for branch in range(2):
          count = int(rng.integers(0, 5)) if round_num <= 2 else (4 if branch == regimes[domain] else 1)
          row[f'train_routing_count_{domain}_{branch}'] = float(count)
          if round_num > 2:
            labels[2][0].extend([regimes[domain]] * count)
            labels[2][1].extend([branch] * count)
      rows.append(row)
    result = shift_metrics.regime_ari(rows, [1, 3], regimes)
    self.assertLen(result['per_window'], 1)
    self.assertAlmostEqual(result['per_window'][0], metrics.adjusted_rand_score(*labels[2]), places=6)
    self.assertAlmostEqual(result['mean'], result['per_window'][0])

if __name__ == '__main__':
  absltest.main()
