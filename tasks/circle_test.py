"""Tests the FedEvolve paper's Circle data (our documented reading) and which scenarios the tasks refuse."""

import numpy as np
import tensorflow as tf

from periodic_shift import domains as domains_lib
from tasks import circle
from tasks import registry


class CircleTest(tf.test.TestCase):

  def test_domain_zero_points_and_labels(self):
    task = circle.create_task(seed=1)
    self.assertEqual(task.population_summary(), {'circle': {'clients': 600, 'train_examples': 30000,
                                                            'test_examples': 1000}})
    points = next(iter(task.test_data[0].batch(1000)))
    x, y = points['x'].numpy(), points['y'].numpy()
    self.assertAllClose(x.mean(axis=0), [1.0, 0.0], atol=4 * 0.25 / np.sqrt(1000))
    self.assertAllClose(x.std(axis=0), [0.25, 0.25], atol=0.02)
    self.assertAllEqual(y, np.linalg.norm(x, axis=1) > 1.0)
    self.assertBetween(y.mean(), 0.4, 0.6)  # The circle passes through the mean: balanced labels.

  def test_rotated_domains_lie_on_the_half_circle_with_the_same_rule(self):
    task = circle.create_task(seed=1)
    angles = [m * 180 / 29 for m in range(30)]
    task = task.with_domains([domains_lib.Domain(f'rot{a:g}', 0, rotation_degrees=a) for a in angles])
    for m in (0, 10, 29):
      batch = next(iter(task.test_dataset(m, 1000)))
      x, y = batch['x'].numpy(), batch['y'].numpy()
      theta = np.deg2rad(angles[m])
      # The mean turns by theta_m (either way: the rotation plane's orientation is the seed's).
      self.assertAllClose(np.abs(x.mean(axis=0)), np.abs([np.cos(theta), np.sin(theta)]), atol=0.04)
      self.assertAllEqual(y, np.linalg.norm(x, axis=1) > 1.0)  # The label rule is rotation invariant.

  def test_five_layer_mlp(self):
    model = circle.create_model(num_branches=1)
    kernels = [w for w in model.trainable_weights if 'kernel' in w.name]
    self.assertEqual([tuple(k.shape) for k in kernels], [(2, 32), (32, 32), (32, 32), (32, 32), (32, 2)])

  def test_tasks_refuse_scenarios_they_cannot_run_in_one_line(self):
    for task, scenario in (('circle', 'periodic'), ('circle', 'mixture_drift'), ('stackoverflow', 'windowed'),
                           ('gaussian_mixture', 'periodic')):
      with self.assertRaisesRegex(ValueError, f'^task {task} cannot run scenario {scenario}: .*\\.$'):
        registry.validate_scenario(task, scenario)
    for task in ('synthetic', 'emnist', 'cifar', 'mnist'):
      for scenario in ('periodic', 'evolving_domains', 'dirichlet_mixture'):
        registry.validate_scenario(task, scenario)


if __name__ == '__main__':
  tf.test.main()
