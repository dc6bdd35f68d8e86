"""Tests the digits task against scikit-learn's images: mode halves, the mirrored night, clients, and that it learns."""

import collections
import os

import numpy as np
import tensorflow as tf
from sklearn import datasets

from periodic_shift import evolving_domains
from periodic_shift import scenario
from periodic_shift import scenarios
from tasks import digits
from tasks import registry
from tests import in_process_run


def _mode_examples(task, mode):
  """(pixels [N, 8, 8], labels [N]) of the mode's training clients followed by its test set."""
  parts = [next(iter(task.train_data[mode].create_tf_dataset_for_client(client_id).batch(10_000)))
           for client_id in task.mode_client_ids()[mode]]
  parts.append(next(iter(task.test_data[mode].batch(10_000))))
  return (np.concatenate([p['pixels'].numpy() for p in parts]), np.concatenate([p['label'].numpy() for p in parts]))


def _keys(images, labels):
  return collections.Counter((image.astype(np.uint8).tobytes(), int(label)) for image, label in zip(images, labels))


class DigitsTaskTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.task = digits.create_task(seed=4)
    cls.sklearn = datasets.load_digits()

  def test_populations(self):
    summary = self.task.population_summary()
    for mode in ('day', 'night'):
      self.assertEqual(summary[mode]['clients'], 31)  # 629 training examples per mode in clients of 20.
      self.assertEqual(summary[mode]['train_examples'], 620)
      self.assertBetween(summary[mode]['test_examples'], 269, 270)

  def test_day_as_written_and_night_mirrored_partition_the_digits(self):
    day_images, day_labels = _mode_examples(self.task, 0)
    night_images, night_labels = _mode_examples(self.task, 1)
    self.assertEqual(set(day_labels), set(range(10)))
    self.assertEqual(set(night_labels), set(range(10, 20)))
    # Mirroring night back and moving its labels to 0-9 recovers scikit-learn's examples: both halves together are
    # the dataset, less the few examples the clients of 20 leave out.
    recovered = _keys(day_images, day_labels) + _keys(night_images[:, :, ::-1], night_labels - 10)
    original = _keys(self.sklearn.images, self.sklearn.target)
    self.assertEqual(recovered - original, collections.Counter())
    self.assertBetween(sum(recovered.values()), len(self.sklearn.target) - 20, len(self.sklearn.target))

  def test_clients_are_label_skewed(self):
    # A client of 20 examples drawn IID from 10 balanced classes holds about 10 (1 - 0.9^20) = 8.8 distinct
    # classes; Dirichlet(1) class mixes give far fewer.
    distinct = [len(set(next(iter(self.task.train_data[0].create_tf_dataset_for_client(c).batch(100)))['label']
                        .numpy())) for c in self.task.mode_client_ids()[0]]
    self.assertLess(np.mean(distinct), 7.0)

  def test_seeded(self):
    again = digits.create_task(seed=4)
    other = digits.create_task(seed=5)
    first = next(iter(self.task.test_data[1].batch(50)))['pixels']
    self.assertAllEqual(first, next(iter(again.test_data[1].batch(50)))['pixels'])
    self.assertNotAllEqual(first, next(iter(other.test_data[1].batch(50)))['pixels'])

  def test_model_and_preprocessing(self):
    batch = self.task.batch_fn(next(iter(self.task.test_data[0].batch(5))))
    self.assertEqual(batch['x'].shape, (5, 8, 8, 1))
    self.assertBetween(float(tf.reduce_max(batch['x'])), 0.5, 1.0)
    outputs = self.task.model_fn(2)(batch['x'])
    self.assertEqual(outputs['features'].shape, (5, digits.FEATURE_DIM))
    self.assertEqual(outputs['logits'].shape, (5, 2, 20))
    for scenario in ('periodic', 'mixture_drift', 'evolving_domains', 'dirichlet_mixture', 'windowed'):
      registry.validate_scenario('digits', scenario)


class DigitsWrittenTest(tf.test.TestCase):
  """`digits_written`: every digit as written in one base of IID clients, the base of rotated real handwriting."""

  def test_one_base_of_iid_clients_holding_the_digits_as_written(self):
    task = registry.create('digits_written', seed=4)
    self.assertEqual(task.mode_names, ('written',))
    self.assertEqual(task.num_classes, 10)
    images, labels = _mode_examples(task, 0)
    original = _keys(datasets.load_digits().images, datasets.load_digits().target)
    self.assertEqual(_keys(images, labels) - original, collections.Counter())  # As written, not mirrored.
    self.assertBetween(len(labels), 1797 - 20, 1797)
    self.assertLen(task.mode_client_ids()[0], 62)  # 1,258 training digits in clients of 20.
    # IID clients of 20 from 10 balanced classes hold about 10 (1 - 0.9^20) = 8.8 distinct classes.
    distinct = [len(set(next(iter(task.train_data[0].create_tf_dataset_for_client(c).batch(100)))['label']
                        .numpy())) for c in task.mode_client_ids()[0]]
    self.assertBetween(np.mean(distinct), 8.0, 9.5)
    batch = task.batch_fn(next(iter(task.test_data[0].batch(3))))
    self.assertEqual(task.model_fn(1)(batch['x'])['logits'].shape, (3, 1, 10))

  def test_evolving_domains_fit_twelve_domains_of_five_clients(self):
    task = registry.create('digits_written', seed=0)
    build = lambda clients: scenarios.build(
        'evolving_domains', evolving_domains.Settings(num_domains=12, num_clients=clients), task.population(),
        scenario.Schedule(clients_per_round=5, seed=0))
    self.assertLen(build(5).round_plan(1).clients[0].parts, 11)  # Eleven sources, one distinct client each.
    with self.assertRaisesRegex(ValueError, 'needs that many clients'):
      build(6)
    with self.assertRaisesRegex(ValueError, 'one base population'):
      registry.validate_scenario('digits_written', 'periodic')


class DigitsLearnTest(tf.test.TestCase):

  def test_no_dist_shift_learns(self):
    in_process_run.start_worker()
    root = self.create_tempdir().full_path
    status, stderr = in_process_run.run(['--task=digits', '--algorithm=nds', '--total_rounds=64',
                                         '--rounds_per_eval=64', f'--root_output_dir={root}',
                                         '--experiment_name=nds'])
    self.assertEqual(status, 0, stderr)
    last = in_process_run.metrics_rows(os.path.join(root, 'nds'))[-1]
    self.assertGreater(float(last['test_accuracy']), 0.6)  # Chance is 0.05; 0.78 measured at round 64, seed 0.


if __name__ == '__main__':
  tf.test.main()
