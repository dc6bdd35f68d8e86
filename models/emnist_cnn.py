"""The EMNIST network of the paper: a two-conv LeNet whose 128-d dense layer is the clustering feature.

Section 4 ("LeNet with 2 Conv layers and 2 FC layers"; the public code's dual-branch CNN):
Conv2D(32, 3x3, ReLU) -> Conv2D(64, 3x3, ReLU) -> MaxPool 2x2 -> Flatten -> Dense(128, ReLU) = feature, then K
linear 62-way branches (`models.multi_branch`; other tasks on 28 x 28 images set their own class count). One extra branch is 128 * 62 + 62 = 7,998 parameters, 0.7% of the
1,206,590 of the single-branch network.
"""

import tensorflow as tf

from models import multi_branch

NUM_CLASSES = 62
FEATURE_DIM = 128


def create_model(num_branches: int, num_classes: int = NUM_CLASSES) -> tf.keras.Model:
  extractor = tf.keras.Sequential([
      tf.keras.Input(shape=(28, 28, 1)),
      tf.keras.layers.Conv2D(32, 3, activation='relu'),
      tf.keras.layers.Conv2D(64, 3, activation='relu'),
      tf.keras.layers.MaxPool2D(2),
      tf.keras.layers.Flatten(),
      tf.keras.layers.Dense(FEATURE_DIM, activation='relu'),
  ], name='extractor')
  return multi_branch.build_multi_branch_model(extractor, num_branches, num_classes, name='emnist_cnn')
