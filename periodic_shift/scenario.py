"""What a shift scenario tells the training loop: for every round, which clients take part and which examples of
which domain each one holds.

A *domain* is one base population of the task (the day or night mode, CIFAR-10 or CIFAR-100, a synthetic
component), optionally transformed (`periodic_shift.domains`). A scenario answers, for round t, with a
`RoundPlan`: the participating clients and, for each, its `Part`s, i.e. how many examples of which domain it takes
from which client of that domain's base population. Every example carries its domain index through training and
evaluation (the `mode` feature of `tasks.task`) for simulation metrics only; no method may use it to decide
anything, and methods never see the scenario.

Every random choice of round t is a function of (seed, t) and, per client, of (seed, t, client position), so a
resumed run draws the same data.

A scenario is a module, listed in `periodic_shift.scenarios`, that owns
  NAME:              the name `--scenario` selects;
  Settings:          a frozen dataclass whose fields declared with `utils.settings.setting` are the binary's flags of
                     the same names, and its `validate(schedule)`, raising a one-line ValueError naming the flag for
                     a value no population can make valid;
  LENGTH_DEPENDENCE: why its round t depends on `--total_rounds` (so a finished run cannot be extended), or None;
  HEADLINE_METRIC:   the final metric its paper compares methods by (summary.json's `headline_metric`, the report's
                     first column);
  SMOKE_RUN:         a `SmokeRun`: the flags of a small two-round run that shows the shift, and what such a run
                     must report (the method x scenario matrix test runs every method so);
  run_name(settings, schedule): the scenario's part of a run directory's default name, distinct from every other
                     scenario's;
  build(settings, population, schedule, shift_free): its `Scenario` over the task's `Population`, raising a
                     one-line ValueError when the population cannot provide what the settings ask; `shift_free`
                     (No-Dist-Shift, `--no_shift`) removes the shift.
The rest of the suite reads these declarations and names no scenario.
"""

import abc
import dataclasses
from typing import Callable, Mapping, Optional, Sequence

import numpy as np

from periodic_shift import domains as domains_lib


@dataclasses.dataclass(frozen=True)
class Part:
  """`num_examples` examples (None: all) of domain `domain` from client `source_id` of its base population,
  after skipping `skip` of them, optionally thinned by label. The source's examples are taken in one seeded random
  order per (round, client), so parts of the same source with disjoint [skip, skip + num_examples) ranges hold
  disjoint examples; with `order_seed` the order is that seed's in every round, so ranges are fixed splits of the
  source (train / validation / test)."""
  domain: int
  source_id: str
  num_examples: Optional[int] = None
  skip: int = 0
  label_weights: Optional[tuple[float, ...]] = None  # Keep label y with probability w[y] / max w (source's labels).
  order_seed: Optional[int] = None
  label_seed: int = 0  # The thinning's draws: with one label_seed a source keeps the same examples in every round.


@dataclasses.dataclass(frozen=True)
class ClientPlan:
  """One participating client's data in a round: its parts, in domain order."""
  client_id: str
  parts: tuple[Part, ...]


@dataclasses.dataclass(frozen=True)
class RoundPlan:
  """The participants of one round and what each holds."""
  clients: tuple[ClientPlan, ...]


@dataclasses.dataclass(frozen=True)
class Population:
  """What a task offers a scenario: its base populations' client ids (`client_ids[b]`, base b), each client's
  number of examples (`client_sizes[b][id]`) and the number of labels."""
  client_ids: Sequence[Sequence[str]]
  client_sizes: Sequence[dict[str, int]]
  num_classes: int = 2
  images: bool = False  # Examples are images [H, W, C] (a scenario that corrupts them picks image families).


@dataclasses.dataclass(frozen=True)
class Schedule:
  """The run's settings a scenario plans with: clients per round, the seed, the run's length, the period T of the
  periodic shift (the task's defaults resolved) and the rounds of a window (of a scenario that shifts at window
  boundaries, and of the methods that act per window)."""
  clients_per_round: int
  seed: int
  total_rounds: int = 256
  period: int = 32
  window_rounds: int = 32


# The names scenarios give their held-out clients (`Scenario.evaluation_plans`): every training client's own test
# split (Wu et al., 2023), unseen clients (Wu et al., 2023), every client's own target domain (Tan et al., 2024).
HELD_OUT_NAMES = ('personalized', 'unseen', 'target')


@dataclasses.dataclass(frozen=True)
class HeldOutClients:
  """Clients evaluated on their own held-out data: `test[i]` is client i's test data and `personalization[i]` the
  data the same client may personalize on before that test (its training split; an unseen client's adaptation
  half), never overlapping its test data."""
  test: tuple[ClientPlan, ...]
  personalization: tuple[ClientPlan, ...]


class Scenario(abc.ABC):
  """What the training loop asks of a shift scenario."""

  @property
  @abc.abstractmethod
  def num_domains(self) -> int:
    """K, the number of domains examples are labelled with."""

  def domains(self, base_names: Sequence[str], num_classes: int) -> Optional[tuple[domains_lib.Domain, ...]]:
    """The domains, when they are not the task's untransformed bases (`tasks.task.Task.with_domains`)."""
    del base_names, num_classes  # Unused.
    return None

  @abc.abstractmethod
  def round_plan(self, round_num: int) -> RoundPlan:
    """The clients of round `round_num` and their data; a pure function of (seed, round_num)."""

  @abc.abstractmethod
  def round_metrics(self, round_num: int, plan: RoundPlan) -> dict[str, float]:
    """The true shift of the round, for metrics.csv (e.g. q(t) and the day share of its clients)."""

  def test_weights(self, round_num: int) -> Optional[np.ndarray]:
    """Weights [K] of the per-domain test accuracies in the round's test accuracy, or None (the union test set)."""
    del round_num  # Unused.
    return None

  def evaluation_plans(self) -> dict[str, HeldOutClients]:
    """Per-client held-out data by name (one of `HELD_OUT_NAMES`; e.g. `personalized`: every client's own test
    split), each client's data evaluated in batches of its own; empty when the scenario has only the task's
    centralized test sets."""
    return {}

  def concept_domains(self) -> Optional[list[list[int]]]:
    """Per concept, the domains holding it, for scenarios whose concepts can recur (forgetting); else None."""
    return None

  def census_plan(self, round_num: int) -> Optional[RoundPlan]:
    """At the rounds where every party reports to a method that asks for it (ShiftEx's window boundaries), every
    client of the population with the data it holds in round `round_num` (the round's participants hold the same
    as in `round_plan`); else None. A pure function of (seed, round_num)."""
    del round_num  # Unused.
    return None

  def domain_regimes(self) -> Optional[list[int]]:
    """The regime of every domain, for scenarios whose domains are (base population, regime) pairs; else None."""
    return None

  def window_starts(self) -> Optional[list[int]]:
    """The first round of every window, for scenarios that shift at window boundaries; else None."""
    return None


def binomial_split(source_id: str, size: int, share: float, rng: np.random.Generator, first_domain: int,
                   second_domain: int, first_weights: Optional[tuple[float, ...]] = None,
                   second_weights: Optional[tuple[float, ...]] = None, label_seed: int = 0) -> tuple[Part, ...]:
  """A client's `size` examples split between two domains: Binomial(size, share) of them in `second_domain`,
  the rest in `first_domain`, as disjoint ranges of the source's one shuffled order (empty parts left out)."""
  moved = int(rng.binomial(size, share))
  parts = (Part(first_domain, source_id, size - moved, label_weights=first_weights, label_seed=label_seed),
           Part(second_domain, source_id, moved, skip=size - moved, label_weights=second_weights,
                label_seed=label_seed))
  return tuple(part for part in parts if part.num_examples)


def union_population(base_client_ids: Sequence[Sequence[str]], clients_per_round: int) -> list[tuple[int, str]]:
  """Every client of every base population as (base, client id), for scenarios drawing from their union; raises
  ValueError (naming the flag) unless 1 <= clients_per_round <= their number."""
  clients = [(base, client_id) for base, ids in enumerate(base_client_ids) for client_id in ids]
  if not 1 <= clients_per_round <= len(clients):
    raise ValueError(f'--clients_per_round must be between 1 and the population ({len(clients)}); got '
                     f'{clients_per_round}.')
  return clients


# A run's metrics.csv rows (round by round, float values) and summary.json, as a smoke check reads them.
Rows = Sequence[Mapping[str, float]]


@dataclasses.dataclass(frozen=True)
class SmokeRun:
  """A two-round run of a scenario that shows its shift: on the synthetic task, 3 clients a round, period 2, evaluated
  at round 2, with `flags` (flag name -> value: the scenario's settings, or the run's schedule) on top of the
  defaults.

  `check(rows, summary, shift_free)` is what every method's run so must report whatever the method (a column a
  method may leave out is checked only when present): the problems found, one phrase each, empty when none.
  """
  flags: Mapping[str, object]
  check: Callable[[Rows, Mapping, bool], list[str]]


def share_problems(row: Mapping[str, float], columns: Sequence[str], optional: bool = False) -> list[str]:
  """The problems of `columns` of `row` that should hold shares in [0, 1]: each missing one (unless `optional`) and
  each outside [0, 1]."""
  problems = []
  for column in columns:
    if column not in row:
      if not optional:
        problems.append(f'no {column}')
    elif not 0.0 <= row[column] <= 1.0:
      problems.append(f'{column} {row[column]} is not in [0, 1]')
  return problems


def equality_problems(name: str, actual, expected) -> list[str]:
  """[] when `actual == expected`, else the one problem naming both."""
  return [] if actual == expected else [f'{name} is {actual!r}, expected {expected!r}']
