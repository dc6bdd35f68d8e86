"""Numpy softmax regression and its SGD, written from the definitions, as the reference for local training."""

import numpy as np


def logits(weights, x):
  kernel, bias = weights
  return x @ kernel + bias


def sgd(weights, batches, learning_rate: float, proximal_strength: float = 0.0):
  """One SGD step per (x [B, D], y [B]) batch on the mean cross-entropy plus (mu / 2) ||w - w_0||^2, w_0 the
  starting weights (FedProx; mu = 0 is plain SGD). Returns the trained [kernel, bias]."""
  start = [np.array(w, np.float64) for w in weights]
  kernel, bias = [w.copy() for w in start]
  for x, y in batches:
    z = logits((kernel, bias), x)
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    p[np.arange(len(y)), y] -= 1.0  # d CE / d logits.
    gradient_kernel = x.T @ p / len(y) + proximal_strength * (kernel - start[0])
    gradient_bias = p.mean(axis=0) + proximal_strength * (bias - start[1])
    kernel, bias = kernel - learning_rate * gradient_kernel, bias - learning_rate * gradient_bias
  return [kernel, bias]
