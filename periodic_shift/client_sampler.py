"""Round sampler: which clients participate in round t, and from which mode (Eq. 2 of Zhu et al., 2022).

Modes are indexed from 0 in code: `DAY` = 0 is the paper's mode 1 (day, I_1) and `NIGHT` = 1 its mode 2 (night,
I_2). The sampler handles any number K >= 2 of modes, each a disjoint population of client ids.

Round t draws m clients:
  1. the number of clients from each mode, (n_1, ..., n_K) ~ Multinomial(m, pi(t)), where pi(t) is the vector of
     mode probabilities; for day/night pi(t) = (q(t), 1 - q(t)) (Eq. 2), so n_day ~ Binomial(m, q(t));
  2. n_k clients of mode k uniformly without replacement (TFF's `tff.simulation.build_uniform_sampling_fn`, one per
     mode with its own seed).
Every random choice of round t is a function of (seed, t) alone, so a resumed run draws the same clients.

No shift (`none`): pi_k = N_k / N, the population shares. Then every client of the union population has the same
chance m / N of participating in a round, which is what "every client of the union population equally likely"
requires (the per-round mode counts are multinomial rather than hypergeometric; the marginals are identical).
"""

import dataclasses
from typing import Callable, Sequence

import numpy as np
import tensorflow_federated as tff

DAY = 0
NIGHT = 1
MODE_NAMES = ('day', 'night')

ModeProbabilitiesFn = Callable[[int], np.ndarray]


@dataclasses.dataclass(frozen=True)
class RoundSample:
  """The participants of one round.

  Attributes:
    client_ids: The m sampled client ids, grouped by mode in mode order.
    modes: int array [m], the true mode of each client (0 = day, 1 = night, ...).
  """
  client_ids: list[str]
  modes: np.ndarray

  def mode_fraction(self, mode: int) -> float:
    return float(np.mean(self.modes == mode))


def day_night_probabilities(day_probability_fn: Callable[[int], float]) -> ModeProbabilitiesFn:
  """pi(t) = (q(t), 1 - q(t)) for a day probability q (Eq. 2)."""

  def mode_probabilities(round_num: int) -> np.ndarray:
    q = day_probability_fn(round_num)
    return np.array([q, 1.0 - q])

  return mode_probabilities


def derived_seed(seed: int, *salt: int) -> int:
  """A 31-bit seed derived from `seed` and `salt` (independent streams for one user seed)."""
  return int(np.random.SeedSequence([seed, *salt]).generate_state(1)[0] >> 1)


class RoundSampler:
  """Draws the participants of each round from K mode populations."""

  def __init__(self, mode_client_ids: Sequence[Sequence[str]], clients_per_round: int,
               mode_probabilities_fn: ModeProbabilitiesFn, seed: int):
    """Initializes the sampler.

    Args:
      mode_client_ids: K >= 2 sequences of client ids, one population per mode.
      clients_per_round: m, at least 1 and at most the smallest population.
      mode_probabilities_fn: t -> pi(t), a probability vector of length K.
      seed: Seeds every draw together with the round number.

    Raises:
      ValueError: For fewer than two modes, or an m that a mode population cannot always provide.
    """
    if len(mode_client_ids) < 2:
      raise ValueError(f'Need at least 2 mode populations; got {len(mode_client_ids)}.')
    smallest = min(len(ids) for ids in mode_client_ids)
    if not 1 <= clients_per_round <= smallest:
      raise ValueError(f'--clients_per_round must be between 1 and the smallest mode population ({smallest}); '
                       f'got {clients_per_round}.')
    self._mode_client_ids = [list(ids) for ids in mode_client_ids]
    self._clients_per_round = clients_per_round
    self._mode_probabilities_fn = mode_probabilities_fn
    self._seed = seed
    self._mode_samplers = [
        tff.simulation.build_uniform_sampling_fn(ids, replace=False, random_seed=derived_seed(seed, mode + 1))
        for mode, ids in enumerate(self._mode_client_ids)
    ]

  @property
  def num_modes(self) -> int:
    return len(self._mode_client_ids)

  def mode_probabilities(self, round_num: int) -> np.ndarray:
    probabilities = np.asarray(self._mode_probabilities_fn(round_num), np.float64)
    if probabilities.shape != (self.num_modes,):
      raise ValueError(f'Expected {self.num_modes} mode probabilities; got shape {probabilities.shape}.')
    return probabilities

  def mode_counts(self, round_num: int) -> np.ndarray:
    """(n_1, ..., n_K) ~ Multinomial(m, pi(t)) for round t (Eq. 2)."""
    rng = np.random.default_rng([self._seed, round_num])
    probabilities = np.clip(self.mode_probabilities(round_num), 0.0, None)
    return rng.multinomial(self._clients_per_round, probabilities / probabilities.sum())

  def sample(self, round_num: int) -> RoundSample:
    """The participants of round `round_num`; a pure function of (seed, round_num)."""
    client_ids, modes = [], []
    for mode, count in enumerate(self.mode_counts(round_num)):
      if count:
        client_ids.extend(self._mode_samplers[mode](round_num, int(count)))
        modes.extend([mode] * int(count))
    return RoundSample(client_ids=client_ids, modes=np.asarray(modes, np.int32))
