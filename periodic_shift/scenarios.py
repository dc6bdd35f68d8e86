"""The shift scenarios by name, their settings and their validation (`--scenario` and its flags).

- `periodic` (Zhu et al., 2022, Eq. 2): m clients, each wholly of one domain, drawn with the periodic day
  probability q(t); exactly `client_sampler.RoundSampler` (`periodic_shift.periodic`).
- `mixture_drift` (pFedEM, Chen et al.): every client holds data of all K base distributions and
  the shares of the round's data follow linear or cosine cycles (`periodic_shift.mixture_drift`).
- `evolving_domains` (FedEvolve, Tan et al., 2024): M + 1 domains of one base, domain m rotated by
  m * Delta degrees; clients hold all M source domains; the last domain is the test target
  (`periodic_shift.evolving_domains`).
- `concept_drift` (beyond the five papers, as FedDrift and FedCCFA benchmark it): concepts are label permutations; every
  client changes concept at its own change point, suddenly, incrementally or recurringly
  (`periodic_shift.concept_drift`).
- `windowed` (ShiftEx, Bhope et al., 2025): windows of rounds; at every window boundary a share of the
  clients move to a new regime, a corruption of some severity and a Dirichlet label skew (`periodic_shift.windowed`).
- `dirichlet_mixture` (FedGMM, Wu et al., 2023): every client a fixed Dir(alpha) mixture of components
  (a base and its transformed copy, or the task's bases), 60/20/20 splits per client, optional unseen clients
  (`periodic_shift.dirichlet_mixture`).
"""

import dataclasses
from typing import Optional, Sequence

from periodic_shift import client_sampler
from periodic_shift import concept_drift
from periodic_shift import day_probability
from periodic_shift import dirichlet_mixture
from periodic_shift import domains as domains_lib
from periodic_shift import evolving_domains
from periodic_shift import mixture_drift
from periodic_shift import periodic
from periodic_shift import scenario
from periodic_shift import windowed

SCENARIOS = ('periodic', 'mixture_drift', 'evolving_domains', 'concept_drift', 'windowed', 'dirichlet_mixture')


@dataclasses.dataclass(frozen=True)
class Config:
  """A scenario and its settings (the binary's flags of the same names).

  periodic:       shift_fn, shift_p, period (q(t) of Eq. 3, the Diurnal-or-Nocturnal paper);
  mixture_drift:  mixture_schedule, num_cycles (cycles over total_rounds), mixture_test, num_clients (Chen et al.);
  evolving_domains: num_domains (M + 1), rotation_step (Delta), target_extra_rotation, num_clients, evolving_base,
                  dirichlet_alpha (inf: no label skew), rotation_planes (vector inputs) (Tan et al., 2024);
  concept_drift:  drift_type, num_concepts, drift_start / drift_end (fractions of total_rounds between which the
                  clients' change points fall), drift_length (incremental), concept_period (recurring);
  windowed:       window_rounds, windowing (tumbling or sliding), window_overlap (sliding), corruptions (the
                  families windows draw from), label_skew_alpha (0: no label shift), switch_fraction,
                  window_chunks (window w holds chunk w mod N of each client's data; 1: all of it), num_clients
                  (the population, None: every base's clients), window_severity (0: drawn per window),
                  census_scope (who reports in a census round: population or the window's cohort) (Bhope et al., 2025);
  dirichlet_mixture: dirichlet_components, component_alpha, unseen_fraction, num_clients (None: all) (Wu et al., 2023).
  """
  name: str = 'periodic'
  shift_fn: str = 'linear'
  shift_p: float = 1.0
  period: int = 32
  total_rounds: int = 256
  mixture_schedule: str = 'linear'
  num_cycles: float = 3.0
  mixture_test: str = 'current'
  num_clients: Optional[int] = 80
  num_domains: int = 12
  rotation_step: float = 15.0
  target_extra_rotation: float = 0.0
  evolving_base: int = 0
  dirichlet_alpha: float = float('inf')
  rotation_planes: int = 1
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
  window_chunks: int = 2
  window_severity: int = 0
  census_scope: str = 'population'
  dirichlet_components: str = 'transformed'
  component_alpha: float = 0.4
  unseen_fraction: float = 0.0

  def length_dependence(self) -> Optional[str]:
    """Why this scenario's rounds depend on `total_rounds` (so a finished run cannot be extended into the same
    experiment with more rounds), or None when round t's plan is the same whatever the run's length."""
    return {'mixture_drift': 'its cycles are laid over --total_rounds (--num_cycles)',
            'concept_drift': 'its change points are fractions of --total_rounds',
            'windowed': 'its windows\' regimes are drawn for ceil(--total_rounds / --window_rounds) windows at once',
            }.get(self.name)

  def validate(self) -> None:
    """Raises ValueError (one line, naming the flag) for settings that no population can make valid."""
    if self.name not in SCENARIOS:
      raise ValueError(f'scenario must be one of {", ".join(SCENARIOS)}; got {self.name!r}.')
    if self.name == 'periodic':
      day_probability.validate(self.shift_fn, self.period, self.shift_p)
      return
    if self.num_clients is not None and self.num_clients < 1:
      raise ValueError(f'num_clients must be >= 1; got {self.num_clients}.')
    if self.name == 'dirichlet_mixture':
      if self.dirichlet_components not in dirichlet_mixture.COMPONENTS:
        raise ValueError(f'dirichlet_components must be one of {", ".join(dirichlet_mixture.COMPONENTS)}; got '
                         f'{self.dirichlet_components!r}.')
      if not self.component_alpha > 0 or not 0 <= self.unseen_fraction < 1:
        raise ValueError(f'component_alpha must be > 0 and unseen_fraction in [0, 1); got '
                         f'{self.component_alpha:g}, {self.unseen_fraction:g}.')
      return
    if self.name == 'evolving_domains':
      if self.num_domains < 2:
        raise ValueError(f'num_domains must be >= 2 (sources and the target); got {self.num_domains}.')
      if not self.dirichlet_alpha > 0:
        raise ValueError(f'dirichlet_alpha must be > 0 (inf: no label skew); got {self.dirichlet_alpha:g}.')
      if self.rotation_planes < 1:
        raise ValueError(f'rotation_planes must be >= 1; got {self.rotation_planes}.')
      return
    if self.name == 'windowed':
      if self.window_rounds < 1 or self.windowing not in windowed.WINDOWINGS:
        raise ValueError(f'window_rounds must be >= 1 and windowing one of {", ".join(windowed.WINDOWINGS)}; got '
                         f'{self.window_rounds}, {self.windowing!r}.')
      if self.windowing == 'sliding' and not 0 <= self.window_overlap < self.window_rounds:
        raise ValueError(f'window_overlap must be in [0, window_rounds); got {self.window_overlap}.')
      unknown = set(self.corruptions) - set(domains_lib.CORRUPTIONS)
      if not self.corruptions or unknown:
        raise ValueError(f'corruptions must be some of {", ".join(domains_lib.CORRUPTIONS)}; got '
                         f'{",".join(self.corruptions)}.')
      if self.census_scope not in windowed.CENSUS_SCOPES:
        raise ValueError(f'census_scope must be one of {", ".join(windowed.CENSUS_SCOPES)}; got '
                         f'{self.census_scope!r}.')
      if self.window_chunks < 1 or not 0 <= self.window_severity <= 5:
        raise ValueError(f'window_chunks must be >= 1 and window_severity in 0-5; got {self.window_chunks}, '
                         f'{self.window_severity}.')
      if self.label_skew_alpha < 0 or not 0 < self.switch_fraction <= 1:
        raise ValueError(f'label_skew_alpha must be >= 0 and switch_fraction in (0, 1]; got '
                         f'{self.label_skew_alpha:g}, {self.switch_fraction:g}.')
      return
    if self.name == 'concept_drift':
      if self.drift_type not in concept_drift.DRIFT_TYPES:
        raise ValueError(f'drift_type must be one of {", ".join(concept_drift.DRIFT_TYPES)}; got '
                         f'{self.drift_type!r}.')
      if self.num_concepts < 2:
        raise ValueError(f'num_concepts must be >= 2; got {self.num_concepts}.')
      if not 0.0 <= self.drift_start <= self.drift_end <= 1.0:
        raise ValueError(f'need 0 <= drift_start <= drift_end <= 1; got {self.drift_start:g}, {self.drift_end:g}.')
      if self.drift_length < 1 or self.concept_period < 1:
        raise ValueError(f'drift_length and concept_period must be >= 1; got {self.drift_length}, '
                         f'{self.concept_period}.')
      return
    if self.mixture_schedule not in mixture_drift.MIXTURE_SCHEDULES:
      raise ValueError(f'mixture_schedule must be one of {", ".join(mixture_drift.MIXTURE_SCHEDULES)}; got '
                       f'{self.mixture_schedule!r}.')
    if self.mixture_test not in mixture_drift.MIXTURE_TESTS:
      raise ValueError(f'mixture_test must be one of {", ".join(mixture_drift.MIXTURE_TESTS)}; got '
                       f'{self.mixture_test!r}.')
    if not self.num_cycles > 0 or not self.total_rounds / self.num_cycles >= 2:
      raise ValueError(f'num_cycles must be > 0 with cycles of at least 2 rounds; got {self.num_cycles:g} over '
                       f'{self.total_rounds} rounds.')


def build(config: Config, base_client_ids: Sequence[Sequence[str]], base_client_sizes: Sequence[dict[str, int]],
          clients_per_round: int, seed: int, shift_free: bool = False, num_classes: int = 2) -> scenario.Scenario:
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
    return periodic.PeriodicScenario(sampler)
  if config.name == 'dirichlet_mixture':
    return dirichlet_mixture.DirichletMixtureScenario(
        base_client_ids, base_client_sizes, clients_per_round, config.dirichlet_components, config.component_alpha,
        config.unseen_fraction, seed, config.num_clients, shift_free)
  if config.name == 'windowed':
    return windowed.WindowedScenario(base_client_ids, base_client_sizes, clients_per_round, config, seed, num_classes,
                            shift_free)
  if config.name == 'concept_drift':
    return concept_drift.ConceptDriftScenario(base_client_ids, base_client_sizes, clients_per_round, config, seed,
                                              shift_free)
  if config.name == 'evolving_domains':
    return evolving_domains.EvolvingDomainsScenario(base_client_ids, config.evolving_base, config.num_domains,
                                   config.rotation_step, config.target_extra_rotation, config.num_clients,
                                   clients_per_round, seed, shift_free, config.dirichlet_alpha, num_classes,
                                   config.rotation_planes)
  schedule = 'none' if shift_free else config.mixture_schedule
  return mixture_drift.MixtureDriftScenario(base_client_ids, base_client_sizes, config.num_clients, clients_per_round,
                              config.total_rounds / config.num_cycles, schedule, config.mixture_test, seed)
