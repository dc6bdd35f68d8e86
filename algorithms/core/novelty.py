"""Novelty detection scores' quality: AUROC, average precision and max-F1 (Wu et al., 2023, Table 4).

Examples of the training distribution are the negatives and novel ones (an unseen component, a transformed domain)
the positives; a score is higher for what looks more novel. FedGMM scores with its density, -log P(z) =
-log sum_{m1,m2} pi(m1, m2) N(z; mu_m1, Sigma_m1) (the marginal, with the global pi);
the baseline every other method gets is the max-softmax score of Hendrycks and Gimpel / Liu et al. 2020,
1 - max_y P(y | x) of the method's test prediction (branches averaged).

  AUROC      P(score of a novel example > score of a known one) (+ 1/2 P(tie)), the Mann-Whitney statistic
  AP         sum_k (R_k - R_{k-1}) P_k over the thresholds at each distinct score (scikit-learn's definition)
  max-F1     max over thresholds of 2 P R / (P + R)
"""

import numpy as np
from scipy import stats


def _precision_recall(known: np.ndarray, novel: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  """Precision and recall when flagging scores >= each distinct threshold, thresholds descending."""
  scores = np.concatenate([known, novel])
  labels = np.concatenate([np.zeros(len(known)), np.ones(len(novel))])
  order = np.argsort(-scores, kind='stable')
  scores, labels = scores[order], labels[order]
  last_of_each = np.r_[np.nonzero(np.diff(scores))[0], len(scores) - 1]
  true_positives = np.cumsum(labels)[last_of_each]
  flagged = last_of_each + 1
  return true_positives / flagged, true_positives / len(novel)


def novelty_metrics(known_scores, novel_scores) -> dict[str, float]:
  """`novelty_auroc`, `novelty_average_precision`, `novelty_max_f1` of scores [N_known] and [N_novel]."""
  known, novel = np.asarray(known_scores, np.float64), np.asarray(novel_scores, np.float64)
  ranks = stats.rankdata(np.concatenate([known, novel]))
  auroc = (ranks[len(known):].sum() - len(novel) * (len(novel) + 1) / 2) / (len(known) * len(novel))
  precision, recall = _precision_recall(known, novel)
  average_precision = float(np.sum(np.diff(np.r_[0.0, recall]) * precision))
  f1 = np.where(precision + recall > 0, 2 * precision * recall / np.maximum(precision + recall, 1e-300), 0.0)
  return {'novelty_auroc': float(auroc), 'novelty_average_precision': average_precision,
          'novelty_max_f1': float(f1.max())}
