"""Tests the synthetic task: populations, label subsets, determinism, and the mode structure it is built for."""

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tasks import registry
from tasks import synthetic


def _all_examples(task, mode, num_clients=None):
  """(x, y) of the mode's clients (the first `num_clients` of them), in client order."""
  xs, ys = [], []
  for client_id in task.mode_client_ids()[mode][:num_clients]:
    data = list(task.train_data[mode].create_tf_dataset_for_client(client_id).batch(10_000))[0]
    xs.append(data['x'].numpy())
    ys.append(data['y'].numpy())
  return np.concatenate(xs), np.concatenate(ys)


class SyntheticTaskTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.task = synthetic.create_task(seed=3)
    cls.examples = [_all_examples(cls.task, mode) for mode in range(2)]  # Read once: 300-360 clients each.

  def test_populations(self):
    summary = self.task.population_summary()
    self.assertEqual(summary['day']['clients'], 300)
    self.assertEqual(summary['night']['clients'], 360)
    self.assertEqual(summary['day']['test_examples'], 2000)
    sizes = np.array(list(self.task.client_sizes[0].values()))
    self.assertGreaterEqual(sizes.min(), 10)
    self.assertLessEqual(sizes.max(), 400)
    self.assertGreater(sizes.std(), 10)  # Unequal client sizes.
    self.assertEqual(summary['day']['train_examples'], sizes.sum())

  def test_label_subsets(self):
    (_, day_labels), (_, night_labels) = self.examples
    self.assertEqual(set(day_labels), set(range(10)))
    self.assertEqual(set(night_labels), set(range(10, 20)))

  def test_same_seed_same_data_other_seed_other_data(self):
    synthetic._populations.cache_clear()  # Generated again, not the kept copy.  pylint: disable=protected-access
    again = synthetic.create_task(seed=3)
    other = synthetic.create_task(seed=4)
    self.assertAllEqual(_all_examples(again, 0)[0], self.examples[0][0])
    self.assertNotAllClose(_all_examples(other, 0, num_clients=1)[0][:10], self.examples[0][0][:10])

  def test_modes_differ_in_input_distribution_but_overlap_per_example(self):
    (day_x, _), (night_x, _) = self.examples
    # Nearest-mean classification of single examples by mode is well above chance but far from perfect ...
    day_mean, night_mean = day_x.mean(0), night_x.mean(0)
    direction = day_mean - night_mean
    threshold = direction @ (day_mean + night_mean) / 2
    single = np.mean(np.concatenate([day_x @ direction > threshold, night_x @ direction <= threshold]))
    self.assertBetween(single, 0.6, 0.97)
    # ... while the mean of 20 examples of one mode is far more often on the right side.
    rng = np.random.default_rng(0)
    pooled = [rng.choice(len(x), size=(200, 20)) for x in (day_x, night_x)]
    day_pooled = day_x[pooled[0]].mean(1) @ direction > threshold
    night_pooled = night_x[pooled[1]].mean(1) @ direction <= threshold
    pooled_accuracy = np.mean(np.concatenate([day_pooled, night_pooled]))
    self.assertGreater(pooled_accuracy, 0.9)
    self.assertGreater(pooled_accuracy, single + 0.1)

  def test_style_scale_moves_each_mode_by_its_own_offset_and_nothing_else(self):
    # x = R(z) + s_m + c_i + noise with s_m = style_scale * u_m: doubling the scale from the default 0.15 adds
    # 0.15 u_m, the same vector for every example of mode m, to each input, and changes nothing else.
    wider = registry.create('synthetic', synthetic.Settings(style_scale=0.3), seed=3)
    offsets = []
    for mode in range(2):
      x, y = self.examples[mode]
      wider_x, wider_y = _all_examples(wider, mode)
      self.assertAllEqual(wider_y, y)
      shift = wider_x - x
      self.assertAllClose(shift, np.broadcast_to(shift[0], shift.shape), atol=1e-5)
      self.assertBetween(np.linalg.norm(shift[0]), 0.15 * 8 * 0.6, 0.15 * 8 * 1.4)  # |0.15 u_m|, u_m ~ N(0, I_64).
      offsets.append(shift[0])
    self.assertGreater(np.linalg.norm(offsets[0] - offsets[1]), 0.5)

  def test_client_batches_carry_the_mode(self):
    spec = tff.simulation.baselines.ClientSpec(num_epochs=2, batch_size=8, max_elements=20)
    client_id = self.task.mode_client_ids()[1][0]
    batches = list(self.task.client_dataset(1, client_id, spec, shuffle_seed=(0, 0)))
    self.assertEqual(sum(len(mode) for _, mode in batches), 20)  # max_elements caps repeated epochs.
    self.assertTrue(all(np.all(mode.numpy() == 1) for _, mode in batches))

  def test_shuffle_depends_on_seed_only(self):
    spec = tff.simulation.baselines.ClientSpec(num_epochs=1, batch_size=100)
    client_id = self.task.mode_client_ids()[0][0]
    first = [raw['y'].numpy() for raw, _ in self.task.client_dataset(0, client_id, spec, shuffle_seed=(0, 5))]
    second = [raw['y'].numpy() for raw, _ in self.task.client_dataset(0, client_id, spec, shuffle_seed=(0, 5))]
    self.assertAllEqual(np.concatenate(first), np.concatenate(second))

  def test_test_batches(self):
    batch = next(iter(self.task.test_dataset(1, batch_size=64)))
    self.assertEqual(batch['x'].shape, (64, synthetic.INPUT_DIM))
    self.assertAllEqual(batch['mode'], np.ones(64))
    self.assertTrue(np.all((batch['y'].numpy() >= 10) & (batch['y'].numpy() < 20)))

  def test_mixed_test_batches_hold_both_modes_in_the_given_share(self):
    day_x = np.concatenate([b['x'].numpy() for b in self.task.test_dataset(0, batch_size=500)])
    for share, day_per_batch in ((0.25, 16), (0.5, 32), (0.8, 51)):
      batches = list(self.task.mixed_test_dataset(share, batch_size=64, seed=1))
      self.assertLen(batches, min(2000 // day_per_batch, 2000 // (64 - day_per_batch)))  # 2,000 per mode.
      for batch in batches:
        self.assertAllEqual(batch['mode'], [0] * day_per_batch + [1] * (64 - day_per_batch))
        labels = batch['y'].numpy()
        self.assertTrue(np.all(labels[:day_per_batch] < 10) and np.all(labels[day_per_batch:] >= 10))
      mixed_day = np.concatenate([b['x'].numpy()[:day_per_batch] for b in batches])
      self.assertLen(np.unique(mixed_day, axis=0), len(mixed_day))  # Drawn without replacement ...
      self.assertEqual(len(np.unique(np.concatenate([day_x, mixed_day]), axis=0)), len(day_x))  # ... from day's.
    one_mode = list(self.task.mixed_test_dataset(1.0, batch_size=64, seed=1))
    self.assertEqual(sum(len(b['y']) for b in one_mode), 2000)  # q = 1: the whole day test set.
    self.assertTrue(all(np.all(b['mode'].numpy() == 0) for b in one_mode))


if __name__ == '__main__':
  tf.test.main()
