"""The FedEvolve paper's evolving domains as a scenario."""

import dataclasses
from typing import Sequence

import numpy as np

from periodic_shift import domains as domains_lib
from periodic_shift import scenario
from utils import settings

NAME = 'evolving_domains'
LENGTH_DEPENDENCE = None
# The FedEvolve paper's measure: the global model on the unseen target domain.
HEADLINE_METRIC = 'target_server_accuracy'


@dataclasses.dataclass(frozen=True)
class Settings:
  """The domains, their rotation and the clients (Tan et al., 2024)."""
  num_domains: int = settings.setting(12, 'M + 1 domains, the last the target.')
  rotation_step: float = settings.setting(15.0, 'Delta, degrees between domains.')
  target_extra_rotation: float = settings.setting(
      0.0, 'Degrees the target turns beyond M * Delta (the paper\'s unexpected target evolution).')
  num_clients: int = settings.setting(20, 'Clients, each holding every source domain (the FedEvolve paper: 20).')
  evolving_base: int = settings.setting(0, 'The base population rotated (0: the day mode, EMNIST digits).')
  dirichlet_alpha: float = settings.setting(
      float('inf'), 'Each client\'s class weights ~ Dir(alpha) thin its sources\' labels (the FedEvolve paper: inf, '
      '1.0, 0.1); inf = no label skew.', infinite_ok=True)
  rotation_planes: int = settings.setting(
      1, 'On vector inputs, the orthogonal planes each rotation turns (1: one plane; half the input dimension: every '
      'direction, the synthetic rotated-digits stand-in).')

  def validate(self, schedule: scenario.Schedule) -> None:
    del schedule  # Unused.
    if self.num_clients < 1:
      raise ValueError(f'--num_clients must be >= 1; got {self.num_clients}.')
    if self.num_domains < 2:
      raise ValueError(f'--num_domains must be >= 2 (sources and the target); got {self.num_domains}.')
    if not self.dirichlet_alpha > 0:
      raise ValueError(f'--dirichlet_alpha must be > 0 (inf: no label skew); got {self.dirichlet_alpha:g}.')
    if self.rotation_planes < 1:
      raise ValueError(f'--rotation_planes must be >= 1; got {self.rotation_planes}.')


def run_name(config: Settings, schedule: scenario.Schedule) -> str:
  del config, schedule  # Unused.
  return NAME


def build(config: Settings, population: scenario.Population, schedule: scenario.Schedule,
          shift_free: bool = False) -> 'EvolvingDomainsScenario':
  """Base `evolving_base` rotated into `num_domains` time stages, dealt to `num_clients` clients (unrotated without
  the shift)."""
  return EvolvingDomainsScenario(population.client_ids, config.evolving_base, config.num_domains, config.rotation_step,
                                 config.target_extra_rotation, config.num_clients, schedule.clients_per_round,
                                 schedule.seed, shift_free, config.dirichlet_alpha, population.num_classes,
                                 config.rotation_planes)


class EvolvingDomainsScenario(scenario.Scenario):
  """The FedEvolve paper's evolving domains: domain m (m = 0..M) is base `base` rotated by m * Delta degrees.

  Domains 0..M-1 are the sources and M the target, never trained on (the last domain is always the target); with
  `target_extra_rotation` the target turns by M * Delta plus that many degrees (the "unexpected target evolution"
  of the paper's Table 7). The test sets are the base's test data in every domain; `test_weights` makes
  `test_mixture_accuracy` the target's accuracy.

  Clients: `num_clients` scenario clients; client c holds every source domain, domain m's data being all the data
  of a distinct client of the base population (a seeded permutation assigns clients c * M + m), so domains are
  disjoint, as the paper's disjoint split of MNIST into domains. Every round draws `clients_per_round` clients
  uniformly without replacement; each trains on all its source data. Domain m is time stage m
  (`domains.Domain.stage`): a client knows which of its datasets came first, which FedEvolve and FedEvp need.

  Each client's own target data (`evaluation_plans`, `target`): the data of one more distinct base client
  (M * num_clients + c) in the target domain, with the client's label skew, and as personalization data the
  client's own sources. Metrics `target_accuracy` (the method's global model, the paper's "server accuracy") and,
  for methods that personalize, `target_client_accuracy` (the paper's "client accuracy") pool every client's target
  examples.

  Label heterogeneity (`dirichlet_alpha`, the paper's "Dir", values inf, 1.0 and 0.1): client c draws class weights
  w_c ~ Dir(alpha 1_C) once and keeps an example of label y with probability w_c[y] / max w_c in every source
  domain (`scenario.Part.label_weights`; the same examples in every round, `Part.label_seed`), so its labels
  follow p(y) w_c[y] / sum p w_c: for sources with balanced
  labels the client's class proportions are Dir(alpha), the per-client Dirichlet label skew of Hsu et al. (2019).
  This thins each client's own sources rather than re-dealing a pooled domain class by class across clients (the
  other common reading of a "Dirichlet partition"), so examples are discarded, not moved. The weights are the
  client's for all its domains: only the rotation evolves. alpha = inf: no skew (the base clients' own labels).

  `shift_free` (No-Dist-Shift): the clients' data are not rotated (every domain is the base).

  `rotation_planes` (vector inputs): how many orthogonal planes of R^D each rotation turns (`domains` module
  docstring). One plane of the synthetic task's 64-d input is a mild shift (a model trained on the sources already
  predicts the target); D / 2 planes turn every direction, the vector analogue of rotating every pixel of an image,
  and make the synthetic task the rotated-digits stand-in of the paper's Figure 3a and Table 7.
  """

  def __init__(self, base_client_ids: Sequence[Sequence[str]], base: int, num_domains: int, rotation_step: float,
               target_extra_rotation: float, num_clients: int, clients_per_round: int, seed: int,
               shift_free: bool = False, dirichlet_alpha: float = float('inf'), num_classes: int = 2,
               rotation_planes: int = 1):
    if not 0 <= base < len(base_client_ids):
      raise ValueError(f'--evolving_base must be a base population index below {len(base_client_ids)}; got {base}.')
    num_sources = num_domains - 1
    population = base_client_ids[base]
    if num_clients * num_domains > len(population):
      raise ValueError(f'--num_clients x --num_domains = {num_clients * num_domains} (sources and each client\'s own '
                       f'target) needs that many clients in base population {base}, which has {len(population)}.')
    if not 1 <= clients_per_round <= num_clients:
      raise ValueError(f'--clients_per_round must be between 1 and --num_clients ({num_clients}); got '
                       f'{clients_per_round}.')
    self._base = base
    self._num_domains = num_domains
    self._rotation_planes = rotation_planes
    self._angles = [0.0 if shift_free else m * rotation_step for m in range(num_domains)]
    if not shift_free:
      self._angles[-1] += target_extra_rotation
    self._clients_per_round = clients_per_round
    self._seed = seed
    order = np.random.default_rng([seed, 3]).permutation(len(population))
    self._sources = [[population[order[c * num_sources + m]] for m in range(num_sources)]
                     for c in range(num_clients)]
    self._targets = [population[order[num_clients * num_sources + c]] for c in range(num_clients)]
    self._label_seed = int(np.random.default_rng([seed, 49]).integers(2**31))
    self.label_weights = [None if np.isinf(dirichlet_alpha) else
                          tuple(float(w) for w in np.random.default_rng([seed, 48, c]).dirichlet(
                              np.full(num_classes, dirichlet_alpha)))
                          for c in range(num_clients)]

  @property
  def num_domains(self) -> int:
    return self._num_domains

  def domains(self, base_names: Sequence[str], num_classes: int) -> tuple[domains_lib.Domain, ...]:
    del num_classes  # Unused.
    return tuple(domains_lib.Domain(f'{base_names[self._base]}_rot{angle:g}', self._base, rotation_degrees=angle,
                                    stage=m, rotation_planes=self._rotation_planes)
                 for m, angle in enumerate(self._angles))

  def _sources_plan(self, client: int, order_seed=None) -> scenario.ClientPlan:
    return scenario.ClientPlan(f'client_{client}', tuple(
        scenario.Part(m, source, label_weights=self.label_weights[client], order_seed=order_seed,
                      label_seed=self._label_seed)
        for m, source in enumerate(self._sources[client])))

  def round_plan(self, round_num: int) -> scenario.RoundPlan:
    chosen = np.random.default_rng([self._seed, 4, round_num]).choice(len(self._sources), self._clients_per_round,
                                                                      replace=False)
    return scenario.RoundPlan(tuple(self._sources_plan(c) for c in chosen))

  def evaluation_plans(self) -> dict[str, scenario.HeldOutClients]:
    """`target`: every client's own target-domain data, with its sources as personalization data."""
    target = self._num_domains - 1
    tests = tuple(scenario.ClientPlan(f'client_{c}', (scenario.Part(
        target, source, label_weights=self.label_weights[c], order_seed=self._seed, label_seed=self._label_seed),))
                  for c, source in enumerate(self._targets))
    return {'target': scenario.HeldOutClients(tests, tuple(self._sources_plan(c, order_seed=self._seed)
                                                          for c in range(len(self._sources))))}

  def round_metrics(self, round_num: int, plan: scenario.RoundPlan) -> dict[str, float]:
    """`source_domains`: the domains the round's clients hold (always all M sources)."""
    del round_num  # Unused.
    return {'source_domains': float(len({part.domain for client in plan.clients for part in client.parts}))}

  def test_weights(self, round_num: int) -> np.ndarray:
    del round_num  # Unused.
    return np.eye(self._num_domains)[-1]


def _check_smoke_run(rows: scenario.Rows, summary, shift_free: bool) -> list[str]:
  """4 domains: 3 sources and the target, rotated by 3 x 15 degrees (not rotated without the shift); every client's
  own target data, and where a method has a global model the centralized target test set, whose accuracy is
  test_mixture_accuracy."""
  del summary  # Unused.
  last = rows[-1]
  problems = scenario.equality_problems('source_domains', last['source_domains'], 3.0)
  problems += scenario.share_problems(last, ('target_accuracy',))
  problems += scenario.share_problems(last, ('target_server_accuracy',), optional=True)
  if 'test_mixture_accuracy' in last:
    suffix = f'_rot{0 if shift_free else 45}_accuracy'
    target = [key for key in last if key.startswith('test_') and key.endswith(suffix)]
    problems += scenario.equality_problems('test_mixture_accuracy', last['test_mixture_accuracy'],
                                           last[target[0]] if len(target) == 1 else f'one of {target}')
  return problems


SMOKE_RUN = scenario.SmokeRun({'num_domains': 4, 'num_clients': 6}, _check_smoke_run)
