"""Parties whose windows have a known truth, standing for their embeddings, to measure ShiftEx's detector (Bhope et
al., "Shift Happens: Mixture of Experts based Continual Adaptation in Federated Learning", 2025) on: 10 classes with
means mu_y in R^8 (N(0, 1) entries) and unit Gaussian noise; a party has label weights p ~ Dir(1), a style offset
s ~ N(0, 0.1^2 I) and a size n ~ lognormal(log 60, 0.6) clipped to [10, 400] (the synthetic task's), halved for every
other party (a window's chunk, thinned by label skew); every window draws its n examples anew.
"""

import numpy as np

CLASSES, DIM = 10, 8


class Streams:
  """Parties of the module docstring, drawn from one seeded generator."""

  def __init__(self, seed: int):
    self.rng = np.random.default_rng(seed)
    self.means = self.rng.normal(size=(CLASSES, DIM))

  def party(self, index: int):
    """(n, label weights, style offset) of party `index`."""
    n = int(np.clip(np.exp(self.rng.normal(np.log(60.0), 0.6)), 10, 400)) // (1 + index % 2)
    return n, self.rng.dirichlet(np.ones(CLASSES)), 0.1 * self.rng.normal(size=DIM)

  def window(self, n, weights, style, shift=0.0):
    """n examples (x [n, 8] float32, y [n] int32); `shift` moves every x along the first axis."""
    y = self.rng.choice(CLASSES, size=n, p=weights)
    x = self.means[y] + style + self.rng.normal(size=(n, DIM))
    x[:, 0] += shift
    return x.astype(np.float32), y.astype(np.int32)
