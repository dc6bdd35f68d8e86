"""Checks one round of the FedTEM learning process (TFF computations) against a numpy E and M step."""

import collections

import numpy as np
from scipy import special
import tensorflow as tf
import tensorflow_federated as tff

from algorithms.core import learning_process
from algorithms.methods import fedtem
from models import multi_branch
from tasks import task as task_lib
from utils import execution_context

_SERVER_STEP = learning_process.ServerStep.named('adam', 0.1, 1e-3)


def _model_fn():
  extractor = tf.keras.Sequential([tf.keras.Input(shape=(3,)), tf.keras.layers.Dense(4, activation='tanh')])
  return multi_branch.build_multi_branch_model(extractor, 2, branch_units=3)


def _client(seed, mode, size):
  rng = np.random.default_rng(seed)
  x = (rng.normal(size=(size, 3)) + (2.0 if mode == 0 else -2.0)).astype(np.float32)
  raw = tf.data.Dataset.from_tensor_slices(collections.OrderedDict(x=x, y=rng.integers(0, 3, size).astype(np.int32)))
  return x, task_lib.preprocess_client(raw, mode, tff.simulation.baselines.ClientSpec(1, 4), shuffle_seed=(0, seed))


def _numpy_log_mle(features, mixture):
  """Eq. 5 with Eq. 6, written out with scipy."""
  diff = features[:, None, :] - mixture['means'][None]
  log_density = -0.5 * (np.sum(diff**2 / mixture['variances'][None], -1)
                        + np.sum(np.log(2 * np.pi * mixture['variances']), -1)[None])
  joint = log_density + np.log(mixture['weights'])[None]
  log_gamma = joint - special.logsumexp(joint, axis=1, keepdims=True)
  return special.logsumexp(log_gamma, axis=0) - np.log(len(features))


class FedTemProcessTest(tf.test.TestCase):

  def test_one_round_matches_numpy_em_with_linear_prior(self):
    clients = [_client(seed, mode, size) for seed, mode, size in ((0, 0, 9), (1, 1, 6), (2, 0, 7), (3, 1, 11))]
    config = fedtem.Config(prior='linear', period=8, statistics_decay=0.0, pi_momentum=0.9, seed=5)
    # Client learning rate 0: the features after training are those of the broadcast model.
    process = fedtem.build_process(_model_fn, lambda batch: batch, clients[0][1].element_spec, 0.0, _SERVER_STEP,
                                   num_branches=2, num_modes=2, config=config)
    initial = learning_process.initial_weights(_model_fn, seed=3)
    output = process.next(process.set_model_weights(process.initialize(), initial), [d for _, d in clients])

    model = _model_fn()
    model.set_weights(list(initial.trainable))
    mixture = fedtem.initial_mixture(2, 4, seed=5)
    features = [model(x)['features'].numpy() for x, _ in clients]
    log_mles = [_numpy_log_mle(f, mixture) for f in features]
    scores = np.array([m[0] - m[1] for m in log_mles])
    # Round 1, T = 8: q~ = |2/8 - 1| = 0.75, so floor(0.75 * 4 + 1/2) = 3 clients with the highest scores join mode 1.
    mode_one = scores >= np.sort(scores)[::-1][2]
    expected = {}
    for k, members in enumerate((mode_one, ~mode_one)):
      chosen = [f for f, member in zip(features, members) if member]
      stacked = np.concatenate(chosen)
      expected[k] = (stacked.mean(0),  # Eq. 10: the |D_i|-weighted mean of client means is the pooled mean.
                     np.sum([len(f) * f.var(0) for f in chosen], axis=0) / len(stacked), len(stacked))
    mixture_after = output.state.client_work['mixture']
    for k in range(2):
      self.assertAllClose(mixture_after['means'][k], expected[k][0], atol=1e-5)
      self.assertAllClose(mixture_after['variances'][k], np.maximum(expected[k][1], 1e-3), atol=1e-5)
    counts = np.array([expected[0][2], expected[1][2]], np.float64)
    self.assertAllClose(mixture_after['weights'], 0.9 * 0.5 + 0.1 * counts / counts.sum(), atol=1e-6)
    metrics = output.metrics['client_work']
    self.assertAllClose(metrics['prior'], 0.75)
    self.assertAllClose(metrics['assigned_mode_one_share'], expected[0][2] / counts.sum(), atol=1e-6)
    # Training branches: argmax of Eq. 5 under the initial GMM, compared with the true modes (0, 1, 0, 1).
    branches = [int(np.argmax(m)) for m in log_mles]
    self.assertAllClose(metrics['train_routing_accuracy'], np.mean(np.array(branches) == [0, 1, 0, 1]))


if __name__ == '__main__':
  execution_context.install()
  tf.test.main()
