"""Metrics of how a method copes with shifts, computed from an accuracy series (metrics.csv) alone.

Windows (ShiftEx, Bhope et al., 2025; Section 6): a run is cut into windows at the rounds where the
distribution shifts. For window w > 1, with `accuracies` the evaluated accuracy per round:
  pre-shift accuracy   the accuracy at the last evaluated round of window w - 1 (`pre_shift='last'`, the
                       our reading [R]) or its maximum over window w - 1 (`pre_shift='max'`, the other reading
                       its open question 14 names);
  drop                 pre-shift accuracy - the accuracy at the first evaluated round of window w (negative when
                       accuracy rises across the shift);
  recovery rounds      rounds from the window's first round to the first evaluated round whose accuracy is at least
                       95% of the pre-shift accuracy (0: already there at the first evaluation); None when it never
                       gets there within the window (the paper's "> 51");
  max                  the highest accuracy evaluated within window w.
Window 1 has no pre-shift accuracy: only its max.

Forgetting on recurring concepts (beyond the five papers, as FedDrift and FedCCFA measure it): for a concept trained in
an earlier phase and seen again later, forgetting = the best accuracy on that concept's test data while it was last
trained minus its accuracy when it comes back (at the first evaluated round of its return), i.e. what was lost in
between. From a run's metrics.csv rows (`concept_forgetting`), the concept trained at an evaluation is the one with
the largest `concept_share_<j>` of the round, and a concept's accuracy is the mean of its domains' test accuracies
(one domain per base population).

Mixture drift (pFedEM, Chen et al.; Section V and Table I): the stability of a method under a
mixture that keeps drifting is the standard deviation of its per-round test accuracy over the last two of the run's
cycles (`std_over_last_cycles`, population standard deviation over the evaluations in rounds
t > T (1 - 2 / cycles)); how well it learns the drift is the Pearson correlation over rounds between a learned
mixture weight and the imposed share of base 0 (Figure 4, `share_correlation`). The components a method learns are
unlabelled: the learned share is that of the component matched to base 0 once for the whole run, by the run's
training routing counts (`routing_summary.run_matching`, the matching `train_routing_accuracy_run_matched` uses),
and the correlation keeps its sign (a component that moves against the share scores below 0). Taking the largest
correlation over components instead would be |corr| for K = 2 (the shares sum to one), above 0 for pure noise.

What a correlation of noise reaches (`share_correlation_floor`): the 95th percentile of |corr| between the imposed
series and 2,000 Gaussian random walks of the same length (seeded). Random walks wander slowly, as learned shares
do, so their correlation with a smooth schedule is far from 0 by chance; a shuffled series, whose neighbours are
independent, would give a much lower and misleading floor. A share correlation is evidence of tracking only above it.

Detection (the ShiftEx paper's detector, scored against the simulation's truth; `detection_summary`): over a run's
census checks, the share of the parties whose regime changed that were flagged (by either test, and by each) and the
share of the others that were (false alarms), and the first share per severity (1-5) of the regime moved to: a power
curve. `census_checked` lists per census round after W0 the parties that reported (`scope`) and those checked
(`checked`: a party is checked when it holds a sample of an earlier window); `unchecked` sums the difference, 0 when
every party of every census was checked, and then the rates are over every party that moved. The assignment against the true regime (`regime_ari`): per window after W0, the adjusted Rand index of the
training parties' experts against their regimes (the window's training routing counts, domains pooled by regime, so
the two bases of one regime count as one class), the measure the regimes' experts are meant to recover.
"""

import dataclasses
from typing import Optional, Sequence

import numpy as np

from algorithms.core import routing
from experiment.core import routing_summary

RECOVERY_FRACTION = 0.95
PRE_SHIFT_READINGS = ('last', 'max')


@dataclasses.dataclass(frozen=True)
class WindowMetrics:
  window: int
  first_round: int
  max_accuracy: float
  drop: Optional[float] = None
  recovery_rounds: Optional[int] = None
  recovered: Optional[bool] = None


def window_metrics(rounds: Sequence[int], accuracies: Sequence[float], window_starts: Sequence[int],
                   pre_shift: str = 'last') -> list[WindowMetrics]:
  """Drop, recovery time and max accuracy of each window.

  Args:
    rounds: The evaluated rounds, increasing.
    accuracies: The accuracy at each of them.
    window_starts: The first round of every window, increasing, the first <= rounds[0].
    pre_shift: 'last' or 'max' (module docstring).
  """
  if pre_shift not in PRE_SHIFT_READINGS:
    raise ValueError(f'pre_shift must be one of {", ".join(PRE_SHIFT_READINGS)}; got {pre_shift!r}.')
  bounds = list(window_starts) + [float('inf')]
  windows = [[(r, a) for r, a in zip(rounds, accuracies) if bounds[w] <= r < bounds[w + 1]]
             for w in range(len(window_starts))]
  results = []
  for w, points in enumerate(windows):
    if not points:
      continue
    best = max(a for _, a in points)
    previous = windows[w - 1] if w > 0 else []
    if not previous:
      results.append(WindowMetrics(w + 1, window_starts[w], best))
      continue
    before = previous[-1][1] if pre_shift == 'last' else max(a for _, a in previous)
    recovered_at = next((r for r, a in points if a >= RECOVERY_FRACTION * before), None)
    results.append(WindowMetrics(
        w + 1, window_starts[w], best, drop=before - points[0][1],
        recovery_rounds=None if recovered_at is None else recovered_at - window_starts[w],
        recovered=recovered_at is not None))
  return results


def forgetting(concept_schedule: Sequence[int], accuracies: dict[int, Sequence[float]]) -> dict[int, float]:
  """Per concept that recurs, the accuracy lost between its last training phase and its return.

  Args:
    concept_schedule: The concept trained at each evaluation (one entry per evaluation, in order).
    accuracies: concept -> its test accuracy at each evaluation (same length as `concept_schedule`).

  Returns:
    concept -> forgetting, averaged over the concept's returns; concepts that never return are left out.
  """
  lost = {}
  phase_start = 0
  phases = []  # (concept, first index, last index) of each phase of constant concept.
  for index in range(1, len(concept_schedule) + 1):
    if index == len(concept_schedule) or concept_schedule[index] != concept_schedule[phase_start]:
      phases.append((concept_schedule[phase_start], phase_start, index - 1))
      phase_start = index
  for position, (concept, first, _) in enumerate(phases):
    earlier = [phase for phase in phases[:position] if phase[0] == concept]
    if not earlier:
      continue
    _, last_first, last_last = earlier[-1]
    best = max(accuracies[concept][last_first:last_last + 1])
    lost.setdefault(concept, []).append(best - accuracies[concept][first])
  return {concept: sum(values) / len(values) for concept, values in lost.items()}


def concept_forgetting(rows: Sequence[dict], concept_columns: Sequence[Sequence[str]]) -> dict[int, float]:
  """`forgetting` from metrics.csv rows of a concept-drift run.

  Args:
    rows: metrics.csv rows (dicts); those with `test_accuracy` are the evaluations.
    concept_columns: Per concept j, the test-accuracy columns of its domains.
  """
  evaluated = [row for row in rows if 'test_accuracy' in row]
  schedule = [max(range(len(concept_columns)), key=lambda j, row=row: row[f'concept_share_{j}'])
              for row in evaluated]
  accuracies = {j: [sum(row[column] for column in columns) / len(columns) for row in evaluated]
                for j, columns in enumerate(concept_columns)}
  return forgetting(schedule, accuracies)


def std_over_last_cycles(rounds: Sequence[int], accuracies: Sequence[float], total_rounds: int, num_cycles: float,
                         cycles: float = 2) -> float:
  """Population standard deviation of `accuracies` at the `rounds` of the last `cycles` of `num_cycles` cycles
  over `total_rounds` (all of them when the run has fewer cycles)."""
  start = total_rounds * (1 - cycles / num_cycles)
  return float(np.std([a for r, a in zip(rounds, accuracies) if r > start]))


def share_correlation(rows: Sequence[dict]) -> Optional[float]:
  """The signed Pearson correlation over `rows` (metrics.csv, one per round) between the learned share of the
  component matched to base 0 for the run (`tracking_share`) and `scheduled_share_0`; None without learned or
  scheduled shares or routing counts, or when a series is constant (no correlation)."""
  column = tracking_share(rows)
  if column is None or any('scheduled_share_0' not in row or column not in row for row in rows):
    return None
  shares, imposed = (np.array([row[key] for row in rows]) for key in (column, 'scheduled_share_0'))
  if shares.std() == 0 or imposed.std() == 0:
    return None
  return float(np.corrcoef(shares, imposed)[0, 1])


def tracking_share(rows: Sequence[dict], truth: str = 'scheduled_share_0') -> Optional[str]:
  """The `learned_share_<k>` column of the component k that the run's training routing counts match to base 0
  (`routing_summary.run_matching`), or None without learned shares, the `truth` column or counts."""
  learned = {key for row in rows for key in row if key.startswith('learned_share_')}
  if not learned or any(truth not in row for row in rows):
    return None
  counts = routing_summary.routing_counts(list(rows))
  if counts is None or not counts.sum():
    return None
  modes, components = routing_summary.run_matching(counts)
  matched = [f'learned_share_{k}' for mode, k in zip(modes, components) if mode == 0]
  return matched[0] if matched and matched[0] in learned else None


def share_correlation_floor(rows: Sequence[dict], quantile: float = 0.95, samples: int = 2000,
                            seed: int = 0) -> Optional[float]:
  """The `quantile` of |corr| between the run's `scheduled_share_0` series and `samples` Gaussian random walks of
  its length (module docstring); None without a non-constant schedule."""
  if not rows or any('scheduled_share_0' not in row for row in rows):
    return None
  imposed = np.array([row['scheduled_share_0'] for row in rows])
  if imposed.std() == 0:
    return None
  walks = np.cumsum(np.random.default_rng(seed).normal(size=(samples, len(imposed))), axis=1)
  walks -= walks.mean(axis=1, keepdims=True)
  centered = imposed - imposed.mean()
  correlations = walks @ centered / (np.linalg.norm(walks, axis=1) * np.linalg.norm(centered))
  return float(np.quantile(np.abs(correlations), quantile))


def detection_summary(rows: Sequence[dict], severities: Sequence[int]) -> Optional[dict]:
  """Detection and false-alarm rates of a run's census checks (module docstring), None without checks.
  `severities[i]` is the corruption severity of domain i (0: uncorrupted)."""
  total = lambda key: float(sum(row.get(key, 0.0) for row in rows))
  if total('true_shifts') + total('stable_checks') == 0:
    return None
  rate = lambda part, whole: total(part) / total(whole) if total(whole) else None
  censuses = [{'round': int(row['round']), 'scope': row['census_reporters'], 'checked': row.get('census_checked', 0.0)}
              for row in rows if row.get('census_reporters', 0.0) > 0]
  summary = {'census_checked': censuses, 'unchecked': sum(c['scope'] - c['checked'] for c in censuses),
             'checks_moved': total('true_shifts'), 'checks_stayed': total('stable_checks'),
             'detection_rate': rate('detected_shifts', 'true_shifts'),
             'false_alarm_rate': rate('false_alarms', 'stable_checks')}
  for test in ('covariate', 'label'):
    summary[f'detection_rate_{test}'] = rate(f'detected_{test}', 'true_shifts')
    summary[f'false_alarm_rate_{test}'] = rate(f'false_alarms_{test}', 'stable_checks')
  power = {}
  for severity in sorted(set(severities) - {0}):
    domains = [i for i, s in enumerate(severities) if s == severity]
    moved = sum(total(f'moved_{i}') for i in domains)
    if moved:
      power[str(severity)] = {'moved': moved, 'detection_rate': sum(total(f'found_{i}') for i in domains) / moved}
  summary['detection_rate_by_severity'] = power
  return summary


def regime_ari(rows: Sequence[dict], window_starts: Sequence[int], regimes: Sequence[int]) -> Optional[dict]:
  """Per window after W0, the ARI of the training parties' experts against their regimes (`regimes[i]`: the
  regime of domain i), and their mean; None without routing counts."""
  counts = routing_summary.routing_counts(list(rows))
  if counts is None:
    return None
  rounds = np.array([int(row['round']) for row in rows])
  pooled = np.zeros([max(regimes) + 1, len(regimes)])
  pooled[list(regimes), range(len(regimes))] = 1.0  # [regimes, domains]
  per_window = []
  for start, end in zip(window_starts[1:], list(window_starts[2:]) + [rounds.max() + 1]):
    confusion = pooled @ counts[(rounds >= start) & (rounds < end)].sum(0)  # [regimes, branches]
    per_window.append(float(routing.adjusted_rand_index(confusion)) if confusion.sum() else None)
  scored = [value for value in per_window if value is not None]
  return {'per_window': per_window, 'mean': float(np.mean(scored)) if scored else None}
