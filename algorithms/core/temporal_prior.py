"""Temporal priors q~(t): the learner's estimate of the share of day clients in round t (Section 3).

Written in TensorFlow so that the server update of a TFF computation can evaluate them; `round_num` may be a
Python int or an integer tensor, and every function returns a float32 tensor.

- `linear`: q~(t) = q_{L,1}(t) = |2 (t mod T) / T - 1|                        (Eq. 3 with p = 1)
- `cosine`: q~(t) = q_{C,1}(t) = (cos(2 pi t / T) + 1) / 2                    (Eq. 3 with p = 1)
- `soft`:   the soft prior of Appendix A.3, which needs the ratio observed in the same round (Eq. 25) and keeps the
            previous value as state:
              q~_S(t) = 1                              if t mod T = 1
                        0                              if t mod T = T/2
                        min(q~_S(t-1), q~'_S(t))       if 1 < t mod T < T/2
                        max(q~_S(t-1), q~'_S(t))       if t mod T > T/2         (Eq. 26)

Choices where the paper is silent:
- Eq. 26 does not cover t mod T = 0. That round ends a period that began at t mod T = 1, so it takes the
  `t mod T > T/2` branch (max), which keeps q~_S non-decreasing up to the reset to 1 at the next round.
- For odd T, T/2 is read as floor(T/2).
- The prior of round t uses t itself (the sampler's round index), not t - 1: the public code lags by one round.
The observed ratio q~'_S(t) of Eq. 25 is computed by each method (FedTEM: the share of samples whose posterior
favours mode 1 over all participating clients of the round).
"""

import math
from typing import Union

import tensorflow as tf

PRIORS = ('linear', 'cosine', 'soft')

RoundNum = Union[int, tf.Tensor]


def _phase(round_num: RoundNum, period: int) -> tf.Tensor:
  """t mod T as an int64 tensor."""
  return tf.math.floormod(tf.cast(round_num, tf.int64), period)


def linear(round_num: RoundNum, period: int) -> tf.Tensor:
  """q_{L,1}(t) (Eq. 3)."""
  phase = tf.cast(_phase(round_num, period), tf.float32)
  return tf.abs(2.0 * phase / period - 1.0)


def cosine(round_num: RoundNum, period: int) -> tf.Tensor:
  """q_{C,1}(t) (Eq. 3)."""
  phase = tf.cast(_phase(round_num, period), tf.float32)
  return (tf.cos(2.0 * math.pi * phase / period) + 1.0) / 2.0


def soft(round_num: RoundNum, period: int, previous: tf.Tensor, observed_ratio: tf.Tensor) -> tf.Tensor:
  """q~_S(t) of Eq. 26 from q~_S(t - 1) = `previous` and q~'_S(t) = `observed_ratio` (Eq. 25)."""
  phase = _phase(round_num, period)
  half = period // 2
  previous = tf.cast(previous, tf.float32)
  observed_ratio = tf.cast(observed_ratio, tf.float32)
  decreasing = tf.minimum(previous, observed_ratio)
  increasing = tf.maximum(previous, observed_ratio)
  value = tf.where((phase > 1) & (phase < half), decreasing, increasing)
  value = tf.where(tf.equal(phase, half), 0.0, value)
  return tf.where(tf.equal(phase, 1), 1.0, value)


def validate(prior: str) -> None:
  if prior not in PRIORS:
    raise ValueError(f'--prior must be one of {", ".join(PRIORS)}; got {prior!r}.')


def check_modes(prior: str, num_branches: int) -> None:
  """The temporal priors are of two modes (day and night): with more branches only prior `none` applies."""
  if num_branches > 2 and prior != 'none':
    raise ValueError(f'The temporal prior is defined for 2 modes; with {num_branches} branches use prior none.')


def prior_value(prior: str, round_num: RoundNum, period: int, previous: tf.Tensor,
                observed_ratio: tf.Tensor) -> tf.Tensor:
  """q~(t) for the prior named `prior`; `previous` and `observed_ratio` are used by `soft` only."""
  validate(prior)
  if prior == 'linear':
    return linear(round_num, period)
  if prior == 'cosine':
    return cosine(round_num, period)
  return soft(round_num, period, previous, observed_ratio)
