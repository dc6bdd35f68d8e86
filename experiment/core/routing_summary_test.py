"""Tests that training and test routing are scored under one matching for the whole run, against brute-force
references."""

import itertools

from absl.testing import absltest
import numpy as np
import tensorflow as tf

from algorithms.core import routing
from experiment.core import routing_summary


def _rows(confusions: list[np.ndarray], best_matching: bool = True) -> list[dict]:
  """metrics.csv rows as the training loop writes them: each round's routing metrics, floats."""
  rows = []
  for round_num, confusion in enumerate(confusions, start=1):
    metrics = routing.train_routing_metrics(tf.constant(confusion, tf.float32), best_matching=best_matching)
    rows.append(dict({key: float(value) for key, value in metrics.items()}, round=float(round_num)))
  return rows


def _brute_force(confusions: list[np.ndarray], last: int) -> tuple[float, float]:
  """Whole-run and last-`last`-rounds accuracy under the matching best for the run, every injection enumerated."""
  total = np.sum(confusions, axis=0)
  modes, branches = total.shape
  matchings = ([list(zip(range(modes), p)) for p in itertools.permutations(range(branches), modes)] if
               modes <= branches else
               [list(zip(p, range(branches))) for p in itertools.permutations(range(modes), branches)])
  best = max(matchings, key=lambda pairs: sum(total[m, b] for m, b in pairs))
  score = lambda counts: sum(counts[:, m, b].sum() for m, b in best) / counts.sum()
  stacked = np.stack(confusions)
  return score(stacked), score(stacked[-last:])


class RoutingSummaryTest(absltest.TestCase):

  def test_branches_that_swap_every_round_score_half_not_one(self):
    kept, swapped = np.array([[6.0, 0.0], [0.0, 4.0]]), np.array([[0.0, 6.0], [4.0, 0.0]])
    rows = _rows([kept, swapped] * 4)
    self.assertTrue(all(row['train_routing_accuracy'] == 1.0 for row in rows))  # Each round's own matching.
    scores = routing_summary.run_matched_accuracy(rows, period=4)
    self.assertAlmostEqual(scores['train_routing_accuracy_run_matched'], 0.5)
    self.assertAlmostEqual(scores['train_routing_accuracy_run_matched_last_period'], 0.5)

  def test_modes_learned_with_swapped_labels_score_one(self):
    rows = _rows([np.array([[0.0, 7.0], [3.0, 0.0]])] * 5, best_matching=False)
    self.assertTrue(all(row['train_routing_accuracy'] == 0.0 for row in rows))
    self.assertAlmostEqual(routing_summary.run_matched_accuracy(rows, period=2)['train_routing_accuracy_run_matched'],
                           1.0)

  def test_one_branch_for_everything_scores_the_largest_mode(self):
    rows = _rows([np.array([[7.0, 0.0], [3.0, 0.0]])] * 3)
    self.assertAlmostEqual(routing_summary.run_matched_accuracy(rows, period=3)['train_routing_accuracy_run_matched'],
                           0.7)

  def test_matches_brute_force_on_random_counts(self):
    rng = np.random.default_rng(3)
    for modes, branches in ((2, 2), (2, 3), (3, 2), (4, 4), (5, 3)):
      confusions = [rng.integers(0, 6, size=(modes, branches)).astype(float) for _ in range(9)]
      scores = routing_summary.run_matched_accuracy(_rows(confusions), period=4)
      whole, last = _brute_force(confusions, last=4)
      self.assertAlmostEqual(scores['train_routing_accuracy_run_matched'], whole, places=6)
      self.assertAlmostEqual(scores['train_routing_accuracy_run_matched_last_period'], last, places=6)

  def test_test_routing_is_matched_once_over_the_evaluations(self):
    # Evaluations every other round (rows between them have no test counts): modes found but oriented against the
    # prior (every test example of domain d in branch 1 - d) score 0 in routing_accuracy and 1 here.
    rng = np.random.default_rng(4)
    confusions = [np.array([[0.0, 40.0], [60.0, 0.0]]), rng.integers(0, 30, size=(2, 2)).astype(float),
                  np.array([[5.0, 35.0], [50.0, 10.0]])]
    rows = [{'round': 1.0}, {'round': 2.0}, {'round': 3.0}, {'round': 4.0}, {'round': 5.0}, {'round': 6.0}]
    for row, confusion in zip(rows[1::2], confusions):
      row.update({f'routing_count_{d}_{b}': confusion[d, b] for d in range(2) for b in range(2)})
    scores = routing_summary.run_matched_accuracy(rows, period=4)
    whole, last = _brute_force(confusions, last=2)
    self.assertAlmostEqual(scores['routing_accuracy_run_matched'], whole, places=6)
    self.assertAlmostEqual(scores['routing_accuracy_run_matched_last_period'], last, places=6)
    swapped = [{'round': 1.0, 'routing_count_0_0': 0.0, 'routing_count_0_1': 9.0, 'routing_count_1_0': 11.0,
                'routing_count_1_1': 0.0}]
    self.assertEqual(routing_summary.run_matched_accuracy(swapped, period=1)['routing_accuracy_run_matched'], 1.0)

  def test_runs_without_routing_have_no_score(self):
    self.assertEqual(routing_summary.run_matched_accuracy([{'round': 1.0, 'train_accuracy': 0.5}], period=1), {})
    self.assertEqual(routing_summary.run_matched_accuracy([], period=1), {})


if __name__ == '__main__':
  absltest.main()
