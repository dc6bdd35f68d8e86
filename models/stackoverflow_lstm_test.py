"""Tests the Stack Overflow LSTM: parameter counts by hand, and the padding-masked clustering feature."""

import numpy as np
import tensorflow as tf

from models import multi_branch
from models import stackoverflow_lstm


class StackoverflowLstmTest(tf.test.TestCase):

  def test_parameter_counts_and_overhead(self):
    vocab = 10_004
    counts = multi_branch.parameter_counts(stackoverflow_lstm.create_model(2, vocab, 20))
    embedding = vocab * 96
    lstm = 4 * (670 * (96 + 670) + 670)
    branch = 670 * 96 + 96
    output = 96 * vocab + vocab
    self.assertEqual(counts['branch'], branch)
    self.assertEqual(counts['total'], embedding + lstm + 2 * branch + output)
    self.assertGreater(output / branch, 15)  # "The output layer is about 15 times larger."
    self.assertEqual(f'{counts["branch_overhead_percent"]:.1f}', '1.6')  # Section 4: 1.6% on Stack Overflow.

  def test_feature_is_the_lstm_output_averaged_over_non_padding_positions(self):
    model = stackoverflow_lstm.create_model(3, extended_vocab_size=50, sequence_length=6)
    x = np.array([[5, 6, 7, 0, 0, 0], [9, 9, 9, 9, 9, 9]], np.int64)
    outputs = model(x)
    h = model.get_layer('extractor')(x).numpy()
    self.assertAllClose(outputs['features'][0], h[0, :3].mean(0), atol=1e-6)
    self.assertAllClose(outputs['features'][1], h[1].mean(0), atol=1e-6)
    self.assertEqual(outputs['logits'].shape, (2, 3, 6, 50))


if __name__ == '__main__':
  tf.test.main()
