"""The shift scenarios by name (`--scenario`), one module each; a module owns its settings (the binary's flags of the
same names), their validation and its build (the contract: `periodic_shift.scenario`). A new scenario is its module
and one line in `MODULES`.

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

from typing import Iterator, Mapping

from periodic_shift import concept_drift
from periodic_shift import dirichlet_mixture
from periodic_shift import evolving_domains
from periodic_shift import mixture_drift
from periodic_shift import periodic
from periodic_shift import scenario
from periodic_shift import windowed
from utils import settings as settings_lib

# The first is `--scenario`'s default.
MODULES = (periodic, mixture_drift, evolving_domains, concept_drift, windowed, dirichlet_mixture)
SCENARIOS = tuple(module.NAME for module in MODULES)
_BY_NAME = {module.NAME: module for module in MODULES}


def module(name: str):
  """The module of scenario `name`; raises ValueError (one line) for an unknown name."""
  if name not in _BY_NAME:
    raise ValueError(f'--scenario must be one of {", ".join(SCENARIOS)}; got {name!r}.')
  return _BY_NAME[name]


def declared_settings() -> Iterator[tuple[str, type, object]]:
  """(scenario name, its Settings class, field) for every setting of every scenario, in registry order."""
  for scenario_module in MODULES:
    for field in settings_lib.declared(scenario_module.Settings):
      yield scenario_module.NAME, scenario_module.Settings, field


def flags() -> list[settings_lib.Flag]:
  """The flag of every scenario setting, named as the setting. A setting several scenarios declare (`--num_clients`)
  is one flag whose default, None, leaves each scenario its own."""
  owners = {}
  for name, settings_class, field in declared_settings():
    flag = settings_lib.flag_of(settings_class, field, help_prefix=f'{name}: ')
    owners.setdefault(field.name, []).append((name, flag))
  specs = []
  for declared in owners.values():
    first = declared[0][1]
    assert all(flag.kind is first.kind for _, flag in declared), f'--{first.name} has two types.'
    if len(declared) > 1:
      first = first._replace(default=None, help='; '.join(f'{flag.help} Default {flag.default}.'
                                                          for _, flag in declared))
    specs.append(first)
  return specs


def settings_from(name: str, values: Mapping):
  """Scenario `name`'s Settings from `values` (setting name -> value, e.g. the flags): a missing or None value keeps
  the scenario's default, a list becomes a tuple."""
  chosen = {}
  for field in settings_lib.declared(module(name).Settings):
    value = values.get(field.name)
    if value is not None:
      chosen[field.name] = tuple(value) if isinstance(value, list) else value
  return module(name).Settings(**chosen)


def validate(name: str, config, schedule: scenario.Schedule) -> None:
  """Raises ValueError (one line, naming the flag) for settings that no population can make valid."""
  module(name)
  config.validate(schedule)


def run_name(name: str, config, schedule: scenario.Schedule) -> str:
  """The scenario's part of a run directory's default name."""
  return module(name).run_name(config, schedule)


def length_dependence(name: str):
  """Why scenario `name`'s rounds depend on `--total_rounds` (a finished run cannot be extended), or None."""
  return module(name).LENGTH_DEPENDENCE


def build(name: str, config, population: scenario.Population, schedule: scenario.Schedule,
          shift_free: bool = False) -> scenario.Scenario:
  """Scenario `name` with its Settings `config` over the task's `population`; `shift_free` removes the shift
  (No-Dist-Shift). Raises ValueError (naming the flag) when the population cannot provide what the settings ask."""
  validate(name, config, schedule)
  return module(name).build(config, population, schedule, shift_free)
