"""The periodic day/night shift of the Diurnal-or-Nocturnal paper (Eq. 2) as a scenario."""

import numpy as np

from periodic_shift import client_sampler
from periodic_shift import scenario


class PeriodicScenario(scenario.Scenario):
  """The Diurnal-or-Nocturnal paper's periodic day/night shift (Eq. 2): each client is wholly
  of the domain (mode) it was drawn from."""

  def __init__(self, sampler: client_sampler.RoundSampler):
    self._sampler = sampler

  @property
  def num_domains(self) -> int:
    return self._sampler.num_modes

  def round_plan(self, round_num: int) -> scenario.RoundPlan:
    sample = self._sampler.sample(round_num)
    return scenario.RoundPlan(tuple(scenario.ClientPlan(client_id, (scenario.Part(int(mode), client_id),))
                           for client_id, mode in zip(sample.client_ids, sample.modes)))

  def round_metrics(self, round_num: int, plan: scenario.RoundPlan) -> dict[str, float]:
    """`q`: the true q(t); `day_fraction`: the day share of the round's clients."""
    modes = np.array([client.parts[0].domain for client in plan.clients])
    return {'q': float(self._sampler.mode_probabilities(round_num)[client_sampler.DAY]),
            'day_fraction': float(np.mean(modes == client_sampler.DAY))}
