"""ResNet-18 with GroupNorm for the CIFAR task: a 512-d feature and K linear 110-way branches.

The public code's network (`create_resnet18`, from TFF's baseline ResNet): pre-activation (v2) basic blocks,
repetitions [2, 2, 2, 2] of 64/128/256/512 filters; stem Conv 7x7 stride 2 (no bias) -> GN -> ReLU -> MaxPool 3x3
stride 2; a 1x1 convolution shortcut where the shape changes; final GN -> ReLU -> global average pooling = the
512-d clustering feature. GroupNorm has 2 groups, epsilon 1e-3 and no learnable scale or offset, as there.

Choice: the stages use the standard ResNet strides (1, 2, 2, 2). The public code calls its residual blocks
without strides, so every stage runs at the stem's 6x6 resolution; that costs about 6x the compute and no
parameters (the parameter counts are the same). `create_model(..., stage_strides=(1, 1, 1, 1))` builds that
reading. The Keras L2 regularizers of the public code never reached its loss and are left out.

Parameters: 11,166,912 in the extractor; one 110-way branch is 512 * 110 + 110 = 56,430, 0.5% of the single-branch
network.
"""

from typing import Sequence

import tensorflow as tf

from models import multi_branch

NUM_CLASSES = 110
FEATURE_DIM = 512
INPUT_SHAPE = (24, 24, 3)
_FILTERS = (64, 128, 256, 512)
_REPETITIONS = (2, 2, 2, 2)


def _group_norm():
  return tf.keras.layers.GroupNormalization(groups=2, epsilon=1e-3, center=False, scale=False)


def _conv(filters: int, kernel_size: int, strides: int = 1):
  return tf.keras.layers.Conv2D(filters, kernel_size, strides=strides, padding='same', use_bias=False,
                                kernel_initializer='he_normal')


def _basic_block(x: tf.Tensor, filters: int, strides: int) -> tf.Tensor:
  """Pre-activation basic block: GN-ReLU-conv3x3-GN-ReLU-conv3x3 plus the (projected) input."""
  preactivated = tf.keras.layers.ReLU()(_group_norm()(x))
  if strides != 1 or x.shape[-1] != filters:
    shortcut = _group_norm()(_conv(filters, 1, strides)(preactivated))
  else:
    shortcut = x
  y = _conv(filters, 3, strides)(preactivated)
  y = _conv(filters, 3)(tf.keras.layers.ReLU()(_group_norm()(y)))
  return tf.keras.layers.Add()([y, shortcut])


def create_extractor(stage_strides: Sequence[int] = (1, 2, 2, 2)) -> tf.keras.Model:
  inputs = tf.keras.Input(shape=INPUT_SHAPE)
  x = tf.keras.layers.ReLU()(_group_norm()(_conv(64, 7, strides=2)(inputs)))
  x = tf.keras.layers.MaxPool2D(3, strides=2, padding='same')(x)
  for filters, repetitions, strides in zip(_FILTERS, _REPETITIONS, stage_strides):
    for i in range(repetitions):
      x = _basic_block(x, filters, strides if i == 0 else 1)
  x = tf.keras.layers.ReLU()(_group_norm()(x))
  features = tf.keras.layers.GlobalAveragePooling2D()(x)
  return tf.keras.Model(inputs, features, name='resnet18_gn')


def create_model(num_branches: int, stage_strides: Sequence[int] = (1, 2, 2, 2)) -> tf.keras.Model:
  return multi_branch.build_multi_branch_model(
      create_extractor(stage_strides), num_branches, NUM_CLASSES,
      branch_initializer=tf.keras.initializers.RandomNormal(stddev=0.01), name='resnet18_gn')
