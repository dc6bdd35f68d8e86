"""The Stack Overflow next-word network: embedding 96, one LSTM of 670 units, K projection branches of 96 units
before one shared output layer (the public code's `create_recurrent_dual_branch_model`).

    tokens [B, L] -> Embedding(V_ext, 96, mask_zero) -> LSTM(670, return_sequences) = h [B, L, 670]
      -> branch_k = Dense(96) -> shared Dense(V_ext) -> logits_k [B, L, V_ext]

The branches are only the 96-unit projections (670 * 96 + 96 = 64,416 parameters each); the shared output layer
(96 * 10,004 + 10,004 = 970,388) is about 15 times larger. One extra branch is 1.6% of the single-branch network.

Clustering feature (documented choice): the mean over a sequence's non-padding positions of the LSTM output h,
670-d. It is the shared extractor's output, so every branch sees the same feature and the choice of branch does
not change it; the public code instead concatenates each branch's pooled 96-d projection (192-d), which ties the
feature to the branches' own weights. Padding is position id 0; Keras masks it from the embedding on.
"""

import tensorflow as tf

from models import multi_branch

EMBEDDING_DIM = 96
LSTM_UNITS = 670


def create_model(num_branches: int, extended_vocab_size: int, sequence_length: int) -> tf.keras.Model:
  extractor = tf.keras.Sequential([
      tf.keras.Input(shape=(sequence_length,), dtype=tf.int64),
      tf.keras.layers.Embedding(extended_vocab_size, EMBEDDING_DIM, mask_zero=True),
      tf.keras.layers.LSTM(LSTM_UNITS, return_sequences=True),
  ], name='extractor')
  pooling = tf.keras.layers.GlobalAveragePooling1D(name='feature_pooling')  # Honours the padding mask.
  return multi_branch.build_multi_branch_model(
      extractor, num_branches, EMBEDDING_DIM,
      output_layer=tf.keras.layers.Dense(extended_vocab_size, name='output'),
      features_fn=lambda h, branch_outputs: pooling(h), name='stackoverflow_lstm')
