"""Tests FedGMM's synthetic data against its definition: x ~ N(mu_m, sigma^2 I), y = 1{(x - mu_m)^T v_m > 0}."""

import numpy as np
import tensorflow as tf

from models import multi_branch
from tasks import gaussian_mixture


def _client(task, component, client_id):
  elements = list(task.train_data[component].create_tf_dataset_for_client(client_id).as_numpy_iterator())
  return np.stack([e['x'] for e in elements]), np.array([e['y'] for e in elements])


class GaussianMixtureTest(tf.test.TestCase):

  def test_components_follow_the_definition(self):
    config = gaussian_mixture.MixtureConfig(num_clients=4, client_size=4000, test_examples_per_component=3000)
    task = gaussian_mixture.create_task(seed=3, config=config)
    means, normals = gaussian_mixture.parameters(config, seed=3)
    self.assertEqual((task.num_modes, task.num_classes), (3, 2))
    self.assertTrue(np.all(np.abs(means) <= 1.0) and np.all(np.abs(normals) <= 1.0))
    for m in range(3):
      x, y = _client(task, m, 'client_0002')
      self.assertEqual(x.shape, (4000, 32))
      self.assertAllEqual(y, gaussian_mixture.labels(x, means[m], normals[m]))
      # Mean within 4 standard errors per coordinate; covariance close to I.
      self.assertLess(np.max(np.abs(x.mean(axis=0) - means[m])) * np.sqrt(4000), 4.5)
      self.assertAllClose(np.cov(x, rowvar=False), np.eye(32), atol=0.12)
      self.assertBetween(y.mean(), 0.45, 0.55)  # The hyperplane passes through the mean.
      test = next(iter(task.test_data[m].batch(3000)))
      self.assertAllEqual(test['y'], gaussian_mixture.labels(test['x'].numpy(), means[m], normals[m]))

  def test_clients_are_reproducible_and_distinct(self):
    config = gaussian_mixture.MixtureConfig(num_clients=3, client_size=50)
    first, second = gaussian_mixture.create_task(0, config), gaussian_mixture.create_task(0, config)
    self.assertAllEqual(_client(first, 1, 'client_0001')[0], _client(second, 1, 'client_0001')[0])
    self.assertNotAllClose(_client(first, 1, 'client_0001')[0], _client(first, 1, 'client_0002')[0])
    self.assertNotAllClose(_client(first, 1, 'client_0001')[0], _client(first, 2, 'client_0001')[0])
    self.assertEqual(first.client_sizes[0], {f'client_{i:04d}': 50 for i in range(3)})

  def test_toy_of_figure_1(self):
    task = gaussian_mixture.create_task(0, gaussian_mixture.TOY_1D, 'gaussian_toy_1d')
    for m, mean in enumerate((-2.0, 2.0)):
      x, y = _client(task, m, 'client_0000')
      self.assertAllEqual(y, (x[:, 0] < mean).astype(np.int32))  # y = 1{x < mu_m}.
      self.assertAllClose([x.mean(), x.std()], [mean, 1.5], atol=0.2)  # 1.5 read as the standard deviation.

  def test_model_is_logistic_regression_on_x(self):
    model = gaussian_mixture.create_model(dim=32, num_branches=3)
    self.assertEqual(multi_branch.parameter_counts(model)['total'], 3 * (32 * 2 + 2))
    x = np.random.default_rng(0).normal(size=(5, 32)).astype(np.float32)
    outputs = model(x)
    self.assertAllClose(outputs[multi_branch.FEATURES], x)  # The clustering features are x itself.
    self.assertEqual(outputs[multi_branch.LOGITS].shape, (5, 3, 2))


if __name__ == '__main__':
  tf.test.main()
