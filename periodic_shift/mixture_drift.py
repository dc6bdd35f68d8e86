"""The pFedEM paper's shift as a scenario: every client holds all K bases; the shares of its data follow cycles
(Chen et al., Section V)."""

import dataclasses
from typing import Sequence

import numpy as np

from periodic_shift import day_probability
from periodic_shift import scenario
from utils import settings

NAME = 'mixture_drift'
LENGTH_DEPENDENCE = 'its cycles are laid over --total_rounds (--num_cycles)'
# The pFedEM paper's measure: accuracy on test batches mixed as the round's data.
HEADLINE_METRIC = 'test_mixture_accuracy'
MIXTURE_SCHEDULES = ('linear', 'cosine', 'none')
MIXTURE_TESTS = ('current', 'balanced')


@dataclasses.dataclass(frozen=True)
class Settings:
  """The cycles of the domain shares and the clients (Chen et al.)."""
  mixture_schedule: str = settings.setting('linear', 'Shape of the domain-share cycles, linear or cosine (Chen et al.).')
  num_cycles: float = settings.setting(3.0, 'Cycles of the domain shares over the run.')
  mixture_test: str = settings.setting('current', 'test_mixture_accuracy weighs the domains by the round\'s shares '
                                       '(current) or equally (balanced).')
  num_clients: int = settings.setting(80, 'Clients, each holding data of every domain (the pFedEM paper: 80).')

  def validate(self, schedule: scenario.Schedule) -> None:
    if self.num_clients < 1:
      raise ValueError(f'--num_clients must be >= 1; got {self.num_clients}.')
    if self.mixture_schedule not in MIXTURE_SCHEDULES:
      raise ValueError(f'--mixture_schedule must be one of {", ".join(MIXTURE_SCHEDULES)}; got '
                       f'{self.mixture_schedule!r}.')
    if self.mixture_test not in MIXTURE_TESTS:
      raise ValueError(f'--mixture_test must be one of {", ".join(MIXTURE_TESTS)}; got {self.mixture_test!r}.')
    if not self.num_cycles > 0 or not schedule.total_rounds / self.num_cycles >= 2:
      raise ValueError(f'--num_cycles must be > 0 with cycles of at least 2 rounds; got {self.num_cycles:g} over '
                       f'{schedule.total_rounds} rounds.')


def run_name(config: Settings, schedule: scenario.Schedule) -> str:
  del config, schedule  # Unused.
  return NAME


def build(config: Settings, population: scenario.Population, schedule: scenario.Schedule,
          shift_free: bool = False) -> 'MixtureDriftScenario':
  """`num_clients` clients holding every base, their shares cycling `num_cycles` times over the run (constant shares
  without the shift)."""
  return MixtureDriftScenario(population.client_ids, population.client_sizes, config.num_clients,
                              schedule.clients_per_round, schedule.total_rounds / config.num_cycles,
                              'none' if shift_free else config.mixture_schedule, config.mixture_test, schedule.seed)


def mixture_shares(round_num, num_domains: int, cycle_rounds: float, schedule: str) -> np.ndarray:
  """a(t) [K]: the scheduled share of each domain in the data of round t (Chen et al., Section V).

  With phi = (t mod P) / P for a cycle of P rounds (fractional P allowed, e.g. 200 / 3), domain k has weight
  g(phi + k / K), g(phi) = 1 - |1 - 2 phi| (`linear`: 0 -> 1 -> 0) or (1 - cos(2 pi phi)) / 2 (`cosine`), and the
  shares are the weights normalized. For K = 2 the weights already sum to 1: domain 0 (the day mode, CIFAR-10) has
  share a(t) starting at 0, domain 1 has 1 - a(t), our reading of "the portion of CIFAR-10 increases
  linearly from 0 to 1, and then decreases to 0". For K > 2 (the paper does not describe its K = 3 schedule) the
  K cycles are evenly phase-shifted. `none`: 1 / K each (no drift, for No-Dist-Shift).
  """
  if schedule == 'none':
    return np.full(num_domains, 1.0 / num_domains)
  phases = np.mod(np.mod(round_num, cycle_rounds) / cycle_rounds + np.arange(num_domains) / num_domains, 1.0)
  if schedule == 'linear':
    weights = 1.0 - day_probability.linear(phases, 1.0)
  else:
    weights = 1.0 - day_probability.cosine(phases, 1.0)
  return weights / weights.sum()


class MixtureDriftScenario(scenario.Scenario):
  """The pFedEM paper's shift: every client holds all K domains; the shares of the round's data follow cycles.

  Clients: `num_clients` scenario clients; client c is paired, by a seeded permutation of each base population,
  with one source client of every base (so it holds data of all K distributions). Round t draws `clients_per_round`
  of them uniformly without replacement. A client's round has n_c = min_k |source_k| examples (so every domain can
  supply any share), split over the domains as (n_1, ..., n_K) ~ Multinomial(n_c, a(t)) (`mixture_shares`); the
  n_k examples of domain k are a seeded random subset of its source client's data.

  Test (`test`): `current` weighs the per-domain test accuracies by a(t) (the test data follow the round's mixture,
  as the paper's CIFAR experiment); `balanced` weighs them equally (its EMNIST "50% digits and 50% letters").
  """

  def __init__(self, base_client_ids: Sequence[Sequence[str]], base_client_sizes: Sequence[dict[str, int]],
               num_clients: int, clients_per_round: int, cycle_rounds: float, schedule: str, test: str, seed: int):
    num_domains = len(base_client_ids)
    smallest = min(len(ids) for ids in base_client_ids)
    if not 1 <= num_clients <= smallest:
      raise ValueError(f'--num_clients must be between 1 and the smallest base population ({smallest}); got '
                       f'{num_clients}.')
    if not 1 <= clients_per_round <= num_clients:
      raise ValueError(f'--clients_per_round must be between 1 and --num_clients ({num_clients}); got '
                       f'{clients_per_round}.')
    self._num_domains = num_domains
    self._clients_per_round = clients_per_round
    self._cycle_rounds = cycle_rounds
    self._schedule = schedule
    self._test = test
    self._seed = seed
    rng = np.random.default_rng([seed, 0])
    self._sources = [[ids[i] for i in rng.permutation(len(ids))[:num_clients]] for ids in base_client_ids]
    self._budgets = [min(sizes[self._sources[k][c]] for k, sizes in enumerate(base_client_sizes))
                     for c in range(num_clients)]

  @property
  def num_domains(self) -> int:
    return self._num_domains

  def shares(self, round_num: int) -> np.ndarray:
    return mixture_shares(round_num, self._num_domains, self._cycle_rounds, self._schedule)

  def round_plan(self, round_num: int) -> scenario.RoundPlan:
    rng = np.random.default_rng([self._seed, 1, round_num])
    chosen = rng.choice(len(self._budgets), size=self._clients_per_round, replace=False)
    shares = self.shares(round_num)
    clients = []
    for position, c in enumerate(chosen):
      counts = np.random.default_rng([self._seed, 2, round_num, position]).multinomial(self._budgets[c], shares)
      parts = tuple(scenario.Part(k, self._sources[k][c], int(n)) for k, n in enumerate(counts) if n > 0)
      clients.append(scenario.ClientPlan(f'client_{c}', parts))
    return scenario.RoundPlan(tuple(clients))

  def round_metrics(self, round_num: int, plan: scenario.RoundPlan) -> dict[str, float]:
    """`scheduled_share_<k>`: a_k(t); `domain_share_<k>`: the share of domain k in the round's examples."""
    counts = np.zeros(self._num_domains)
    for client in plan.clients:
      for part in client.parts:
        counts[part.domain] += part.num_examples
    metrics = {f'scheduled_share_{k}': float(a) for k, a in enumerate(self.shares(round_num))}
    metrics.update({f'domain_share_{k}': float(n) for k, n in enumerate(counts / max(counts.sum(), 1.0))})
    return metrics

  def test_weights(self, round_num: int) -> np.ndarray:
    if self._test == 'current':
      return self.shares(round_num)
    return np.full(self._num_domains, 1.0 / self._num_domains)


def _check_smoke_run(rows: scenario.Rows, summary, shift_free: bool) -> list[str]:
  """One mixture cycle over 4 rounds: a(2) = 1 (a(t) = 1/2 in every round without the shift)."""
  del summary  # Unused.
  return (scenario.equality_problems('scheduled_share_0 at round 2', rows[1]['scheduled_share_0'],
                                     0.5 if shift_free else 1.0)
          + scenario.share_problems(rows[1], ('test_mixture_accuracy',)))


SMOKE_RUN = scenario.SmokeRun({'num_clients': 20, 'num_cycles': 0.5}, _check_smoke_run)
