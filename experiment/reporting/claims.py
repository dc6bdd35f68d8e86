"""A paper's claims as data (`experiment/claims/<page>.toml`) and the one rule that gives each its verdict.

A claim compares a figure of one method against each of its baselines, or against another figure of the method's
own run (a correlation against its noise floor), within each setting of the claim's grid (`per`: the swept flags the
claim is checked in one by one). Each seed run by both sides gives one paired difference
d_s = figure(method, s) - figure(baseline, s); the verdict reads the 95% t interval of their mean
(`interval`, Student's t over the n seeds):

  reproduced           the interval lies wholly on the paper's side of zero (`direction`: higher or lower),
  not reproduced       it lies wholly on the other side,
  inconclusive (n seeds)  otherwise, or whenever n is below the claim's minimum (`min_seeds`: at least 5, and at
                       least 10 for a grid on real data whose runs cost minutes, where seeds spread widely).

A claim file:

  page = "docs/results/pfedem.md"             # the page whose generated regions the claims fill
  [[claim]]
  text = "pFedEM has the highest test accuracy over the run"
  where = "Figures 3, 5"                      # where in the paper
  paper = "curves, EMNIST and CIFAR"          # the paper's number or form, as text
  grid = "pfedem"                             # docs/results/data/<grid>.csv
  figure = "test_mixture_accuracy_mean"       # a column of that file
  method = "pfedem"
  against = ["vanilla_single", "fedem"]       # baselines; or against_figure = "..." (the same run's other
                                              # figure), or against_value = 0.0
  direction = "higher"                        # or "lower": the side of zero the paper claims
  per = ["mixture_schedule"]                  # the grid's flags the claim is checked in separately (default none)
  at = {shift_p = ["0.25", "4"]}              # only runs with these values (default all)
  min_seeds = 5

A claim on a grid that has no data file yet has n = 0 and is inconclusive (0 seeds).
"""

import dataclasses
import tomllib
from typing import Optional, Sequence

import numpy as np
from scipy import stats

CONFIDENCE = 0.95
REPRODUCED = 'reproduced'
NOT_REPRODUCED = 'not reproduced'
MIN_SEEDS = 5
_DIRECTIONS = ('higher', 'lower')
_KEYS = frozenset({'text', 'where', 'paper', 'grid', 'figure', 'method', 'against', 'against_figure',
                   'against_value', 'direction', 'per', 'at', 'min_seeds'})
_AGAINST = ('against', 'against_figure', 'against_value')


class ClaimError(ValueError):
  """A claim file that cannot be read as claims; its message names the file and the claim."""


@dataclasses.dataclass(frozen=True)
class Claim:
  text: str
  where: str
  paper: str
  grid: str
  figure: str
  method: str
  direction: str
  against: tuple[str, ...] = ()
  against_figure: Optional[str] = None
  against_value: Optional[float] = None
  per: tuple[str, ...] = ()
  at: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (flag, the values a run may have), ...
  min_seeds: int = MIN_SEEDS

  def baselines(self) -> tuple[Optional[str], ...]:
    """The methods compared against; (None,) for a comparison with the run's own `against_figure` or a value."""
    return self.against or (None,)

  def selects(self, row: dict) -> bool:
    return all(row.get(flag) in values for flag, values in self.at)


@dataclasses.dataclass(frozen=True)
class ClaimFile:
  page: str
  claims: tuple[Claim, ...]


@dataclasses.dataclass(frozen=True)
class Interval:
  """n paired differences: their mean, its standard error and the 95% t interval [low, high] (nan without two)."""
  n: int
  mean: float
  standard_error: float
  low: float
  high: float


@dataclasses.dataclass(frozen=True)
class Verdict:
  """One claim in one setting against one baseline: n paired seeds, the mean difference, its standard error and 95%
  interval, and the verdict by the rule (module docstring)."""
  claim: Claim
  setting: tuple  # ((flag, value), ...) of the claim's `per` flags.
  baseline: Optional[str]
  difference: Interval

  @property
  def verdict(self) -> str:
    return verdict(self.difference, self.claim.direction, self.claim.min_seeds)


def interval(differences: Sequence[float]) -> Interval:
  """The 95% Student t interval of the mean of `differences`."""
  d = np.asarray(differences, float)
  if len(d) < 2:
    return Interval(len(d), float(d.mean()) if len(d) else float('nan'), float('nan'), float('nan'), float('nan'))
  mean, error = float(d.mean()), float(d.std(ddof=1) / np.sqrt(len(d)))
  half = float(stats.t.ppf(0.5 + CONFIDENCE / 2, len(d) - 1)) * error
  return Interval(len(d), mean, error, mean - half, mean + half)


def verdict(difference: Interval, direction: str, min_seeds: int) -> str:
  """The one rule (module docstring) on a paired difference's 95% interval."""
  low, high, n = difference.low, difference.high, difference.n
  paper_low, paper_high = (low, high) if direction == 'higher' else (-high, -low)
  if n >= max(min_seeds, 2) and paper_low > 0:
    return REPRODUCED
  if n >= max(min_seeds, 2) and paper_high < 0:
    return NOT_REPRODUCED
  return f'inconclusive ({n} seeds)'


def _claim(entry: dict, where: str) -> Claim:
  unknown = set(entry) - _KEYS
  missing = {'text', 'grid', 'figure', 'method', 'direction'} - set(entry)
  if unknown or missing:
    raise ClaimError(f'{where}: ' + (f'unknown keys {sorted(unknown)}' if unknown else f'missing {sorted(missing)}'))
  if entry['direction'] not in _DIRECTIONS:
    raise ClaimError(f'{where}: direction must be one of {_DIRECTIONS}; got {entry["direction"]!r}.')
  if sum(key in entry for key in _AGAINST) != 1:
    raise ClaimError(f'{where}: give one of against (baselines), against_figure (the run\'s own figure) or '
                     'against_value.')
  min_seeds = entry.get('min_seeds', MIN_SEEDS)
  if not isinstance(min_seeds, int) or min_seeds < MIN_SEEDS:
    raise ClaimError(f'{where}: min_seeds must be an integer >= {MIN_SEEDS}; got {min_seeds!r}.')
  return Claim(text=entry['text'], where=entry.get('where', ''), paper=entry.get('paper', ''), grid=entry['grid'],
               figure=entry['figure'], method=entry['method'], direction=entry['direction'],
               against=tuple(entry.get('against', ())), against_figure=entry.get('against_figure'),
               against_value=entry.get('against_value'), per=tuple(entry.get('per', ())),
               at=tuple((flag, tuple(values) if isinstance(values, list) else (values,))
                        for flag, values in sorted(entry.get('at', {}).items())),
               min_seeds=min_seeds)


def load(path: str) -> ClaimFile:
  """The claims of one file (module docstring); `ClaimError` for a file that does not read as claims."""
  try:
    with open(path, 'rb') as f:
      spec = tomllib.load(f)
  except (OSError, tomllib.TOMLDecodeError) as error:
    raise ClaimError(f'{path}: {error}') from None
  if set(spec) != {'page', 'claim'}:
    raise ClaimError(f'{path}: a claim file holds page and [[claim]] tables; got {sorted(spec)}.')
  return ClaimFile(page=spec['page'],
                   claims=tuple(_claim(entry, f'{path}, claim {index + 1}') for index, entry in
                                enumerate(spec['claim'])))


def _number(text: str) -> Optional[float]:
  try:
    return float(text)
  except ValueError:
    return None


def verdicts(claim: Claim, rows: Sequence[dict]) -> list[Verdict]:
  """The claim's verdicts on its grid's rows (`results_data`: one dict of strings per run), one per setting of its
  `per` flags and baseline, in the rows' order of settings (one setting without values when no row is selected)."""
  settings: list[tuple] = []
  by_setting: dict[tuple, dict[tuple[str, str], dict]] = {}
  for row in filter(claim.selects, rows):
    setting = tuple((flag, row[flag]) for flag in claim.per)
    if setting not in by_setting:
      settings.append(setting)
      by_setting[setting] = {}
    key = (row['algorithm'], row['seed'])
    if key in by_setting[setting]:
      raise ClaimError(f'claim {claim.text!r}: two runs of {key[0]}, seed {key[1]} in one setting: name the flags '
                       'that tell them apart in its per or at.')
    by_setting[setting][key] = row
  if not settings:
    settings, by_setting = [()], {(): {}}
  result = []
  for setting in settings:
    runs = by_setting[setting]
    for baseline in claim.baselines():
      differences = []
      for (method, seed), row in sorted(runs.items()):
        if method != claim.method:
          continue
        mine = _number(row.get(claim.figure, ''))
        if claim.against_value is not None:
          theirs = float(claim.against_value)
        elif baseline is None:
          theirs = _number(row.get(claim.against_figure, ''))
        else:
          theirs = _number(runs[(baseline, seed)].get(claim.figure, '')) if (baseline, seed) in runs else None
        if mine is not None and theirs is not None:
          differences.append(mine - theirs)
      result.append(Verdict(claim, setting, baseline, interval(differences)))
  return result
