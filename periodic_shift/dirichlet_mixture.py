"""The FedGMM paper's heterogeneity as a scenario: every client a Dirichlet mixture of components, fixed
train / validation / test splits per client, and unseen clients.

Components (`components`):
- `transformed` (the paper's real-data construction, Section 4.1): component 1 is base population 0 as it is,
  component 2 the same base under T = 90-degree rotation + horizontal flip + intensity inversion with one fixed
  random label permutation P_A (`domains.Domain`): D^ = D_1 u {(T(x), P_A(y)) | (x, y) in D_2}. The scenario's
  clients are base 0's clients.
- `bases`: the task's base populations are the components (the paper's synthetic data and Figure 1's toy, the
  `gaussian_mixture` and `gaussian_toy_1d` tasks); scenario client c is paired with the c-th client (by sorted id)
  of every base.

Mixtures: client c has pi_c ~ Dir(alpha 1_M) (alpha = `alpha`, 0.4 in the paper) and budget N_c (its source
client's size; with `bases`, the smallest of its paired sources); its examples' components are
(n_c1, ..., n_cM) ~ Multinomial(N_c, pi_c), i.e. z_i ~ pi_c per example. Where the paper's real-data recipe instead
transforms a random half of the dataset and deals the labels out with Dir(0.4) (FedEM's label partition), this
reading, the issue's, gives each client its own mixture over components directly, the quantity FedGMM estimates;
label heterogeneity is the base clients' own. Drawn once from (seed, c): the data do not change over rounds.

Splits (Section 4.1: "train 60% / validation 20% / test 20%" of every client's data): each component part of a
client is cut in that order, in one fixed order of its source's examples (`scenario.Part.order_seed`), so the
splits keep the client's mixture and never overlap. Unseen clients (Section 4.6, Table 5; `unseen_fraction`, 0.2
in the paper): a seeded subset of the clients never trains; their data are cut 50% adaptation / 50% test.

Rounds draw `clients_per_round` of the training clients uniformly without replacement. Evaluation plans:
`personalized` (every training client's own test split, the paper's "average accuracy of all clients",
example-weighted; its train split is what it personalizes on) and, with unseen clients, `unseen` (their test
halves, each with its adaptation half, which methods that adapt, such as FedGMM, fit their client weights on).
The validation splits are in `split_plans('validation')`.
`shift_free` (No-Dist-Shift): pi_c = 1/M for every client.
"""

import dataclasses
from typing import Optional, Sequence

import numpy as np

from periodic_shift import domains as domains_lib
from periodic_shift import scenario
from utils import settings

NAME = 'dirichlet_mixture'
LENGTH_DEPENDENCE = None
# The FedGMM paper's measure: every training client's model on its own test split.
HEADLINE_METRIC = 'personalized_accuracy'
COMPONENTS = ('transformed', 'bases')
SPLITS = ('train', 'validation', 'test')
SPLIT_FRACTIONS = (0.6, 0.2, 0.2)  # The FedGMM paper, Section 4.1.
UNSEEN_SPLITS = ('adaptation', 'test')
UNSEEN_FRACTIONS = (0.5, 0.5)  # The FedGMM paper, Section 4.6.


@dataclasses.dataclass(frozen=True)
class Settings:
  """The components, the clients' mixtures and the unseen clients (module docstring)."""
  dirichlet_components: Optional[str] = settings.setting(
      None, 'The components, transformed (base 0 and base 0 under rot90 + flip + invert + a label permutation, the '
      'FedGMM paper\'s real data) or bases (the task\'s bases, its synthetic data). Default: the task\'s (bases for '
      'gaussian_mixture and gaussian_toy_1d, else transformed).')
  component_alpha: float = settings.setting(0.4, 'alpha of each client\'s Dir(alpha) mixture weights over the '
                                            'components.')
  unseen_fraction: float = settings.setting(
      0.0, 'Share of clients held out of training (FedGMM, Table 5: 0.2); their data split 50/50 adaptation/test.')
  num_clients: Optional[int] = settings.setting(None, 'Clients (None: every client the components share).')

  def validate(self, schedule: scenario.Schedule) -> None:
    del schedule  # Unused.
    if self.num_clients is not None and self.num_clients < 1:
      raise ValueError(f'--num_clients must be >= 1; got {self.num_clients}.')
    if self.dirichlet_components not in (None, *COMPONENTS):
      raise ValueError(f'--dirichlet_components must be one of {", ".join(COMPONENTS)}; got '
                       f'{self.dirichlet_components!r}.')
    if not self.component_alpha > 0 or not 0 <= self.unseen_fraction < 1:
      raise ValueError(f'--component_alpha must be > 0 and unseen_fraction in [0, 1); got {self.component_alpha:g}, '
                       f'{self.unseen_fraction:g}.')


def run_name(config: Settings, schedule: scenario.Schedule) -> str:
  del config, schedule  # Unused.
  return NAME


def build(config: Settings, population: scenario.Population, schedule: scenario.Schedule,
          shift_free: bool = False) -> 'DirichletMixtureScenario':
  """Every client a fixed Dir(alpha) mixture of the components (equal shares without the shift)."""
  return DirichletMixtureScenario(population.client_ids, population.client_sizes, schedule.clients_per_round,
                                  config.dirichlet_components or 'transformed', config.component_alpha,
                                  config.unseen_fraction, schedule.seed, config.num_clients, shift_free)


def split_counts(n: int, fractions: Sequence[float]) -> list[int]:
  """n examples cut by `fractions` (rounded down, the remainder to the last split)."""
  counts = [int(np.floor(n * f)) for f in fractions[:-1]]
  return counts + [n - sum(counts)]


def transformed_domains(base_name: str, num_classes: int, seed: int) -> tuple[domains_lib.Domain, ...]:
  """Base 0, and base 0 under T (rot90 + flip + invert) with a seeded label permutation P_A (Wu et al., 2023,
  Sec. 4.1)."""
  permutation = tuple(int(i) for i in np.random.default_rng([seed, 42]).permutation(num_classes))
  return (domains_lib.Domain(base_name, 0),
          domains_lib.Domain(f'{base_name}_T', 0, rotation_degrees=90.0, flip=True, invert=True,
                             label_permutation=permutation))


class DirichletMixtureScenario(scenario.Scenario):
  """The FedGMM paper's Dirichlet mixtures of components (module docstring)."""

  def __init__(self, base_client_ids: Sequence[Sequence[str]], base_client_sizes: Sequence[dict[str, int]],
               clients_per_round: int, components: str, alpha: float, unseen_fraction: float, seed: int,
               num_clients=None, shift_free: bool = False):
    self._components = components
    self._seed = seed
    self._num_components = 2 if components == 'transformed' else len(base_client_ids)
    if components == 'transformed':
      sources = [[client_id] * 2 for client_id in base_client_ids[0]]
      budgets = [base_client_sizes[0][client_id] for client_id in base_client_ids[0]]
    else:
      sources = [list(ids) for ids in zip(*base_client_ids)]
      budgets = [min(sizes[i] for sizes, i in zip(base_client_sizes, ids)) for ids in sources]
    if num_clients is not None:
      if not 1 <= num_clients <= len(sources):
        raise ValueError(f'--num_clients must be between 1 and the clients the components share ({len(sources)}); '
                         f'got {num_clients}.')
      kept = np.sort(np.random.default_rng([seed, 43]).permutation(len(sources))[:num_clients])
      sources, budgets = [sources[i] for i in kept], [budgets[i] for i in kept]
    self._sources = sources
    self.mixture_weights = np.stack([
        np.full(self._num_components, 1.0 / self._num_components) if shift_free else
        np.random.default_rng([seed, 45, c]).dirichlet(np.full(self._num_components, alpha))
        for c in range(len(sources))])
    self.component_counts = np.stack([np.random.default_rng([seed, 46, c]).multinomial(budget, weights)
                                      for c, (budget, weights) in enumerate(zip(budgets, self.mixture_weights))])
    num_unseen = int(round(unseen_fraction * len(sources)))
    unseen = set(np.random.default_rng([seed, 44]).permutation(len(sources))[:num_unseen].tolist())
    self._unseen = sorted(unseen)
    self._training = [c for c in range(len(sources))  # Clients too small to have training examples are left out.
                      if c not in unseen and self._plan(c, 0, SPLIT_FRACTIONS).parts]
    if not 1 <= clients_per_round <= len(self._training):
      raise ValueError(f'--clients_per_round must be between 1 and the training clients ({len(self._training)}); '
                       f'got {clients_per_round}.')
    self._clients_per_round = clients_per_round

  @property
  def num_domains(self) -> int:
    return self._num_components

  @property
  def training_clients(self) -> list[int]:
    return list(self._training)

  @property
  def unseen_clients(self) -> list[int]:
    return list(self._unseen)

  def domains(self, base_names: Sequence[str], num_classes: int):
    if self._components == 'transformed':
      return transformed_domains(base_names[0], num_classes, self._seed)
    return None

  def _plan(self, c: int, split: int, fractions: Sequence[float]) -> scenario.ClientPlan:
    """Client c's part `split` of its data cut by `fractions`, component by component."""
    parts, offset = [], 0
    for m, n in enumerate(self.component_counts[c]):
      counts = split_counts(int(n), fractions)
      if counts[split]:
        parts.append(scenario.Part(m, self._sources[c][m], counts[split], skip=offset + sum(counts[:split]),
                                   order_seed=self._seed))
      if self._components == 'transformed':
        offset += int(n)  # The components share the source: each takes the next range of its one order.
    return scenario.ClientPlan(f'client_{c}', tuple(parts))

  def split_plans(self, split: str) -> tuple[scenario.ClientPlan, ...]:
    """Every training client's `split` (train, validation or test), clients with an empty split left out."""
    plans = (self._plan(c, SPLITS.index(split), SPLIT_FRACTIONS) for c in self._training)
    return tuple(plan for plan in plans if plan.parts)

  def evaluation_plans(self) -> dict[str, scenario.HeldOutClients]:
    """`personalized`: the training clients' test splits, each with its train split; `unseen`: the unseen clients'
    test halves, each with its adaptation half (clients with an empty test part left out)."""
    held_out = {'personalized': self._held_out(self._training, 2, SPLIT_FRACTIONS, 0)}
    if self._unseen:
      held_out['unseen'] = self._held_out(self._unseen, 1, UNSEEN_FRACTIONS, 0)
    return held_out

  def _held_out(self, clients, test_split: int, fractions, personalization_split: int) -> scenario.HeldOutClients:
    pairs = [(self._plan(c, test_split, fractions), self._plan(c, personalization_split, fractions)) for c in clients]
    pairs = [pair for pair in pairs if pair[0].parts]
    return scenario.HeldOutClients(tuple(test for test, _ in pairs), tuple(own for _, own in pairs))

  def round_plan(self, round_num: int) -> scenario.RoundPlan:
    rng = np.random.default_rng([self._seed, 47, round_num])
    chosen = rng.choice(self._training, size=self._clients_per_round, replace=False)
    return scenario.RoundPlan(tuple(self._plan(int(c), 0, SPLIT_FRACTIONS) for c in chosen))

  def round_metrics(self, round_num: int, plan: scenario.RoundPlan) -> dict[str, float]:
    """`domain_share_<m>`: the share of component m in the round's training examples."""
    del round_num  # Unused.
    counts = np.zeros(self._num_components)
    for client in plan.clients:
      for part in client.parts:
        counts[part.domain] += part.num_examples
    return {f'domain_share_{m}': float(n) for m, n in enumerate(counts / max(counts.sum(), 1.0))}


def _check_smoke_run(rows: scenario.Rows, summary, shift_free: bool) -> list[str]:
  """Two components (a base and its transformed copy) sharing every round's examples; accuracy on the clients' own
  and the unseen clients' data, and on the components' test sets where a method has a global model."""
  del summary, shift_free  # Unused.
  last = rows[-1]
  shares = last['domain_share_0'] + last['domain_share_1']
  problems = [] if abs(shares - 1.0) < 1e-6 else [f'the components\' shares sum to {shares}']
  tests = [key for key in last if key.startswith('test_') and key.endswith('_accuracy')]
  return problems + scenario.share_problems(last, ('personalized_accuracy', 'unseen_accuracy', *tests))


# 12 clients, 3 of them unseen.
SMOKE_RUN = scenario.SmokeRun({'num_clients': 12, 'unseen_fraction': 0.25}, _check_smoke_run)
