"""Tests the EMNIST network's parameter counts against the paper's figures worked out by hand."""

import tensorflow as tf

from models import emnist_cnn
from models import multi_branch


class EmnistCnnTest(tf.test.TestCase):

  def test_parameter_counts_and_overhead(self):
    counts = multi_branch.parameter_counts(emnist_cnn.create_model(2))
    trunk = (3 * 3 * 1 * 32 + 32) + (3 * 3 * 32 * 64 + 64) + (12 * 12 * 64 * 128 + 128)  # 1,198,592.
    branch = 128 * 62 + 62  # 7,998.
    self.assertEqual(counts['branch'], branch)
    self.assertEqual(counts['total'], trunk + 2 * branch)
    self.assertEqual(f'{counts["branch_overhead_percent"]:.1f}', '0.7')  # Section 4: 0.7% on EMNIST.

  def test_outputs(self):
    outputs = emnist_cnn.create_model(3)(tf.zeros([2, 28, 28, 1]))
    self.assertEqual(outputs['features'].shape, (2, 128))
    self.assertEqual(outputs['logits'].shape, (2, 3, 62))


if __name__ == '__main__':
  tf.test.main()
