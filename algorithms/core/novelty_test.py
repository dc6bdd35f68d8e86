"""Novelty metrics against scikit-learn's."""

from absl.testing import absltest
import numpy as np
from sklearn import metrics

from algorithms.core import novelty


class NoveltyMetricsTest(absltest.TestCase):

  def test_match_scikit_learn_with_ties(self):
    rng = np.random.default_rng(0)
    known = np.round(rng.normal(0.0, 1.0, 300), 1)  # Rounded: many ties, within and across the classes.
    novel = np.round(rng.normal(0.8, 1.0, 120), 1)
    labels = np.r_[np.zeros(300), np.ones(120)]
    scores = np.r_[known, novel]
    result = novelty.novelty_metrics(known, novel)
    self.assertAlmostEqual(result['novelty_auroc'], metrics.roc_auc_score(labels, scores), places=10)
    self.assertAlmostEqual(result['novelty_average_precision'], metrics.average_precision_score(labels, scores),
                           places=10)
    precision, recall, _ = metrics.precision_recall_curve(labels, scores)
    f1 = 2 * precision * recall / np.maximum(precision + recall, 1e-300)
    self.assertAlmostEqual(result['novelty_max_f1'], f1.max(), places=10)

  def test_separated_scores_are_perfect_and_equal_ones_are_chance(self):
    perfect = novelty.novelty_metrics([0.0, 0.1, 0.2], [1.0, 2.0])
    self.assertEqual(perfect, {'novelty_auroc': 1.0, 'novelty_average_precision': 1.0, 'novelty_max_f1': 1.0})
    self.assertAlmostEqual(novelty.novelty_metrics(np.zeros(10), np.zeros(5))['novelty_auroc'], 0.5)


if __name__ == '__main__':
  absltest.main()
