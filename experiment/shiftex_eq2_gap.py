"""How far ShiftEx's assignment heuristic lands from Eq. 2's optimum, with the objective's lambda and mu swept.

ShiftEx (Bhope et al., "Shift Happens: Mixture of Experts based Continual Adaptation in Federated Learning", 2025)
states the assignment as a facility-location problem (Eq. 2: the parties' MMD to their experts, lambda per new
expert, mu times the experts' label imbalance) and solves it by a heuristic (k-means of the shifted parties, then
reuse within epsilon or spawn) that uses neither lambda nor mu. On random small instances (5 shifted parties, 2-D
profiles in two groups: one near expert 1's memory, one 2 units away; sizes Uniform(20, 100), label histograms
Dir(0.5) over 4 classes; gamma_k = 0.5; 2 free slots; expert 1's memory keeps 128 profiles ~ N(0, 0.3^2 I), the
reference of the reuse test) this prints, per (lambda, mu), the heuristic's mean relative gap (H - O) / O to the exact optimum O (exhaustive search,
`algorithms.core.facility_location`) and the mean number of new experts each opens, which is where the gap comes
from: the heuristic's spawns do not change with lambda, its clusters ignore the label imbalance mu prices, and
Eq. 2 as stated has no limit on new experts while the heuristic has the pool's free slots (2 here), so at a small
lambda the optimum opens one expert per party.

  bazel run //experiment:shiftex_eq2_gap -- --instances=50
"""

from absl import app
from absl import flags
import numpy as np
import tensorflow as tf

from algorithms.core import facility_location
from algorithms.methods import shiftex

_INSTANCES = flags.DEFINE_integer('instances', 50, 'Random instances per (lambda, mu).')
_LAMBDAS = (0.1, 0.5, 1.0, 2.0, 5.0)
_MUS = (0.0, 1.0, 5.0)
_PARTIES, _SLOTS = 5, 4


def _instance(rng: np.random.Generator, config: shiftex.Config) -> shiftex.ServerState:
  """A server state holding one census's 5 shifted parties (module docstring)."""
  profiles = np.zeros((config.census_capacity, 2), np.float32)
  far = rng.random(_PARTIES) < 0.5
  profiles[:_PARTIES] = rng.normal(0.0, 0.3, (_PARTIES, 2)) + np.where(far[:, None], [2.0, 0.0], 0.0)
  histograms = np.zeros((config.census_capacity, 4), np.float32)
  histograms[:_PARTIES] = rng.dirichlet(np.full(4, 0.5), _PARTIES)
  sizes = np.zeros(config.census_capacity, np.float32)
  sizes[:_PARTIES] = rng.uniform(20, 100, _PARTIES)
  kept = np.zeros((_SLOTS, shiftex.MEMORY_PROFILES, 2), np.float32)
  kept[0] = rng.normal(0.0, 0.3, (shiftex.MEMORY_PROFILES, 2))
  state = shiftex.initial_server_state(2, 1, 4, config)._replace(
      pending_profiles=profiles, pending_histograms=histograms, pending_sizes=sizes, pending_count=np.int32(_PARTIES),
      memory_profiles=kept, memory_sizes=np.array([shiftex.MEMORY_PROFILES] + [0] * (_SLOTS - 1), np.int32),
      profile_gamma=np.float32(0.5),
      round_num=np.int32(rng.integers(1 << 20)))
  return tf.nest.map_structure(tf.constant, state)


def gaps(instances: int, seed: int = 0) -> list[dict]:
  """Per (lambda, mu): mean relative gap, and the mean new experts of the heuristic and of the optimum."""
  rows = []
  candidates = facility_location.assignments(_PARTIES, _SLOTS)
  for new_expert_cost in _LAMBDAS:
    for imbalance_weight in _MUS:
      config = shiftex.Config(num_branches=_SLOTS, census_capacity=600, min_cluster_size=1,
                              new_expert_cost=new_expert_cost, imbalance_weight=imbalance_weight)
      rng = np.random.default_rng(seed)
      gap, heuristic_new, optimal_new = [], [], []
      for _ in range(instances):
        state = _instance(rng, config)
        result = shiftex.assign_clusters(state, config)
        optimal = float(result['optimal_objective'])
        gap.append((float(result['objective']) - optimal) / optimal)
        heuristic_new.append(float(result['spawned']))
        _, best = facility_location.optimum(
            candidates, state.pending_profiles[:_PARTIES], state.pending_histograms[:_PARTIES],
            state.pending_sizes[:_PARTIES], state.memory, state.active, gamma_k=0.5,
            new_expert_cost=new_expert_cost, imbalance_weight=imbalance_weight)
        optimal_new.append(len(set(int(e) for e in best.numpy() if e >= _SLOTS)))
      rows.append(dict(new_expert_cost=new_expert_cost, imbalance_weight=imbalance_weight,
                       mean_gap=float(np.mean(gap)), max_gap=float(np.max(gap)),
                       heuristic_new_experts=float(np.mean(heuristic_new)),
                       optimal_new_experts=float(np.mean(optimal_new))))
  return rows


def main(argv):
  del argv  # Unused.
  print('| lambda | mu | mean gap | max gap | new experts (heuristic) | new experts (optimum) |')
  print('|---|---|---|---|---|---|')
  for row in gaps(_INSTANCES.value):
    print(f"| {row['new_expert_cost']:g} | {row['imbalance_weight']:g} | {100 * row['mean_gap']:.1f}% | "
          f"{100 * row['max_gap']:.1f}% | {row['heuristic_new_experts']:.2f} | {row['optimal_new_experts']:.2f} |")


if __name__ == '__main__':
  app.run(main)
