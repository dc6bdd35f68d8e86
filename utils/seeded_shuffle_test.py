"""`utils.seeded_shuffle`: a dataset shuffle whose order is a function of the seed pair it is given alone."""

from absl.testing import absltest
import numpy as np
import tensorflow as tf

from utils import seeded_shuffle


def _order(dataset: tf.data.Dataset) -> list[int]:
  return [int(x) for x in dataset.as_numpy_iterator()]


class SeededShuffleTest(absltest.TestCase):

  def test_order_ignores_the_global_seed_and_matches_tf_under_the_pair(self):
    data = tf.data.Dataset.range(200)
    orders = []
    for global_seed in (None, 1, 987):
      tf.random.set_seed(global_seed)
      orders.append(_order(seeded_shuffle.shuffle(data, 50, (7, 123), reshuffle_each_iteration=True).repeat(3)))
    self.assertEqual(orders[1], orders[0])
    self.assertEqual(orders[2], orders[0])
    tf.random.set_seed(7)  # TF's own shuffle draws from (global seed, op seed).
    self.assertEqual(_order(data.shuffle(50, seed=123, reshuffle_each_iteration=True).repeat(3)), orders[0])
    tf.random.set_seed(None)
    self.assertEqual(_order(seeded_shuffle.shuffle(data, 50, (seeded_shuffle.DEFAULT_GLOBAL_SEED, 5), False)),
                     _order(data.shuffle(50, seed=5, reshuffle_each_iteration=False)))

  def test_each_epoch_is_a_permutation_and_the_epochs_differ(self):
    epochs = np.reshape(_order(seeded_shuffle.shuffle(tf.data.Dataset.range(100), 100, (3, 4), True).repeat(2)),
                        [2, 100])
    for epoch in epochs:
      np.testing.assert_array_equal(np.sort(epoch), np.arange(100))
    self.assertFalse(np.array_equal(epochs[0], epochs[1]))
    fixed = np.reshape(_order(seeded_shuffle.shuffle(tf.data.Dataset.range(100), 100, (3, 4), False).repeat(2)),
                       [2, 100])
    np.testing.assert_array_equal(fixed[0], fixed[1])
    self.assertFalse(np.array_equal(fixed[0], np.arange(100)))

  def test_other_pairs_give_other_orders(self):
    data = tf.data.Dataset.range(100)
    first = _order(seeded_shuffle.shuffle(data, 100, (3, 4), False))
    self.assertNotEqual(_order(seeded_shuffle.shuffle(data, 100, (3, 5), False)), first)
    self.assertNotEqual(_order(seeded_shuffle.shuffle(data, 100, (4, 4), False)), first)


if __name__ == '__main__':
  absltest.main()
