"""Shift scenarios: for every round, which clients take part and which examples of which domain each one holds.

A *domain* is one base population of the task (the day or night mode, CIFAR-10 or CIFAR-100, a synthetic
component); scenarios of later seeds add an input transform or a label permutation to a base. A scenario answers,
for round t, with a `RoundPlan`: the participating clients and, for each, its `Part`s, i.e. how many examples of
which domain it takes from which client of that domain's base population. Every example carries its domain index
through training and evaluation (the `mode` feature of `tasks.task`) for simulation metrics only; no method may
use it to decide anything, and methods never see the scenario.

Every random choice of round t is a function of (seed, t) and, per client, of (seed, t, client position), so a
resumed run draws the same data.

Scenarios here:
- `PeriodicScenario` (seed 002, Eq. 2): m clients, each wholly of one domain, drawn with the periodic day
  probability q(t); it is exactly `client_sampler.RoundSampler`.
- `MixtureDriftScenario` (seed 000, pFedEM, digest section 3.3): every client holds data of all K base
  distributions and the shares of the round's data follow linear or cosine cycles (see its docstring).
- `EvolvingDomainsScenario` (seed 001, FedEvolve, digest section 3): M + 1 domains of one base, domain m rotated
  by m * Delta degrees; clients hold all M source domains every round; domain M + 1 is the test set.
- `ConceptDriftScenario` (beyond the seeds, as FedDrift and FedCCFA benchmark it): concepts are label
  permutations; every client changes concept at its own change point, suddenly, incrementally or recurringly.
- `WindowedScenario` (seed 003, ShiftEx, digest section 3): windows of rounds; at every window boundary half of
  the clients move to a new regime, a corruption of some severity (covariate shift) and a Dirichlet label skew.
"""

import abc
import dataclasses
from typing import Optional, Sequence

import numpy as np

from periodic_shift import client_sampler
from periodic_shift import day_probability
from periodic_shift import domains as domains_lib

SCENARIOS = ('periodic', 'mixture_drift', 'evolving_domains', 'concept_drift', 'windowed')
DRIFT_TYPES = ('sudden', 'incremental', 'recurring')
WINDOWINGS = ('tumbling', 'sliding')
MIXTURE_SCHEDULES = ('linear', 'cosine', 'none')
MIXTURE_TESTS = ('current', 'balanced')


@dataclasses.dataclass(frozen=True)
class Config:
  """A scenario and its settings (the binary's flags of the same names).

  periodic:       shift_fn, shift_p, period (q(t) of Eq. 3, seed 002);
  mixture_drift:  mixture_schedule, num_cycles (cycles over total_rounds), mixture_test, num_clients (seed 000);
  evolving_domains: num_domains (M + 1), rotation_step (Delta), target_extra_rotation, num_clients, evolving_base
                  (seed 001);
  concept_drift:  drift_type, num_concepts, drift_start / drift_end (fractions of total_rounds between which the
                  clients' change points fall), drift_length (incremental), concept_period (recurring);
  windowed:       window_rounds, windowing (tumbling or sliding), window_overlap (sliding), corruptions (the
                  families windows draw from), label_skew_alpha (0: no label shift), switch_fraction (seed 003).
  """
  name: str = 'periodic'
  shift_fn: str = 'linear'
  shift_p: float = 1.0
  period: int = 32
  total_rounds: int = 256
  mixture_schedule: str = 'linear'
  num_cycles: float = 3.0
  mixture_test: str = 'current'
  num_clients: int = 80
  num_domains: int = 12
  rotation_step: float = 15.0
  target_extra_rotation: float = 0.0
  evolving_base: int = 0
  drift_type: str = 'sudden'
  num_concepts: int = 2
  drift_start: float = 0.25
  drift_end: float = 0.5
  drift_length: int = 16
  concept_period: int = 32
  window_rounds: int = 32
  windowing: str = 'tumbling'
  window_overlap: int = 8
  corruptions: tuple[str, ...] = ('noise', 'brightness', 'contrast', 'rotation', 'scale')
  label_skew_alpha: float = 1.0
  switch_fraction: float = 0.5

  def validate(self) -> None:
    """Raises ValueError (one line, naming the flag) for settings that no population can make valid."""
    if self.name not in SCENARIOS:
      raise ValueError(f'scenario must be one of {", ".join(SCENARIOS)}; got {self.name!r}.')
    if self.name == 'periodic':
      day_probability.validate(self.shift_fn, self.period, self.shift_p)
      return
    if self.num_clients < 1:
      raise ValueError(f'num_clients must be >= 1; got {self.num_clients}.')
    if self.name == 'evolving_domains':
      if self.num_domains < 2:
        raise ValueError(f'num_domains must be >= 2 (sources and the target); got {self.num_domains}.')
      return
    if self.name == 'windowed':
      if self.window_rounds < 1 or self.windowing not in WINDOWINGS:
        raise ValueError(f'window_rounds must be >= 1 and windowing one of {", ".join(WINDOWINGS)}; got '
                         f'{self.window_rounds}, {self.windowing!r}.')
      if self.windowing == 'sliding' and not 0 <= self.window_overlap < self.window_rounds:
        raise ValueError(f'window_overlap must be in [0, window_rounds); got {self.window_overlap}.')
      unknown = set(self.corruptions) - set(domains_lib.CORRUPTIONS)
      if not self.corruptions or unknown:
        raise ValueError(f'corruptions must be some of {", ".join(domains_lib.CORRUPTIONS)}; got '
                         f'{",".join(self.corruptions)}.')
      if self.label_skew_alpha < 0 or not 0 < self.switch_fraction <= 1:
        raise ValueError(f'label_skew_alpha must be >= 0 and switch_fraction in (0, 1]; got '
                         f'{self.label_skew_alpha:g}, {self.switch_fraction:g}.')
      return
    if self.name == 'concept_drift':
      if self.drift_type not in DRIFT_TYPES:
        raise ValueError(f'drift_type must be one of {", ".join(DRIFT_TYPES)}; got {self.drift_type!r}.')
      if self.num_concepts < 2:
        raise ValueError(f'num_concepts must be >= 2; got {self.num_concepts}.')
      if not 0.0 <= self.drift_start <= self.drift_end <= 1.0:
        raise ValueError(f'need 0 <= drift_start <= drift_end <= 1; got {self.drift_start:g}, {self.drift_end:g}.')
      if self.drift_length < 1 or self.concept_period < 1:
        raise ValueError(f'drift_length and concept_period must be >= 1; got {self.drift_length}, '
                         f'{self.concept_period}.')
      return
    if self.mixture_schedule not in MIXTURE_SCHEDULES:
      raise ValueError(f'mixture_schedule must be one of {", ".join(MIXTURE_SCHEDULES)}; got '
                       f'{self.mixture_schedule!r}.')
    if self.mixture_test not in MIXTURE_TESTS:
      raise ValueError(f'mixture_test must be one of {", ".join(MIXTURE_TESTS)}; got {self.mixture_test!r}.')
    if not self.num_cycles > 0 or not self.total_rounds / self.num_cycles >= 2:
      raise ValueError(f'num_cycles must be > 0 with cycles of at least 2 rounds; got {self.num_cycles:g} over '
                       f'{self.total_rounds} rounds.')


def build(config: Config, base_client_ids: Sequence[Sequence[str]], base_client_sizes: Sequence[dict[str, int]],
          clients_per_round: int, seed: int, shift_free: bool = False, num_classes: int = 2) -> 'Scenario':
  """The scenario of `config` over the task's base populations (with `num_classes` labels); `shift_free` removes
  the shift (No-Dist-Shift).

  Raises ValueError when the populations cannot provide what the settings ask (message names the flag).
  """
  config.validate()
  if config.name == 'periodic':
    shift_fn = 'none' if shift_free else config.shift_fn
    day_share = len(base_client_ids[client_sampler.DAY]) / sum(len(ids) for ids in base_client_ids)
    q = day_probability.build_day_probability_fn(shift_fn, config.period, config.shift_p, day_share)
    try:
      sampler = client_sampler.RoundSampler(base_client_ids, clients_per_round,
                                            client_sampler.day_night_probabilities(q), seed)
    except ValueError as error:
      raise ValueError(f'--{error}') from error
    return PeriodicScenario(sampler)
  if config.name == 'windowed':
    return WindowedScenario(base_client_ids, base_client_sizes, clients_per_round, config, seed, num_classes,
                            shift_free)
  if config.name == 'concept_drift':
    return ConceptDriftScenario(base_client_ids, base_client_sizes, clients_per_round, config, seed, shift_free)
  if config.name == 'evolving_domains':
    return EvolvingDomainsScenario(base_client_ids, config.evolving_base, config.num_domains,
                                   config.rotation_step, config.target_extra_rotation, config.num_clients,
                                   clients_per_round, seed, shift_free)
  schedule = 'none' if shift_free else config.mixture_schedule
  return MixtureDriftScenario(base_client_ids, base_client_sizes, config.num_clients, clients_per_round,
                              config.total_rounds / config.num_cycles, schedule, config.mixture_test, seed)


@dataclasses.dataclass(frozen=True)
class Part:
  """`num_examples` examples (None: all) of domain `domain` from client `source_id` of its base population,
  after skipping `skip` of them, optionally thinned by label. The source's examples are taken in one seeded random order per (round, client),
  so parts of the same source with disjoint [skip, skip + num_examples) ranges hold disjoint examples."""
  domain: int
  source_id: str
  num_examples: Optional[int] = None
  skip: int = 0
  label_weights: Optional[tuple[float, ...]] = None  # Keep an example of label y with probability w[y] / max w.


@dataclasses.dataclass(frozen=True)
class ClientPlan:
  """One participating client's data in a round: its parts, in domain order."""
  client_id: str
  parts: tuple[Part, ...]


@dataclasses.dataclass(frozen=True)
class RoundPlan:
  """The participants of one round and what each holds."""
  clients: tuple[ClientPlan, ...]


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


class PeriodicScenario(Scenario):
  """Seed 002's periodic day/night shift (Eq. 2): each client is wholly of the domain (mode) it was drawn from."""

  def __init__(self, sampler: client_sampler.RoundSampler):
    self._sampler = sampler

  @property
  def num_domains(self) -> int:
    return self._sampler.num_modes

  def round_plan(self, round_num: int) -> RoundPlan:
    sample = self._sampler.sample(round_num)
    return RoundPlan(tuple(ClientPlan(client_id, (Part(int(mode), client_id),))
                           for client_id, mode in zip(sample.client_ids, sample.modes)))

  def round_metrics(self, round_num: int, plan: RoundPlan) -> dict[str, float]:
    """`q`: the true q(t); `day_fraction`: the day share of the round's clients."""
    modes = np.array([client.parts[0].domain for client in plan.clients])
    return {'q': float(self._sampler.mode_probabilities(round_num)[client_sampler.DAY]),
            'day_fraction': float(np.mean(modes == client_sampler.DAY))}


def mixture_shares(round_num, num_domains: int, cycle_rounds: float, schedule: str) -> np.ndarray:
  """a(t) [K]: the scheduled share of each domain in the data of round t (seed 000, digest section 3.3).

  With phi = (t mod P) / P for a cycle of P rounds (fractional P allowed, e.g. 200 / 3), domain k has weight
  g(phi + k / K), g(phi) = 1 - |1 - 2 phi| (`linear`: 0 -> 1 -> 0) or (1 - cos(2 pi phi)) / 2 (`cosine`), and the
  shares are the weights normalized. For K = 2 the weights already sum to 1: domain 0 (the day mode, CIFAR-10) has
  share a(t) starting at 0, domain 1 has 1 - a(t), the digest's reading of "the portion of CIFAR-10 increases
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


class MixtureDriftScenario(Scenario):
  """Seed 000's shift: every client holds all K domains; the shares of the round's data follow cycles.

  Clients: `num_clients` scenario clients; client c is paired, by a seeded permutation of each base population,
  with one source client of every base (so it holds data of all K distributions). Round t draws `clients_per_round`
  of them uniformly without replacement. A client's round has n_c = min_k |source_k| examples (so every domain can
  supply any share), split over the domains as (n_1, ..., n_K) ~ Multinomial(n_c, a(t)) (`mixture_shares`); the
  n_k examples of domain k are a seeded random subset of its source client's data.

  Test (`test`): `current` weighs the per-domain test accuracies by a(t) (the test data follow the round's mixture,
  as the seed's CIFAR experiment); `balanced` weighs them equally (its EMNIST "50% digits and 50% letters").
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
    if schedule not in MIXTURE_SCHEDULES or test not in MIXTURE_TESTS:
      raise ValueError(f'mixture schedule must be one of {", ".join(MIXTURE_SCHEDULES)} and mixture test one of '
                       f'{", ".join(MIXTURE_TESTS)}; got {schedule!r}, {test!r}.')
    if not cycle_rounds >= 2:
      raise ValueError(f'a mixture cycle must span at least 2 rounds; got {cycle_rounds:g}.')
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

  def round_plan(self, round_num: int) -> RoundPlan:
    rng = np.random.default_rng([self._seed, 1, round_num])
    chosen = rng.choice(len(self._budgets), size=self._clients_per_round, replace=False)
    shares = self.shares(round_num)
    clients = []
    for position, c in enumerate(chosen):
      counts = np.random.default_rng([self._seed, 2, round_num, position]).multinomial(self._budgets[c], shares)
      parts = tuple(Part(k, self._sources[k][c], int(n)) for k, n in enumerate(counts) if n > 0)
      clients.append(ClientPlan(f'client_{c}', parts))
    return RoundPlan(tuple(clients))

  def round_metrics(self, round_num: int, plan: RoundPlan) -> dict[str, float]:
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


class EvolvingDomainsScenario(Scenario):
  """Seed 001's evolving domains: domain m (m = 0..M) is base `base` rotated by m * Delta degrees.

  Domains 0..M-1 are the sources and M the target, never trained on (the last domain is always the target); with
  `target_extra_rotation` the target turns by M * Delta plus that many degrees (the "unexpected target evolution"
  of the seed's Table 7). The test sets are the base's test data in every domain; `test_weights` makes
  `test_mixture_accuracy` the target's accuracy.

  Clients: `num_clients` scenario clients; client c holds every source domain, domain m's data being all the data
  of a distinct client of the base population (a seeded permutation assigns clients c * M + m), so domains are
  disjoint, as the seed's disjoint split of MNIST into domains. Every round draws `clients_per_round` clients
  uniformly without replacement; each trains on all its source data. Label heterogeneity is the base clients' own
  (the seed's Dirichlet re-partition of labels across clients is not built yet).

  `shift_free` (No-Dist-Shift): the clients' data are not rotated (every domain is the base).
  """

  def __init__(self, base_client_ids: Sequence[Sequence[str]], base: int, num_domains: int, rotation_step: float,
               target_extra_rotation: float, num_clients: int, clients_per_round: int, seed: int,
               shift_free: bool = False):
    if not 0 <= base < len(base_client_ids):
      raise ValueError(f'--evolving_base must be a base population index below {len(base_client_ids)}; got {base}.')
    num_sources = num_domains - 1
    population = base_client_ids[base]
    if num_clients * num_sources > len(population):
      raise ValueError(f'--num_clients x (--num_domains - 1) = {num_clients * num_sources} needs that many clients '
                       f'in base population {base}, which has {len(population)}.')
    if not 1 <= clients_per_round <= num_clients:
      raise ValueError(f'--clients_per_round must be between 1 and --num_clients ({num_clients}); got '
                       f'{clients_per_round}.')
    self._base = base
    self._num_domains = num_domains
    self._angles = [0.0 if shift_free else m * rotation_step for m in range(num_domains)]
    if not shift_free:
      self._angles[-1] += target_extra_rotation
    self._clients_per_round = clients_per_round
    self._seed = seed
    order = np.random.default_rng([seed, 3]).permutation(len(population))
    self._sources = [[population[order[c * num_sources + m]] for m in range(num_sources)]
                     for c in range(num_clients)]

  @property
  def num_domains(self) -> int:
    return self._num_domains

  def domains(self, base_names: Sequence[str], num_classes: int) -> tuple[domains_lib.Domain, ...]:
    del num_classes  # Unused.
    return tuple(domains_lib.Domain(f'{base_names[self._base]}_rot{angle:g}', self._base, rotation_degrees=angle)
                 for angle in self._angles)

  def round_plan(self, round_num: int) -> RoundPlan:
    chosen = np.random.default_rng([self._seed, 4, round_num]).choice(len(self._sources), self._clients_per_round,
                                                                      replace=False)
    return RoundPlan(tuple(ClientPlan(f'client_{c}', tuple(Part(m, source) for m, source in
                                                          enumerate(self._sources[c])))
                           for c in chosen))

  def round_metrics(self, round_num: int, plan: RoundPlan) -> dict[str, float]:
    """`source_domains`: the domains the round's clients hold (always all M sources)."""
    del round_num  # Unused.
    return {'source_domains': float(len({part.domain for client in plan.clients for part in client.parts}))}

  def test_weights(self, round_num: int) -> np.ndarray:
    del round_num  # Unused.
    return np.eye(self._num_domains)[-1]


class ConceptDriftScenario(Scenario):
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
               clients_per_round: int, config: Config, seed: int, shift_free: bool = False):
    self._clients = [(base, client_id) for base, ids in enumerate(base_client_ids) for client_id in ids]
    if not 1 <= clients_per_round <= len(self._clients):
      raise ValueError(f'--clients_per_round must be between 1 and the population ({len(self._clients)}); got '
                       f'{clients_per_round}.')
    self._sizes = base_client_sizes
    self._num_bases = len(base_client_ids)
    self._clients_per_round = clients_per_round
    self._config = config
    self._seed = seed
    self._shift_free = shift_free
    rng = np.random.default_rng([seed, 5])
    first, last = config.drift_start * config.total_rounds, config.drift_end * config.total_rounds
    self._change_points = np.floor(rng.uniform(first, last + 1, size=len(self._clients))).astype(int)

  @property
  def num_domains(self) -> int:
    return self._num_bases * self._config.num_concepts

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

  def round_plan(self, round_num: int) -> RoundPlan:
    rng = np.random.default_rng([self._seed, 6, round_num])
    chosen = rng.choice(len(self._clients), size=self._clients_per_round, replace=False)
    clients = []
    for position, index in enumerate(chosen):
      base, client_id = self._clients[index]
      first, second, share = self.concept_share(index, round_num)
      if share <= 0.0 or first == second:
        parts = (Part(base * self._config.num_concepts + first, client_id),)
      else:
        size = self._sizes[base][client_id]
        moved = int(np.random.default_rng([self._seed, 7, round_num, position]).binomial(size, share))
        concepts = self._config.num_concepts
        parts = tuple(part for part in (Part(base * concepts + first, client_id, size - moved),
                                        Part(base * concepts + second, client_id, moved, skip=size - moved))
                      if part.num_examples)
      clients.append(ClientPlan(f'{base}/{client_id}', parts))
    return RoundPlan(tuple(clients))

  def round_metrics(self, round_num: int, plan: RoundPlan) -> dict[str, float]:
    del round_num  # Unused.
    concepts = self._config.num_concepts
    counts = np.zeros(concepts)
    for client in plan.clients:
      for part in client.parts:
        size = self._sizes[part.domain // concepts][part.source_id]
        counts[part.domain % concepts] += size if part.num_examples is None else part.num_examples
    return {f'concept_share_{j}': float(n) for j, n in enumerate(counts / max(counts.sum(), 1.0))}


class WindowedScenario(Scenario):
  """Seed 003's windows: the run is cut into windows W0, W1, ... of `window_rounds` rounds.

  Regimes: regime 0 (W0, the bootstrap window) is the clean data. Window w >= 1 brings regime w: a corruption family
  drawn from `corruptions` with a severity drawn from 1-5 (covariate shift, `periodic_shift.domains`) and label
  weights drawn from Dir(label_skew_alpha 1) over the classes (label shift: a client in the regime keeps an example
  of label y with probability w_y / max w; alpha 0 turns label shift off). Regimes are drawn from the run's seed.

  Clients: every client of every base population; each round draws `clients_per_round` of them uniformly without
  replacement (the seed selects 20% of its pool per round: set the flag to that). At each window boundary exactly
  floor(switch_fraction N) clients, drawn anew, move to the new regime and the others keep theirs ("50% of the
  participating clients keep their previous distribution and the other 50% receive a new one"; here over the whole
  population, so the split is exact). `tumbling`: a client's data are wholly in its regime. `sliding`: for the
  first `window_overlap` rounds of a window a client that just moved holds both regimes, the new one's share
  growing (t - start + 1) / (overlap + 1), split binomially into disjoint parts of its data (overlapping windows).

  Domains: (base b, regime r), index b R + r, named `<base>_w<r>` (+ the corruption); test sets are the bases' test
  data corrupted by the regime (no label skew). `window` and `new_regime_share` (the share of the round's examples
  in the newest regime) go to metrics.csv, whose window boundaries `experiment.shift_metrics` cuts at.
  `shift_free` (No-Dist-Shift): every client stays in regime 0.
  """

  def __init__(self, base_client_ids: Sequence[Sequence[str]], base_client_sizes: Sequence[dict[str, int]],
               clients_per_round: int, config: Config, seed: int, num_classes: int, shift_free: bool = False):
    self._clients = [(base, client_id) for base, ids in enumerate(base_client_ids) for client_id in ids]
    if not 1 <= clients_per_round <= len(self._clients):
      raise ValueError(f'--clients_per_round must be between 1 and the population ({len(self._clients)}); got '
                       f'{clients_per_round}.')
    self._sizes = base_client_sizes
    self._num_bases = len(base_client_ids)
    self._clients_per_round = clients_per_round
    self._config = config
    self._seed = seed
    self._num_regimes = 1 if shift_free else max(1, -(-config.total_rounds // config.window_rounds))
    rng = np.random.default_rng([seed, 9])
    self.regimes = [(None, 0)] + [(str(rng.choice(config.corruptions)), int(rng.integers(1, 6)))
                                  for _ in range(self._num_regimes - 1)]
    count = len(self._clients)
    self.assignments = np.zeros((self._num_regimes, count), np.int64)  # Regime of each client in each window.
    for window in range(1, self._num_regimes):
      self.assignments[window] = self.assignments[window - 1]
      movers = rng.choice(count, size=int(np.floor(config.switch_fraction * count)), replace=False)
      self.assignments[window, movers] = window
    skew = np.random.default_rng([seed, 10])
    self._label_weights = [None] + [
        tuple(float(w) for w in skew.dirichlet(np.full(num_classes, config.label_skew_alpha)))
        if config.label_skew_alpha > 0 else None for _ in range(self._num_regimes - 1)]

  @property
  def num_domains(self) -> int:
    return self._num_bases * self._num_regimes

  def domains(self, base_names: Sequence[str], num_classes: int) -> tuple[domains_lib.Domain, ...]:
    del num_classes  # Unused.
    return tuple(domains_lib.Domain(f'{base_names[b]}_w{r}' + (f'_{family}{severity}' if family else ''), b,
                                    corruption=family, severity=severity)
                 for b in range(self._num_bases) for r, (family, severity) in enumerate(self.regimes))

  def window(self, round_num: int) -> int:
    return min((round_num - 1) // self._config.window_rounds, self._num_regimes - 1)

  def label_weights(self, regime: int) -> Optional[tuple[float, ...]]:
    """The regime's label weights w (None: no skew)."""
    return self._label_weights[regime]

  def _regime_shares(self, client_index: int, round_num: int) -> tuple[int, int, float]:
    """(old regime, new regime, share of the new) of a client's data in the round."""
    window = self.window(round_num)
    current = int(self.assignments[window, client_index])
    previous = int(self.assignments[window - 1, client_index]) if window > 0 else current
    since = round_num - 1 - window * self._config.window_rounds
    if self._config.windowing == 'sliding' and current != previous and since < self._config.window_overlap:
      return previous, current, (since + 1) / (self._config.window_overlap + 1)
    return current, current, 0.0

  def round_plan(self, round_num: int) -> RoundPlan:
    chosen = np.random.default_rng([self._seed, 11, round_num]).choice(len(self._clients), self._clients_per_round,
                                                                       replace=False)
    clients = []
    for position, index in enumerate(chosen):
      base, client_id = self._clients[index]
      old, new, share = self._regime_shares(index, round_num)
      domain = lambda regime: base * self._num_regimes + regime  # pylint: disable=cell-var-from-loop
      if share == 0.0:
        parts = (Part(domain(old), client_id, label_weights=self.label_weights(old)),)
      else:
        size = self._sizes[base][client_id]
        moved = int(np.random.default_rng([self._seed, 12, round_num, position]).binomial(size, share))
        parts = tuple(part for part in (
            Part(domain(old), client_id, size - moved, label_weights=self.label_weights(old)),
            Part(domain(new), client_id, moved, skip=size - moved, label_weights=self.label_weights(new)))
                      if part.num_examples)
      clients.append(ClientPlan(f'{base}/{client_id}', parts))
    return RoundPlan(tuple(clients))

  def round_metrics(self, round_num: int, plan: RoundPlan) -> dict[str, float]:
    """`window`; `new_regime_share`: the share of the round's planned examples (before label thinning) in the
    newest regime."""
    window = self.window(round_num)
    total = newest = 0.0
    for client in plan.clients:
      for part in client.parts:
        size = self._sizes[part.domain // self._num_regimes][part.source_id]
        n = size if part.num_examples is None else part.num_examples
        total += n
        newest += n if part.domain % self._num_regimes == window and window > 0 else 0
    return {'window': float(window), 'new_regime_share': newest / max(total, 1.0)}
