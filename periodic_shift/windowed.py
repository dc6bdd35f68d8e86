"""ShiftEx's windows of covariate and label shift as a scenario (Bhope et al., "Shift Happens: Mixture of Experts based
Continual Adaptation in Federated Learning", 2025, Section 6)."""

import dataclasses
from typing import Optional, Sequence

import numpy as np

from periodic_shift import domains as domains_lib
from periodic_shift import scenario
from utils import settings

NAME = 'windowed'
LENGTH_DEPENDENCE = 'its windows\' regimes are drawn for ceil(--total_rounds / --window_rounds) windows at once'
# The ShiftEx paper's measure: accuracy on test data mixed as the window's.
HEADLINE_METRIC = 'test_mixture_accuracy'
WINDOWINGS = ('tumbling', 'sliding')
CENSUS_SCOPES = ('population', 'cohort')
# Sliding windows: the round of each later window's census. settled: round start + overlap, the first in which a
# mover holds only its new regime; midpoint: round start + floor((overlap + 1) / 2), the first in which the new
# regime's planned share exceeds half, before label thinning (a new regime's Dirichlet label weights keep
# mean(w) / max(w) of its examples, so there it is most movers' minority).
CENSUS_ROUNDS = ('settled', 'midpoint')


@dataclasses.dataclass(frozen=True)
class Settings:
  """The windows, their regimes and the population (`WindowedScenario`); the rounds of a window are the run's
  `--window_rounds` (`scenario.Schedule`)."""
  windowing: str = settings.setting('tumbling', 'tumbling or sliding (overlapping) windows.')
  window_overlap: int = settings.setting(8, 'Sliding windows: rounds over which a moved client holds both regimes.')
  corruptions: tuple[str, ...] = settings.setting(
      (), 'Corruption families the windows draw from. Default: for image tasks the common corruptions of '
      'CIFAR-10-C (Hendrycks and Dietterich, 2019) the suite has (' + ', '.join(domains_lib.COMMON_CORRUPTIONS) +
      '), for vector inputs ' + ', '.join(domains_lib.VECTOR_CORRUPTIONS) + '.')
  label_skew_alpha: float = settings.setting(
      1.0, 'Dirichlet concentration of each window\'s label weights; 0 = no label shift.')
  switch_fraction: float = settings.setting(
      0.5, 'Share of clients moving to the new regime at each window boundary.')
  window_chunks: int = settings.setting(
      2, 'Each client\'s data are cut into this many disjoint chunks and window w holds chunk w mod N, so '
      'consecutive windows hold fresh examples; 1 replays all of them in every window.')
  window_severity: int = settings.setting(
      0, 'The corruption severity (1-5) of every window; 0 draws one per window from --min_window_severity to 5.')
  min_window_severity: int = settings.setting(
      1, 'The lowest severity a window draws (with --window_severity=0).')
  census_scope: str = settings.setting(
      'population', 'Who reports in a census round (ShiftEx): every party (population) or those that train in that '
      'window (cohort).')
  census_round: str = settings.setting(
      'settled', 'Sliding windows: the census of each later window at its round start + overlap, where every mover '
      'holds only its new regime (settled), or at start + floor((overlap + 1) / 2), where the new regime\'s share '
      'first exceeds half before label thinning (midpoint).')
  num_clients: Optional[int] = settings.setting(
      None, 'The population, drawn from every base\'s clients (None: all of them).')

  def validate(self, schedule: scenario.Schedule) -> None:
    if self.num_clients is not None and self.num_clients < 1:
      raise ValueError(f'--num_clients must be >= 1; got {self.num_clients}.')
    if schedule.window_rounds < 1 or self.windowing not in WINDOWINGS:
      raise ValueError(f'--window_rounds must be >= 1 and --windowing one of {", ".join(WINDOWINGS)}; got '
                       f'{schedule.window_rounds}, {self.windowing!r}.')
    if self.windowing == 'sliding' and not 0 <= self.window_overlap < schedule.window_rounds:
      raise ValueError(f'--window_overlap must be in [0, --window_rounds); got {self.window_overlap}.')
    unknown = set(self.corruptions) - set(domains_lib.CORRUPTIONS)
    if unknown:
      raise ValueError(f'--corruptions must be some of {", ".join(domains_lib.CORRUPTIONS)}; got '
                       f'{",".join(self.corruptions)}.')
    if self.census_scope not in CENSUS_SCOPES:
      raise ValueError(f'--census_scope must be one of {", ".join(CENSUS_SCOPES)}; got {self.census_scope!r}.')
    if self.census_round not in CENSUS_ROUNDS:
      raise ValueError(f'--census_round must be one of {", ".join(CENSUS_ROUNDS)}; got {self.census_round!r}.')
    if self.window_chunks < 1 or not 0 <= self.window_severity <= 5 or not 1 <= self.min_window_severity <= 5:
      raise ValueError(f'--window_chunks must be >= 1, --window_severity in 0-5 and --min_window_severity in 1-5; '
                       f'got {self.window_chunks}, {self.window_severity}, {self.min_window_severity}.')
    if self.label_skew_alpha < 0 or not 0 < self.switch_fraction <= 1:
      raise ValueError(f'--label_skew_alpha must be >= 0 and switch_fraction in (0, 1]; got '
                       f'{self.label_skew_alpha:g}, {self.switch_fraction:g}.')


def run_name(config: Settings, schedule: scenario.Schedule) -> str:
  del config, schedule  # Unused.
  return NAME


def build(config: Settings, population: scenario.Population, schedule: scenario.Schedule,
          shift_free: bool = False) -> 'WindowedScenario':
  """The run cut into windows of `window_rounds`, a new regime at each boundary (regime 0 throughout without the
  shift)."""
  if not config.corruptions:
    families = domains_lib.COMMON_CORRUPTIONS if population.images else domains_lib.VECTOR_CORRUPTIONS
    config = dataclasses.replace(config, corruptions=families)
  return WindowedScenario(population.client_ids, population.client_sizes, schedule.clients_per_round, config,
                          schedule.total_rounds, schedule.seed, population.num_classes, schedule.window_rounds,
                          shift_free)


class WindowedScenario(scenario.Scenario):
  """ShiftEx's windows: the run is cut into windows W0, W1, ... of `window_rounds` rounds.

  Regimes: regime 0 (W0, the bootstrap window) is the clean data. Window w >= 1 brings regime w: a corruption family
  drawn from `corruptions` (for images by default CIFAR-10-C's families, `domains.COMMON_CORRUPTIONS`) with a
  severity drawn from `min_window_severity`-5, or `window_severity` in every window (covariate shift,
  `periodic_shift.domains`), and label weights drawn from Dir(label_skew_alpha) over the classes (label shift: a
  client in the regime keeps an example of label y with probability w_y / max w; alpha 0 turns label shift off).
  Regimes are drawn from the run's seed.

  Clients: every client of every base population, or `num_clients` of them drawn at random (seeded); each round
  draws `clients_per_round` of them uniformly without replacement (the paper selects 20% of its pool per round: set
  the flags to that). At each window boundary exactly
  floor(switch_fraction N) clients, drawn anew, move to the new regime and the others keep theirs ("50% of the
  participating clients keep their previous distribution and the other 50% receive a new one"; here over the whole
  population, so the split is exact). `tumbling`: a client's data are wholly in its regime. `sliding`: for the
  first `window_overlap` rounds of a window a client that just moved holds both regimes, the new one's share
  growing (t - start + 1) / (overlap + 1), split binomially into disjoint parts of its data (overlapping windows).

  Data per window (`window_chunks` N): a client's examples are cut, in one seeded order per client, into N disjoint
  chunks of (nearly) equal size, and window w holds chunk w mod N. With N >= 2 consecutive windows hold disjoint
  examples, so a party whose distribution did not change compares its window with the previous one as two fresh
  samples of the same distribution (the paper's parties stream new data each window; its detector's statistics then
  follow their null). N = 1 replays all of a client's examples in every window (an unchanged party's label
  histogram is then identical across windows, its JSD exactly 0). A sliding window's binomial split cuts the
  window's chunk.

  Domains: (base b, regime r), index b R + r, named `<base>_w<r>` (+ the corruption); test sets are the bases' test
  data corrupted by the regime (no label skew). `test_weights` weighs them by the current window's population
  (each client's examples in its regime), so `test_mixture_accuracy` is the accuracy on the data the parties hold
  now, the paper's measure (each party's current-window test data, sample-weighted). `window` and
  `new_regime_share` (the share of the round's examples in the newest regime) go to metrics.csv, whose window
  boundaries `experiment.core.shift_metrics` cuts at.
  Census (`census_plan`, for methods whose parties all report at window boundaries, ShiftEx's Algorithm 2): in W0's
  last round and at each later window's census round (`census_rounds`) every client of the population
  (`census_scope` population; cohort: every client that trains in some round of that window) holds the
  data it holds in that round. `shift_free` (No-Dist-Shift): every client stays in regime 0.
  """

  def __init__(self, base_client_ids: Sequence[Sequence[str]], base_client_sizes: Sequence[dict[str, int]],
               clients_per_round: int, config: Settings, total_rounds: int, seed: int, num_classes: int,
               window_rounds: int, shift_free: bool = False):
    self._clients = scenario.union_population(base_client_ids, clients_per_round)
    if config.num_clients is not None:  # A population drawn from the union (seeded).
      if not clients_per_round <= config.num_clients <= len(self._clients):
        raise ValueError(f'--num_clients must be between --clients_per_round ({clients_per_round}) and the '
                         f'clients of every base ({len(self._clients)}); got {config.num_clients}.')
      kept = np.sort(np.random.default_rng([seed, 15]).permutation(len(self._clients))[:config.num_clients])
      self._clients = [self._clients[index] for index in kept]
    self._sizes = base_client_sizes
    self._num_bases = len(base_client_ids)
    self._clients_per_round = clients_per_round
    self._config = config
    self._window_rounds = window_rounds
    self._total_rounds = total_rounds
    self._seed = seed
    self._num_regimes = 1 if shift_free else max(1, -(-total_rounds // window_rounds))
    rng = np.random.default_rng([seed, 9])
    self.regimes = [(None, 0)] + [
        (str(rng.choice(config.corruptions)), int(rng.integers(config.min_window_severity, 6)))
        for _ in range(self._num_regimes - 1)]
    if config.window_severity:  # One severity for every window (the same draws otherwise).
      self.regimes = [(family, config.window_severity if family else 0) for family, _ in self.regimes]
    count = len(self._clients)
    self.assignments = np.zeros((self._num_regimes, count), np.int64)  # Regime of each client in each window.
    for window in range(1, self._num_regimes):
      self.assignments[window] = self.assignments[window - 1]
      movers = rng.choice(count, size=int(np.floor(config.switch_fraction * count)), replace=False)
      self.assignments[window, movers] = window
    skew = np.random.default_rng([seed, 10])
    self._label_seed = int(np.random.default_rng([seed, 13]).integers(2**31))
    self._order_seed = int(np.random.default_rng([seed, 14]).integers(2**31))  # The clients' chunk order.
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

  def domain_regimes(self) -> list[int]:
    """The regime of every domain (domain b R + r is regime r)."""
    return [domain % self._num_regimes for domain in range(self.num_domains)]

  def window_starts(self) -> list[int]:
    return [1 + window * self._window_rounds for window in range(self._num_regimes)]

  def window(self, round_num: int) -> int:
    return min((round_num - 1) // self._window_rounds, self._num_regimes - 1)

  def test_weights(self, round_num: int) -> np.ndarray:
    """Weights [num_domains]: the share of the population's examples in each (base, regime) in the round's window
    (a sliding window's movers counted in their new regime)."""
    weights = np.zeros(self.num_domains)
    regimes = self.assignments[self.window(round_num)]
    for index, (base, client_id) in enumerate(self._clients):
      weights[base * self._num_regimes + regimes[index]] += self._sizes[base][client_id]
    return weights / weights.sum()

  def label_weights(self, regime: int) -> Optional[tuple[float, ...]]:
    """The regime's label weights w (None: no skew)."""
    return self._label_weights[regime]

  def _regime_shares(self, client_index: int, round_num: int) -> tuple[int, int, float]:
    """(old regime, new regime, share of the new) of a client's data in the round."""
    window = self.window(round_num)
    current = int(self.assignments[window, client_index])
    previous = int(self.assignments[window - 1, client_index]) if window > 0 else current
    since = round_num - 1 - window * self._window_rounds
    if self._config.windowing == 'sliding' and current != previous and since < self._config.window_overlap:
      return previous, current, (since + 1) / (self._config.window_overlap + 1)
    return current, current, 0.0

  def census_rounds(self) -> list[int]:
    """The census rounds: W0's last round (every party's reference window) and, in each later window, its first
    round (tumbling) or its round `census_round` (sliding, `CENSUS_ROUNDS`)."""
    offset = 0
    if self._config.windowing == 'sliding':
      overlap = self._config.window_overlap
      offset = overlap if self._config.census_round == 'settled' else (overlap + 1) // 2
    return [self._window_rounds] + [start + offset for start in self.window_starts()[1:]]

  def census_plan(self, round_num: int) -> Optional[scenario.RoundPlan]:
    if round_num not in self.census_rounds():
      return None
    indices = range(len(self._clients))
    if self._config.census_scope == 'cohort':  # The parties that train in some round of the census's window.
      window = self.window(round_num)
      last = min(self._total_rounds, (window + 1) * self._window_rounds)
      indices = sorted({int(index) for r in range(1 + window * self._window_rounds, last + 1)
                        for index in self._chosen(r)})
    return scenario.RoundPlan(tuple(self._client_plan(index, round_num) for index in indices))

  def _chosen(self, round_num: int) -> np.ndarray:
    """The indices of round `round_num`'s participants."""
    return np.random.default_rng([self._seed, 11, round_num]).choice(len(self._clients), self._clients_per_round,
                                                                     replace=False)

  def round_plan(self, round_num: int) -> scenario.RoundPlan:
    return scenario.RoundPlan(tuple(self._client_plan(int(index), round_num) for index in self._chosen(round_num)))

  def _client_plan(self, index: int, round_num: int) -> scenario.ClientPlan:
    """What client `index` holds in round `round_num`: its window's chunk, in its regime (a sliding window's mover:
    split binomially between its old and new regime, drawn from (seed, round, client))."""
    base, client_id = self._clients[index]
    old, new, share = self._regime_shares(index, round_num)
    first, size = base * self._num_regimes, self._sizes[base][client_id]
    chunks = self._config.window_chunks
    chunk = self.window(round_num) % chunks
    start, stop = (chunk * size) // chunks, ((chunk + 1) * size) // chunks
    moved = int(np.random.default_rng([self._seed, 12, round_num, index]).binomial(stop - start, share))
    ranges = ((first + old, start, stop - start - moved), (first + new, stop - moved, moved))
    order_seed = self._order_seed if chunks > 1 else None  # N = 1: the whole data, in the round's order.
    parts = tuple(scenario.Part(domain, client_id, count, skip=skip, label_weights=self.label_weights(domain - first),
                                order_seed=order_seed, label_seed=self._label_seed)
                  for domain, skip, count in ranges if count)
    return scenario.ClientPlan(f'{base}/{client_id}', parts)

  def round_metrics(self, round_num: int, plan: scenario.RoundPlan) -> dict[str, float]:
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


def _check_smoke_run(rows: scenario.Rows, summary, shift_free: bool) -> list[str]:
  """Windows of one round: round 2 is window 1, where a share of the clients hold the new regime (none without the
  shift). Evaluated at round 2 only, so window 2 (round 2, as the summary counts from 1) has its max there."""
  windows = summary.get('window_metrics') or []
  problems = scenario.equality_problems('window', [row['window'] for row in rows], [0.0, 0.0 if shift_free else 1.0])
  problems += scenario.share_problems(rows[1], ('new_regime_share',))
  problems += scenario.equality_problems('summary windows', [w['window'] for w in windows], [1] if shift_free else [2])
  if windows:
    problems += scenario.equality_problems('max_accuracy', windows[0]['max_accuracy'],
                                           rows[1].get('test_mixture_accuracy'))
  return problems


# 40 parties of the synthetic task's 660: every party reports to ShiftEx in its census rounds.
SMOKE_RUN = scenario.SmokeRun({'window_rounds': 1, 'windowing': 'sliding', 'window_overlap': 0, 'num_clients': 40},
                              _check_smoke_run)
