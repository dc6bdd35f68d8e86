"""The differential-privacy budget of a run with `--aggregator=dp`, from the dp-accounting library's RDP accountant.

Each round, TFF's DP-FedAvg aggregator (`learning_process.build_model_aggregator`) clips every participating client's
update to the clip norm C and adds Gaussian noise of standard deviation z C to their sum: a Gaussian mechanism of noise
multiplier z on the round's client-level contributions (a client's whole update is the unit protected, user-level DP;
McMahan et al., "Learning Differentially Private Recurrent Language Models", 2018). T rounds compose T such mechanisms;
the RDP accountant (Mironov, "Renyi Differential Privacy", 2017; `dp_accounting.rdp`) converts the composition to
(epsilon, delta).

Choice: no amplification by sampling is claimed. The scenarios choose each round's clients by schedule (a mode's
share q(t), a mixture, windows), not by the uniform Poisson or fixed-size sampling the amplification theorems
assume, so the reported epsilon is the bound for a client that takes part in every round: an upper bound on every
client's epsilon whatever the schedule, loose for clients that take part rarely. dp-accounting is the accountant
TFF's own DP tutorials use (tensorflow-privacy computes with it too); it is pinned in requirements.txt.
The adaptive clip's quantile estimate is itself a noised query; TFF sets the value's noise so that the two queries
together are one Gaussian mechanism of multiplier z (Andrew et al., 2021, Section 3.2), so z is what is composed.
"""

import math

import dp_accounting
from dp_accounting.rdp import rdp_privacy_accountant

DEFAULT_DELTA = 1e-5


def epsilon(noise_multiplier: float, rounds: int, delta: float = DEFAULT_DELTA) -> float:
  """epsilon at `delta` of `rounds` Gaussian mechanisms of `noise_multiplier`.

  Raises ValueError for a multiplier that is not a finite number > 0 (dp-accounting answers 0 for NaN, which would
  claim perfect privacy; a multiplier of 0 adds no noise, so there is no epsilon to compute: the caller reports
  inf), for `rounds` < 1 and for `delta` outside (0, 1).
  """
  if not (math.isfinite(noise_multiplier) and noise_multiplier > 0):
    raise ValueError(f'the privacy accountant needs a finite noise multiplier > 0; got {noise_multiplier}.')
  if not (isinstance(rounds, int) and rounds >= 1):
    raise ValueError(f'the privacy accountant needs rounds >= 1; got {rounds}.')
  if not 0 < delta < 1:
    raise ValueError(f'the privacy accountant needs delta in (0, 1); got {delta}.')
  accountant = rdp_privacy_accountant.RdpAccountant()
  accountant.compose(dp_accounting.GaussianDpEvent(noise_multiplier), rounds)
  return float(accountant.get_epsilon(delta))
