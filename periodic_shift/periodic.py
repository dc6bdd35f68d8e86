"""The periodic day/night shift of the Diurnal-or-Nocturnal paper (Eq. 2) as a scenario."""

import dataclasses

import numpy as np

from periodic_shift import client_sampler
from periodic_shift import day_probability
from periodic_shift import scenario
from utils import settings

NAME = 'periodic'
LENGTH_DEPENDENCE = None
# Test accuracy oscillates within a period under the shift: the paper compares its mean over the last period.
HEADLINE_METRIC = 'test_accuracy_last_period_mean'


@dataclasses.dataclass(frozen=True)
class Settings:
  """q(t) of Eq. 3 (the Diurnal-or-Nocturnal paper); its period T is the run's `--period`."""
  shift_fn: str = settings.setting('linear', f'q(t), one of {", ".join(day_probability.SHIFT_FUNCTIONS)}.')
  shift_p: float = settings.setting(1.0, 'Exponent p of q(t) (Eq. 3), > 0.')

  def validate(self, schedule: scenario.Schedule) -> None:
    day_probability.validate(self.shift_fn, schedule.period, self.shift_p)


def run_name(config: Settings, schedule: scenario.Schedule) -> str:
  """`<shift_fn>_p<shift_p>_T<period>`: the form of q(t) names a periodic run."""
  return f'{config.shift_fn}_p{config.shift_p:g}_T{schedule.period}'


def build(config: Settings, population: scenario.Population, schedule: scenario.Schedule,
          shift_free: bool = False) -> 'PeriodicScenario':
  """m clients per round, each wholly of one mode, drawn with q(t) (`client_sampler.RoundSampler`); without the
  shift, with the population's day share in every round."""
  ids = population.client_ids
  day_share = len(ids[client_sampler.DAY]) / sum(len(mode_ids) for mode_ids in ids)
  q = day_probability.build_day_probability_fn('none' if shift_free else config.shift_fn, schedule.period,
                                               config.shift_p, day_share)
  sampler = client_sampler.RoundSampler(ids, schedule.clients_per_round, client_sampler.day_night_probabilities(q),
                                        schedule.seed)
  return PeriodicScenario(sampler)


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


def _check_smoke_run(rows: scenario.Rows, summary, shift_free: bool) -> list[str]:
  """Two rounds of one period: q(1) = 0 (every sampled client a night client), q(2) = 1; without the shift, both
  rounds sample the population's day share."""
  del summary  # Unused.
  q = [row['q'] for row in rows]
  if shift_free:
    problems = [] if q[0] == q[1] and 0 < q[0] < 1 else [f'q is {q}, not the population\'s day share in both rounds']
  else:
    problems = scenario.equality_problems('q', q, [0.0, 1.0])
  return problems + scenario.share_problems(rows[-1], ('day_fraction',))


SMOKE_RUN = scenario.SmokeRun({}, _check_smoke_run)
