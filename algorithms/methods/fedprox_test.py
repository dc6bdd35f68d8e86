"""FedProx's local objective (Li et al., 2020, Eq. 2) against numpy SGD with the proximal gradient."""

import collections

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from algorithms.core import client_training
from algorithms.core import objectives
from algorithms.methods import fedprox
from tasks import gaussian_mixture
from tests import softmax_regression_reference as reference


class FedProxTest(tf.test.TestCase):

  def _train(self, start, batches, learning_rate, mu):
    model = gaussian_mixture.create_model(dim=3, num_branches=1)
    train = client_training.build_train_fn(model, tff.learning.optimizers.build_sgdm(learning_rate),
                                           objectives.averaged_branches, proximal_strength=mu)
    dataset = tf.data.Dataset.from_generator(
        lambda: (collections.OrderedDict(x=x, y=y) for x, y in batches),
        output_signature=collections.OrderedDict(x=tf.TensorSpec([None, 3], tf.float32),
                                                 y=tf.TensorSpec([None], tf.int32)))
    weights = tff.learning.models.ModelWeights(trainable=start, non_trainable=[])
    return train(weights, dataset)

  def test_local_training_with_the_proximal_term_matches_numpy(self):
    rng = np.random.default_rng(0)
    start = [rng.normal(size=(3, 2)).astype(np.float32), rng.normal(size=2).astype(np.float32)]
    batches = [(rng.normal(size=(4, 3)).astype(np.float32), rng.integers(0, 2, 4).astype(np.int32))
               for _ in range(5)]
    for mu in (0.0, 2.0):
      output = self._train(start, batches, learning_rate=0.4, mu=mu)
      trained = reference.sgd(start, batches, learning_rate=0.4, proximal_strength=mu)
      self.assertAllClose(output.update, [s - t for s, t in zip(start, trained)], atol=1e-5)
      self.assertEqual(float(output.num_examples), 20.0)
    # The proximal term pulls the trained weights towards the start: a strong mu leaves a smaller update.
    strong = self._train(start, batches, learning_rate=0.4, mu=2.0).update
    free = self._train(start, batches, learning_rate=0.4, mu=0.0).update
    self.assertLess(sum(np.sum(np.square(u)) for u in strong), sum(np.sum(np.square(u)) for u in free))

  def test_bad_mu_is_one_line(self):
    with self.assertRaisesRegex(ValueError, r'^--fedprox_mu must be > 0; got 0\.$'):
      fedprox.Config(mu=0.0).validate()


if __name__ == '__main__':
  tf.test.main()
