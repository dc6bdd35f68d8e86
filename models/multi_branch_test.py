"""Tests the multi-branch network builder: outputs, branch averaging, parameter counts worked out by hand."""

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from models import multi_branch


def _extractor():
  return tf.keras.Sequential([tf.keras.Input(shape=(6,)), tf.keras.layers.Dense(4, activation='relu')])


class MultiBranchTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.parameters(1, 2, 3)
  def test_outputs_features_and_every_branch(self, num_branches):
    model = multi_branch.build_multi_branch_model(_extractor(), num_branches, branch_units=5)
    x = np.random.default_rng(0).normal(size=(7, 6)).astype(np.float32)
    outputs = model(x)
    self.assertEqual(outputs[multi_branch.FEATURES].shape, (7, 4))
    self.assertEqual(outputs[multi_branch.LOGITS].shape, (7, num_branches, 5))
    # Branch k is its own Dense layer applied to the features.
    for k in range(num_branches):
      kernel, bias = model.get_layer(f'branch_{k + 1}').get_weights()
      self.assertAllClose(outputs[multi_branch.LOGITS][:, k], outputs[multi_branch.FEATURES].numpy() @ kernel + bias,
                          atol=1e-5)

  def test_average_branch_logits(self):
    logits = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    self.assertAllClose(multi_branch.average_branch_logits(logits), logits.mean(axis=1))

  def test_shared_output_layer_and_custom_features(self):
    output_layer = tf.keras.layers.Dense(9, name='shared_output')
    model = multi_branch.build_multi_branch_model(
        _extractor(), 2, branch_units=3, output_layer=output_layer,
        features_fn=lambda h, branches: tf.concat(branches, axis=-1))
    outputs = model(np.ones((2, 6), np.float32))
    self.assertEqual(outputs[multi_branch.LOGITS].shape, (2, 2, 9))
    self.assertEqual(outputs[multi_branch.FEATURES].shape, (2, 6))  # Two 3-unit branch outputs.

  def test_parameter_counts_by_hand(self):
    model = multi_branch.build_multi_branch_model(_extractor(), 2, branch_units=5)
    counts = multi_branch.parameter_counts(model)
    extractor, branch = 6 * 4 + 4, 4 * 5 + 5  # 28 and 25.
    self.assertEqual(counts['total'], extractor + 2 * branch)
    self.assertEqual(counts['branch'], branch)
    self.assertAlmostEqual(counts['branch_overhead_percent'], 100.0 * 25 / 53)

  def test_rejects_zero_branches(self):
    with self.assertRaisesRegex(ValueError, 'num_branches must be >= 1'):
      multi_branch.build_multi_branch_model(_extractor(), 0, branch_units=5)


if __name__ == '__main__':
  tf.test.main()
