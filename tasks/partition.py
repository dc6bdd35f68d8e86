"""Splits of a centralized dataset into clients, for datasets without a natural federation (CIFAR-10, MNIST)."""

import numpy as np


def iid_partition(num_examples: int, client_size: int, seed: int) -> list[np.ndarray]:
  """Indices of num_examples // client_size clients of `client_size` examples each, drawn without replacement
  uniformly (an IID split)."""
  order = np.random.default_rng(seed).permutation(num_examples)
  return [order[i * client_size:(i + 1) * client_size] for i in range(num_examples // client_size)]


def dirichlet_partition(labels: np.ndarray, client_size: int, alpha: float, seed: int) -> list[np.ndarray]:
  """Indices of len(labels) // client_size clients of `client_size` examples each, class mixes ~ Dir(alpha); alpha
  inf: every client draws from the uniform mix (IID clients)."""
  rng = np.random.default_rng(seed)
  classes = np.unique(labels)
  pools = [list(rng.permutation(np.flatnonzero(labels == c))) for c in classes]
  clients = []
  for _ in range(len(labels) // client_size):
    mix = np.full(len(classes), 1.0 / len(classes)) if np.isinf(alpha) else rng.dirichlet(np.full(len(classes), alpha))
    chosen = []
    while len(chosen) < client_size:
      available = np.array([len(pool) > 0 for pool in pools])
      weights = mix * available
      weights = weights / weights.sum() if weights.sum() > 0 else available / available.sum()
      counts = rng.multinomial(client_size - len(chosen), weights)
      for pool, count in zip(pools, counts):
        taken = min(count, len(pool))
        chosen.extend(pool[:taken])
        del pool[:taken]
    clients.append(np.array(chosen))
  return clients
