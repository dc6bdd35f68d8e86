"""Training routing scored over a whole run under one matching of modes to branches.

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
"""

import re
from typing import Optional

import numpy as np
from scipy import optimize

from algorithms.core import metric_names

_COUNT = re.compile(re.escape(metric_names.ROUTING_COUNT_PREFIX) + r'(\d+)_(\d+)')


def routing_counts(rows: list[dict]) -> Optional[np.ndarray]:
  """The per-round counts [rounds, modes, branches] of `rows` (metrics.csv rows), None without count columns."""
  matches = [(_COUNT.fullmatch(key), key) for key in (rows[0] if rows else ())]
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
  """The module docstring's two scores of metrics.csv `rows` (empty without count columns or clients)."""
  counts = routing_counts(rows)
  if counts is None or not counts.sum():
    return {}
  modes, branches = run_matching(counts)
  last_round = max(row['round'] for row in rows)
  last_period = np.array([row['round'] > last_round - period for row in rows])
  matched = lambda c: float(c[:, modes, branches].sum() / max(c.sum(), 1.0))
  return {'train_routing_accuracy_run_matched': matched(counts),
          'train_routing_accuracy_run_matched_last_period': matched(counts[last_period])}
