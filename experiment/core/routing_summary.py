"""Routing scored over a whole run under one matching of modes to branches: the clients' in training, the test
examples' at evaluation.

Every routing method reports, per round, its clients' counts by true mode and trained branch
(`train_routing_count_<mode>_<branch>`, `algorithms.core.routing.train_routing_metrics`). Its per-round
`train_routing_accuracy` of methods without a temporal prior takes the best matching of that round alone, so branches
that swap meaning from round to round still score high. Here the matching is fixed for the run: the one-to-one
assignment of modes to branches with the most clients over all rounds (`scipy.optimize.linear_sum_assignment`;
with more modes than branches some modes get none, and their clients count as misrouted). Under it:

  train_routing_accuracy_run_matched              clients routed to their mode's branch over all rounds;
  train_routing_accuracy_run_matched_last_period  the same over the rounds of the last period.

Floors: a method that trains every client on one branch scores the largest mode's share (1/K for K balanced modes); a
method whose branches swap meaning half of the time scores about 0.5 where the per-round matching scores 1. For
methods with a temporal prior the branches' meanings are fixed (branch k is mode k) and their
`train_routing_accuracy` uses no matching; beside it this score tells a method that found the modes but learned them
with swapped labels (high here, low there) from one that never separated them (low in both).

The same for the test examples of every evaluation (`routing_count_<domain>_<branch>`,
`algorithms.core.evaluation.routed_evaluation`), matched once over all evaluations:

  routing_accuracy_run_matched              test examples routed to their domain's branch over all evaluations;
  routing_accuracy_run_matched_last_period  the same over the evaluations of the last period.

Beside `routing_accuracy` (the prior's orientation for FedTEM and FedTKM: branch k is mode k) it separates "finds
the modes" (high here) from "orients them as its prior says" (high there too).
"""

import re
from typing import Optional

import numpy as np
from scipy import optimize

from algorithms.core import metric_names


def routing_counts(rows: list[dict], prefix: str = metric_names.ROUTING_COUNT_PREFIX) -> Optional[np.ndarray]:
  """The per-row counts [rows, modes, branches] of the `<prefix><mode>_<branch>` columns of `rows` (metrics.csv
  rows; a row without them counts 0), None without count columns."""
  pattern = re.compile(re.escape(prefix) + r'(\d+)_(\d+)')
  keys = {key for row in rows for key in row}
  matches = [(pattern.fullmatch(key), key) for key in sorted(keys)]
  cells = [(int(match.group(1)), int(match.group(2)), key) for match, key in matches if match]
  if not cells:
    return None
  counts = np.zeros([len(rows), max(c[0] for c in cells) + 1, max(c[1] for c in cells) + 1])
  for mode, branch, key in cells:
    counts[:, mode, branch] = [row.get(key, 0.0) for row in rows]
  return counts


def run_matching(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  """(modes, branches): the one-to-one matching with the most clients in counts [rounds, modes, branches] summed."""
  return optimize.linear_sum_assignment(counts.sum(axis=0), maximize=True)


def run_matched_accuracy(rows: list[dict], period: int) -> dict[str, float]:
  """The module docstring's scores of metrics.csv `rows`, training and test (each left out without its count
  columns or with no count)."""
  scores = {}
  last_round = max((row['round'] for row in rows), default=0)
  last_period = np.array([row['round'] > last_round - period for row in rows])
  for prefix, name in ((metric_names.ROUTING_COUNT_PREFIX, 'train_routing_accuracy_run_matched'),
                       (metric_names.TEST_ROUTING_COUNT_PREFIX, 'routing_accuracy_run_matched')):
    counts = routing_counts(rows, prefix)
    if counts is None or not counts.sum():
      continue
    modes, branches = run_matching(counts)
    matched = lambda c: float(c[:, modes, branches].sum() / max(c.sum(), 1.0))
    scores[name] = matched(counts)
    scores[f'{name}_last_period'] = matched(counts[last_period])
  return scores
