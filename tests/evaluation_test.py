"""Tests centralized evaluation against numpy: per-domain and union test sets, and clients' held-out data."""

import collections

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from algorithms import evaluation
from algorithms import objectives
from tasks import gaussian_mixture


def _batches(x, y, mode, batch_size):
  return tf.data.Dataset.from_tensor_slices(collections.OrderedDict(
      x=x, y=y, mode=np.full(len(y), mode, np.int32))).batch(batch_size)


class EvaluatorTest(tf.test.TestCase):

  def test_accuracies_match_numpy(self):
    rng = np.random.default_rng(0)
    model = gaussian_mixture.create_model(dim=3, num_branches=2)
    weights = [rng.normal(size=w.shape).astype(np.float32) for w in model.get_weights()]
    model.set_weights(weights)
    kernels, biases = weights[0::2], weights[1::2]

    def predictions(x):  # Vanilla's objective averages the branches' logits.
      return np.mean([x @ k + b for k, b in zip(kernels, biases)], axis=0).argmax(axis=-1)

    data = [(rng.normal(size=(n, 3)).astype(np.float32), rng.integers(0, 2, n).astype(np.int32)) for n in (37, 50)]
    clients = [(rng.normal(size=(n, 3)).astype(np.float32), rng.integers(0, 2, n).astype(np.int32))
               for n in (5, 11, 2)]
    held_out = _batches(*clients[0], 0, 4)
    for client in clients[1:]:
      held_out = held_out.concatenate(_batches(*client, 0, 4))
    evaluator = evaluation.Evaluator(
        gaussian_mixture.create_model(dim=3, num_branches=2),
        {'a': _batches(*data[0], 0, 8), 'b': _batches(*data[1], 1, 8)}, {'personalized': held_out})
    metrics = evaluator.evaluate(tff.learning.models.ModelWeights.from_model(model),
                                 objectives.averaged_branches)
    correct = [np.sum(predictions(x) == y) for x, y in data]
    self.assertAllClose(metrics['test_a_accuracy'], correct[0] / 37)
    self.assertAllClose(metrics['test_b_accuracy'], correct[1] / 50)
    self.assertAllClose(metrics['test_accuracy'], sum(correct) / 87)  # The union, not the mean of the two.
    client_correct = sum(np.sum(predictions(x) == y) for x, y in clients)
    self.assertAllClose(metrics['personalized_accuracy'], client_correct / 18)  # Example-weighted over clients.


if __name__ == '__main__':
  tf.test.main()
