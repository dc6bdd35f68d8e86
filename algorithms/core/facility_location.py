"""ShiftEx's facility-location objective (Eq. 2 of Bhope et al., "Shift Happens: Mixture of Experts based Continual
Adaptation in Federated Learning", 2025) of a party-to-expert assignment, and its exact optimum on small instances,
in TF for a server computation.

Eq. 2, for parties c with profiles P_c, label histograms y_c and sizes n_c:

  min_{z, w}  sum_c sum_k z_ck MMD(P_c, P^k) + lambda sum_{k in Kn} w_k + mu sum_{k in K0 u Kn} JSD(y^k, y_bar)

with each party on exactly one expert, existing experts K0 always open, new experts Kn opened by w_k. Choices
(the paper defines neither P^k of a new expert nor y^k, y_bar):
- P^k is an existing expert's latent memory, and for a new expert the mean profile of its parties (what ShiftEx
  stores as the new expert's memory); MMD is that of two point masses, sqrt(2 - 2 exp(-gamma_k ||a - b||^2)).
- y^k = sum_c z_ck n_c y_c / sum_c z_ck n_c over the instance's parties, and an expert with no party in the instance
  adds no JSD term; y_bar is the instance's pooled label histogram.
- The capacity U_max is not enforced (neither does the paper's heuristic).

`assignments(m, k)` enumerates every assignment of m parties to k existing experts or to new ones, new experts
numbered in order of first use (restricted growth, so relabellings of new experts count once): 10,427 for m = 5,
k = 5. `objective` scores a batch of them, so `optimum` is exhaustive search.
"""

import numpy as np
import tensorflow as tf


def assignments(num_parties: int, num_existing: int) -> np.ndarray:
  """[A, m] int32: expert of each party, k < num_existing existing, num_existing + b the b-th new expert."""
  result = []

  def extend(prefix, new_used):
    if len(prefix) == num_parties:
      result.append(prefix)
      return
    for expert in range(num_existing + new_used + 1):
      extend(prefix + [expert], max(new_used, expert - num_existing + 1))

  extend([], 0)
  return np.array(result, np.int32).reshape(-1, num_parties)


def _jensen_shannon(p: tf.Tensor, q: tf.Tensor) -> tf.Tensor:
  m = (p + q) / 2.0
  kl = lambda a: tf.reduce_sum(tf.where(a > 0, a * tf.math.log(tf.math.divide_no_nan(a, m)), 0.0), -1)
  return 0.5 * kl(p) + 0.5 * kl(q)


def objective(choice: tf.Tensor, profiles: tf.Tensor, histograms: tf.Tensor, sizes: tf.Tensor,
              memories: tf.Tensor, open_existing: tf.Tensor, gamma_k, new_expert_cost: float,
              imbalance_weight: float) -> tf.Tensor:
  """Eq. 2 of each assignment.

  Args:
    choice: [A, m] int32, each party's expert (k < K existing, K + b new expert b).
    profiles: [m, D] the parties' profiles; histograms [m, C]; sizes [m] (0: a padding row, left out).
    memories: [K, D] the existing experts' profiles; open_existing [K] bool (an assignment to a closed one costs inf).
    gamma_k: the point-mass MMD's kernel parameter; new_expert_cost: lambda; imbalance_weight: mu.

  Returns:
    [A] the objective of each assignment.
  """
  k = int(memories.shape[0])
  m = int(profiles.shape[0])
  experts = k + m
  present = tf.cast(sizes > 0, tf.float32)
  member = tf.one_hot(choice, experts) * present[tf.newaxis, :, tf.newaxis]  # [A, m, E]
  weight = member * sizes[tf.newaxis, :, tf.newaxis]
  count = tf.reduce_sum(member, 1)  # [A, E] parties per expert.
  new_profiles = tf.math.divide_no_nan(tf.einsum('ame,md->aed', member, profiles), count[..., tf.newaxis])
  expert_profiles = tf.concat([tf.broadcast_to(memories, [tf.shape(choice)[0], k, memories.shape[1]]),
                               new_profiles[:, k:]], 1)  # [A, E, D]
  assigned = tf.einsum('ame,aed->amd', member, expert_profiles)
  distance = tf.sqrt(tf.maximum(2.0 - 2.0 * tf.exp(-gamma_k * tf.reduce_sum(
      tf.square(profiles[tf.newaxis] - assigned), -1)), 0.0))
  used = count > 0
  expert_histograms = tf.math.divide_no_nan(tf.einsum('ame,mc->aec', weight, histograms),
                                            tf.reduce_sum(weight, 1)[..., tf.newaxis])
  pooled = tf.reduce_sum(sizes[:, tf.newaxis] * histograms, 0) / tf.reduce_sum(sizes)
  imbalance = tf.where(used, _jensen_shannon(expert_histograms, pooled), 0.0)
  closed = tf.reduce_any(used[:, :k] & ~open_existing[tf.newaxis], 1)
  total = (tf.reduce_sum(distance * present, 1) + new_expert_cost * tf.reduce_sum(tf.cast(used[:, k:], tf.float32), 1)
           + imbalance_weight * tf.reduce_sum(imbalance, 1))
  return tf.where(closed, np.inf, total)


def optimum(candidates: np.ndarray, *args, **kwargs) -> tuple[tf.Tensor, tf.Tensor]:
  """(the smallest Eq. 2 over `candidates` [A, m] (`assignments`), the minimizing assignment [m])."""
  values = objective(tf.constant(candidates), *args, **kwargs)
  best = tf.argmin(values)
  return values[best], tf.gather(candidates, best)
