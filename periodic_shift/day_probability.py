"""Day probability q(t): the chance that a client participating in round t comes from the day mode.

Section 2 of Zhu et al. (2022), "Diurnal or Nocturnal?". Clients of round t come from the day mode (mode 1) with
probability q(t) and from the night mode (mode 2) with probability 1 - q(t) (Eq. 2). q is periodic with period T:

- `linear`:        q_{L,p}(t) = |2 (t mod T) / T - 1|^p                      (Eq. 3)
- `cosine`:        q_{C,p}(t) = [(cos(2 pi t / T) + 1) / 2]^p                 (Eq. 3)
- `block_cyclic`:  1 for the first T/2 rounds of each period, 0 for the rest (the block-cyclic shift of semi-cyclic
                   SGD, Eichner et al., 2019; for odd T the day block has ceil(T/2) rounds).
- `none`:          no shift (the paper's No-Dist-Shift setting): every client of the union population is equally
                   likely, so q is the day share of all clients, constant in t. See `client_sampler`.

Both smooth functions are 1 (all day) at t mod T = 0 and 0 (all night) at t mod T = T/2; p < 1 gives more day
rounds, p > 1 more night rounds. These are the simulated environment's functions (numpy); the learners' temporal
priors, which run inside TFF computations, are in `algorithms/core/temporal_prior`.
"""

from typing import Callable

import numpy as np

SHIFT_FUNCTIONS = ('linear', 'cosine', 'block_cyclic', 'none')

DayProbabilityFn = Callable[[int], float]


def linear(t, period: int, p: float = 1.0):
  """q_{L,p}(t) of Eq. 3; `t` is a round number or an array of them."""
  return np.abs(2.0 * np.mod(t, period) / period - 1.0) ** p


def cosine(t, period: int, p: float = 1.0):
  """q_{C,p}(t) of Eq. 3; `t` is a round number or an array of them."""
  return ((np.cos(2.0 * np.pi * np.asarray(t, np.float64) / period) + 1.0) / 2.0) ** p


def block_cyclic(t, period: int):
  """1.0 in the first ceil(T/2) rounds of each period (day block), else 0.0 (night block)."""
  return np.where(np.mod(t, period) < (period + 1) // 2, 1.0, 0.0)


def validate(shift_fn: str, period: int, p: float) -> None:
  """Raises ValueError with a one-line message if the shift parameters are invalid."""
  if shift_fn not in SHIFT_FUNCTIONS:
    raise ValueError(f'--shift_fn must be one of {", ".join(SHIFT_FUNCTIONS)}; got {shift_fn!r}.')
  if period < 2:
    raise ValueError(f'--period must be at least 2 rounds; got {period}.')
  if not p > 0:
    raise ValueError(f'--shift_p must be > 0; got {p}.')


def build_day_probability_fn(shift_fn: str, period: int, p: float,
                             day_population_share: float) -> DayProbabilityFn:
  """Returns t -> q(t) for `shift_fn`.

  Args:
    shift_fn: One of `SHIFT_FUNCTIONS`.
    period: T, the number of rounds in one day.
    p: The exponent of Eq. 3 (used by `linear` and `cosine`).
    day_population_share: The day share of the union population, which is q(t) under `none`.
  """
  validate(shift_fn, period, p)
  if shift_fn == 'linear':
    return lambda t: float(linear(t, period, p))
  if shift_fn == 'cosine':
    return lambda t: float(cosine(t, period, p))
  if shift_fn == 'block_cyclic':
    return lambda t: float(block_cyclic(t, period))
  return lambda t: float(day_population_share)
