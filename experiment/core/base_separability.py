"""Can a diagonal GMM over an encoder's features find a task's bases at all? The question under pFedEM's Figure 4.

pFedEM (Chen et al.) and FedGMM (Wu et al., 2023) fit a diagonal GMM to features z = f(x) and read its components as the
base distributions. Whatever EM they run (federated, per round, pooled over rounds), EM converges to a local maximum of
the likelihood; it finds the bases only if a GMM whose components are the bases is such a maximum and the one its
start leads to. This module measures that on a sample of features [N, D] with their true domains [N]:

- `best`: the highest-likelihood diagonal K-GMM scikit-learn finds from `starts` k-means starts (batch EM, the
  whole sample): its mean log-likelihood per example and the adjusted Rand index (ARI) of its partition (argmax of the
  posterior) against the domains;
- `bases`: the diagonal GMM whose component k is domain k's own Gaussian (its examples' mean and per-dimension
  variance, pi_k its share), no EM: the same two numbers. Its ARI is about what a GMM aligned with the bases
  partitions, and if its log-likelihood is below `best`'s, the likelihood prefers another split of the features;
- `probe_accuracy`: a logistic regression's accuracy telling an example's domain from its features (trained on one
  half of the sample, tested on the other): whether the features carry the domain at all.

High `probe_accuracy` with low `best` ARI and `bases` log-likelihood below `best`'s means: the features carry the
bases, but not as the dominant mixture structure, so a correct EM of this GMM is not expected to find them.

`separation_by_granularity` asks the same of clients' features at three granularities, for clustering that only
sums what clients send (FedTKM, Zhu et al., 2022): k-means (K = the number of domains) and the probe on every
example (what a clustering of per-example sums, k-means or EM over examples, aims at), on every batch's mean feature
and on every client's mean feature (FedTKM's Eq. 11-12 cluster clients by it). Averaging removes what varies
within a client (its classes) and keeps what a client's examples share (its domain), so coarser can separate better.
"""

from typing import NamedTuple, Sequence

import numpy as np
from scipy import special
from sklearn import cluster
from sklearn import linear_model
from sklearn import metrics
from sklearn import mixture

_VARIANCE_FLOOR = 1e-6


class Separability(NamedTuple):
  best_log_likelihood: float  # Mean log p(z) per example under the highest-likelihood GMM found.
  best_ari: float  # ARI of its partition against the domains.
  bases_log_likelihood: float  # The same under the GMM of the domains' own Gaussians.
  bases_ari: float
  probe_accuracy: float  # Held-out accuracy of a logistic regression telling the domain from z.


def bases_mixture(features: np.ndarray, domains: np.ndarray, num_domains: int) -> tuple[np.ndarray, ...]:
  """(means [K, D], variances [K, D], weights [K]) of the diagonal GMM whose component k is domain k's Gaussian."""
  members = [features[domains == k] for k in range(num_domains)]
  means = np.stack([m.mean(0) for m in members])
  variances = np.maximum(np.stack([m.var(0) for m in members]), _VARIANCE_FLOOR)
  weights = np.array([len(m) for m in members], np.float64) / len(features)
  return means, variances, weights


def _log_joint(features: np.ndarray, means, variances, weights) -> np.ndarray:
  """log pi_k N(z_n | mu_k, diag sigma_k^2) [N, K]."""
  squares = np.square(features[:, np.newaxis] - means[np.newaxis]) / variances[np.newaxis]
  return np.log(weights) - 0.5 * (np.log(2 * np.pi * variances).sum(-1) + squares.sum(-1))


def separability(features: np.ndarray, domains: np.ndarray, num_domains: int, starts: int = 10,
                 seed: int = 0) -> Separability:
  """The module docstring's measures for features [N, D] and domains [N] in {0..K-1}, K = `num_domains`."""
  features = np.asarray(features, np.float64)
  best = mixture.GaussianMixture(num_domains, covariance_type='diag', n_init=starts, random_state=seed,
                                 reg_covar=_VARIANCE_FLOOR).fit(features)
  log_joint = _log_joint(features, *bases_mixture(features, domains, num_domains))
  return Separability(
      best_log_likelihood=float(best.score(features)),
      best_ari=float(metrics.adjusted_rand_score(domains, best.predict(features))),
      bases_log_likelihood=float(special.logsumexp(log_joint, axis=1).mean()),
      bases_ari=float(metrics.adjusted_rand_score(domains, log_joint.argmax(1))),
      probe_accuracy=_probe_accuracy(features, domains, seed))


def _probe_accuracy(features: np.ndarray, domains: np.ndarray, seed: int) -> float:
  """A logistic regression's accuracy on one half of the sample (seeded), trained on the other."""
  order = np.random.default_rng(seed).permutation(len(features))
  train, test = order[:len(order) // 2], order[len(order) // 2:]
  probe = linear_model.LogisticRegression(max_iter=1000).fit(features[train], domains[train])
  return float(probe.score(features[test], domains[test]))


class GroupSeparation(NamedTuple):
  count: int  # Examples, batches or clients clustered.
  kmeans_ari: float  # ARI against the domains of k-means (10 starts) with K = the number of domains.
  probe_accuracy: float


def separation_by_granularity(clients: Sequence[Sequence[np.ndarray]], client_domains: Sequence[int],
                              num_domains: int, seed: int = 0) -> dict[str, GroupSeparation]:
  """{'example', 'batch', 'client'}: the module docstring's measures for clients[i], client i's feature batches
  ([B, D] each), of domain client_domains[i]."""
  examples = [(z, domain) for batches, domain in zip(clients, client_domains) for batch in batches for z in batch]
  batches = [(batch.mean(0), domain) for batches, domain in zip(clients, client_domains) for batch in batches]
  means = [(np.concatenate(batches).mean(0), domain) for batches, domain in zip(clients, client_domains)]
  result = {}
  for name, pairs in (('example', examples), ('batch', batches), ('client', means)):
    features = np.stack([z for z, _ in pairs]).astype(np.float64)
    domains = np.array([domain for _, domain in pairs])
    labels = cluster.KMeans(num_domains, n_init=10, random_state=seed).fit(features).labels_
    result[name] = GroupSeparation(len(pairs), float(metrics.adjusted_rand_score(domains, labels)),
                                   _probe_accuracy(features, domains, seed))
  return result
