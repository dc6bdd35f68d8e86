"""Concept drift as a scenario (beyond the five papers, as FedDrift and FedCCFA benchmark it): concepts are label
permutations; every client changes concept at its own change point."""

import dataclasses
from typing import Sequence

import numpy as np

from periodic_shift import domains as domains_lib
from periodic_shift import scenario
from utils import settings

NAME = 'concept_drift'
LENGTH_DEPENDENCE = 'its change points are fractions of --total_rounds'
HEADLINE_METRIC = 'test_accuracy_last_period_mean'
DRIFT_TYPES = ('sudden', 'incremental', 'recurring')


@dataclasses.dataclass(frozen=True)
class Settings:
  """How and when the clients change concept (`ConceptDriftScenario`)."""
  drift_type: str = settings.setting('sudden', 'sudden, incremental or recurring.')
  num_concepts: int = settings.setting(2, 'Concepts (label permutations; 0 = identity).')
  drift_start: float = settings.setting(0.25, 'Earliest change point, fraction of the run.')
  drift_end: float = settings.setting(0.5, 'Latest change point, fraction of the run.')
  drift_length: int = settings.setting(16, 'Rounds an incremental drift takes.')
  concept_period: int = settings.setting(32, 'Rounds each recurring concept lasts.')

  def validate(self, schedule: scenario.Schedule) -> None:
    del schedule  # Unused.
    if self.drift_type not in DRIFT_TYPES:
      raise ValueError(f'--drift_type must be one of {", ".join(DRIFT_TYPES)}; got {self.drift_type!r}.')
    if self.num_concepts < 2:
      raise ValueError(f'--num_concepts must be >= 2; got {self.num_concepts}.')
    if not 0.0 <= self.drift_start <= self.drift_end <= 1.0:
      raise ValueError(f'--drift_start and --drift_end need 0 <= drift_start <= drift_end <= 1; got '
                       f'{self.drift_start:g}, {self.drift_end:g}.')
    if self.drift_length < 1 or self.concept_period < 1:
      raise ValueError(f'--drift_length and --concept_period must be >= 1; got {self.drift_length}, '
                       f'{self.concept_period}.')


def run_name(config: Settings, schedule: scenario.Schedule) -> str:
  del config, schedule  # Unused.
  return NAME


def build(config: Settings, population: scenario.Population, schedule: scenario.Schedule,
          shift_free: bool = False) -> 'ConceptDriftScenario':
  """Every client of every base, each changing concept at its own change point (never without the shift)."""
  return ConceptDriftScenario(population.client_ids, population.client_sizes, schedule.clients_per_round, config,
                              schedule.total_rounds, schedule.seed, shift_free)


class ConceptDriftScenario(scenario.Scenario):
  """Concept drift: the same inputs get other labels. Concept j relabels y as P_j[y] (P_0 the identity, the others
  seeded random permutations); the domains are (base b, concept j), index b * C + j.

  Every client of every base population takes part (m per round, uniformly without replacement from the union)
  and has its own change point tau_c, uniform over the rounds [drift_start, drift_end] x total_rounds:
  - `sudden`: concept 0 before tau_c, concept 1 from tau_c on;
  - `incremental`: over drift_length rounds from tau_c the client's share of concept 1 grows linearly from 0 to 1;
    its examples are split by a binomial draw into disjoint concept-0 and concept-1 parts;
  - `recurring`: from tau_c the client cycles through the concepts 1, 2, ..., C - 1, 0, 1, ..., each held for
    concept_period rounds, so concepts come back and their forgetting can be measured.
  `shift_free` (No-Dist-Shift): every client stays in concept 0. `concept_share_<j>` is the round's share of
  examples in concept j.
  """

  def __init__(self, base_client_ids: Sequence[Sequence[str]], base_client_sizes: Sequence[dict[str, int]],
               clients_per_round: int, config: Settings, total_rounds: int, seed: int, shift_free: bool = False):
    self._clients = scenario.union_population(base_client_ids, clients_per_round)
    self._sizes = base_client_sizes
    self._num_bases = len(base_client_ids)
    self._clients_per_round = clients_per_round
    self._config = config
    self._seed = seed
    self._shift_free = shift_free
    rng = np.random.default_rng([seed, 5])
    first, last = config.drift_start * total_rounds, config.drift_end * total_rounds
    self._change_points = np.floor(rng.uniform(first, last + 1, size=len(self._clients))).astype(int)

  @property
  def num_domains(self) -> int:
    return self._num_bases * self._config.num_concepts

  def concept_domains(self) -> list[list[int]]:
    """Concept j's domains: (b, j) for every base b."""
    concepts = self._config.num_concepts
    return [[b * concepts + j for b in range(self._num_bases)] for j in range(concepts)]

  def change_point(self, client_index: int) -> int:
    return int(self._change_points[client_index])

  def domains(self, base_names: Sequence[str], num_classes: int) -> tuple[domains_lib.Domain, ...]:
    """Concept 0 keeps the labels; concept j > 0 permutes them with a seeded permutation unlike the others."""
    rng = np.random.default_rng([self._seed, 8])
    permutations = [tuple(range(num_classes))]
    while len(permutations) < self._config.num_concepts:
      candidate = tuple(int(i) for i in rng.permutation(num_classes))
      if candidate not in permutations:
        permutations.append(candidate)
    return tuple(domains_lib.Domain(f'{base_names[b]}_c{j}', b,
                                    label_permutation=None if j == 0 else permutations[j])
                 for b in range(self._num_bases) for j in range(self._config.num_concepts))

  def concept_share(self, client_index: int, round_num: int) -> tuple[int, int, float]:
    """(concept a, concept b, share of b) of the client's data in the round."""
    if self._shift_free:
      return 0, 0, 0.0
    since = round_num - self.change_point(client_index)
    config = self._config
    if config.drift_type == 'sudden':
      return (0, 1, 0.0) if since < 0 else (1, 1, 0.0)
    if config.drift_type == 'incremental':
      return 0, 1, float(np.clip((since + 1) / config.drift_length, 0.0, 1.0))
    concept = 0 if since < 0 else (since // config.concept_period + 1) % config.num_concepts
    return concept, concept, 0.0

  def round_plan(self, round_num: int) -> scenario.RoundPlan:
    rng = np.random.default_rng([self._seed, 6, round_num])
    chosen = rng.choice(len(self._clients), size=self._clients_per_round, replace=False)
    clients = []
    for position, index in enumerate(chosen):
      base, client_id = self._clients[index]
      first, second, share = self.concept_share(index, round_num)
      offset = base * self._config.num_concepts
      if share <= 0.0 or first == second:
        parts = (scenario.Part(offset + first, client_id),)
      else:
        rng = np.random.default_rng([self._seed, 7, round_num, position])
        parts = scenario.binomial_split(client_id, self._sizes[base][client_id], share, rng, offset + first,
                                        offset + second)
      clients.append(scenario.ClientPlan(f'{base}/{client_id}', parts))
    return scenario.RoundPlan(tuple(clients))

  def round_metrics(self, round_num: int, plan: scenario.RoundPlan) -> dict[str, float]:
    del round_num  # Unused.
    concepts = self._config.num_concepts
    counts = np.zeros(concepts)
    for client in plan.clients:
      for part in client.parts:
        size = self._sizes[part.domain // concepts][part.source_id]
        counts[part.domain % concepts] += size if part.num_examples is None else part.num_examples
    return {f'concept_share_{j}': float(n) for j, n in enumerate(counts / max(counts.sum(), 1.0))}


def _check_smoke_run(rows: scenario.Rows, summary, shift_free: bool) -> list[str]:
  """Every client changes concept at round 2 (of 2), recurring every round; one evaluation, so no concept has come
  back yet to be forgotten."""
  return (scenario.equality_problems('concept_share_0 at round 1', rows[0]['concept_share_0'], 1.0)
          + scenario.equality_problems('concept_share_1 at round 2', rows[1]['concept_share_1'],
                                       0.0 if shift_free else 1.0)
          + scenario.share_problems(rows[1], ('test_night_c1_accuracy',))
          + scenario.equality_problems('forgetting', summary.get('forgetting'), {}))


SMOKE_RUN = scenario.SmokeRun({'drift_type': 'recurring', 'drift_start': 1.0, 'drift_end': 1.0, 'concept_period': 1},
                              _check_smoke_run)
