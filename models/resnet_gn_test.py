"""Tests the CIFAR ResNet-18 (GroupNorm) against parameter counts worked out by hand, and its outputs."""

import tensorflow as tf

from models import multi_branch
from models import resnet_gn


def _resnet18_conv_parameters():
  """Convolutions only (no biases; GroupNorm has no parameters): stem, 8 basic blocks, 3 projections."""
  total = 7 * 7 * 3 * 64
  inputs = 64
  for filters in (64, 128, 256, 512):
    for block in range(2):
      total += 3 * 3 * inputs * filters + 3 * 3 * filters * filters
      if block == 0 and inputs != filters:
        total += inputs * filters  # 1x1 projection shortcut.
      inputs = filters
  return total


class ResnetGnTest(tf.test.TestCase):

  def test_parameter_counts_and_overhead(self):
    counts = multi_branch.parameter_counts(resnet_gn.create_model(2))
    branch = 512 * 110 + 110
    self.assertEqual(counts['branch'], branch)
    self.assertEqual(counts['total'], _resnet18_conv_parameters() + 2 * branch)
    self.assertEqual(f'{counts["branch_overhead_percent"]:.1f}', '0.5')  # Section 4: 0.5% on CIFAR.

  def test_outputs_and_the_public_code_strides(self):
    x = tf.random.normal([2, 24, 24, 3])
    for strides in ((1, 2, 2, 2), (1, 1, 1, 1)):
      model = resnet_gn.create_model(2, stage_strides=strides)
      outputs = model(x)
      self.assertEqual(outputs['features'].shape, (2, 512))
      self.assertEqual(outputs['logits'].shape, (2, 2, 110))
      self.assertEqual(model.count_params(), _resnet18_conv_parameters() + 2 * (512 * 110 + 110))


if __name__ == '__main__':
  tf.test.main()
