"""Networks split into a representation and a classifier, for the FedEvolve paper's methods.

FedEvolve has two representation towers psi and phi and no classifier; FedEvp one tower f and a classifier head w,
of which it personalizes the head and the tower's last layer. A `Representation` says how to build a task's tower
and head and how many of the tower's trailing weighted layers form its "last layer".

- `conv_tower`: the paper's CNN as its parameter counts pin it (Table 8: FedEvolve 741,120 = 2 x 370,560; FedEvp
  379,392 = 370,560 + 8,832): 4 x [Conv 3x3 with bias + normalization + ReLU + 2x2 max-pool], channels
  1-64-128-128-128, global average pooling to 128 features: 370,560 trainable parameters for 1-channel inputs.
  Choice: GroupNorm (8 groups) where the paper's count implies BatchNorm: the same trainable parameters (a scale
  and an offset per channel), but no running statistics, which averaging of trainable weights would never update
  and whose batch estimates differ per client (the suite's CIFAR ResNet makes the same substitution).
  Its last layer is the fourth block (conv + norm).
- `conv_head`: Dense 128 -> 64 (ReLU) -> C, both without bias: 8,832 parameters for C = 10.
- `mlp_tower` / `mlp_head`: Circle's 5-layer MLP (3 representation + 2 classifier layers, widths 32 as in
  `tasks.circle`); the tower's last layer is its third Dense.
- `extractor_representation`: any task's multi-branch network split at its shared extractor: the tower is the
  extractor, the head one Dense layer (the network's branch); the last layer is the extractor's last weighted one.
"""

from typing import Callable, NamedTuple

import tensorflow as tf

from models import multi_branch

PSI = 'psi'
PHI = 'phi'
CONV_CHANNELS = (64, 128, 128, 128)


class Representation(NamedTuple):
  """tower(): a Keras model x -> features [B, d]; head(): features -> logits [B, C]; last_layers: the tower's
  trailing weighted layers that personalization also tunes; own_network: whether it is the task's own network (or
  the same architecture), for which the task's server learning rate was chosen, rather than another paper's."""
  tower: Callable[[], tf.keras.Model]
  head: Callable[[], tf.keras.Model]
  last_layers: int
  own_network: bool = True


def conv_tower(input_shape: tuple[int, ...]) -> tf.keras.Model:
  layers = [tf.keras.Input(shape=input_shape)]
  for channels in CONV_CHANNELS:
    layers += [tf.keras.layers.Conv2D(channels, 3, padding='same'),
               tf.keras.layers.GroupNormalization(groups=8), tf.keras.layers.ReLU(),
               tf.keras.layers.MaxPool2D(padding='same')]
  return tf.keras.Sequential(layers + [tf.keras.layers.GlobalAveragePooling2D()], name='representation')


def conv_head(num_classes: int) -> tf.keras.Model:
  return tf.keras.Sequential([tf.keras.Input(shape=(CONV_CHANNELS[-1],)),
                              tf.keras.layers.Dense(64, activation='relu', use_bias=False),
                              tf.keras.layers.Dense(num_classes, use_bias=False)], name='classifier')


def conv_representation(input_shape: tuple[int, ...], num_classes: int) -> Representation:
  return Representation(lambda: conv_tower(input_shape), lambda: conv_head(num_classes), last_layers=2,
                        own_network=False)


def mlp_representation(input_dim: int, num_classes: int, units: int = 32) -> Representation:
  tower = lambda: tf.keras.Sequential([tf.keras.Input(shape=(input_dim,))] + [
      tf.keras.layers.Dense(units, activation='relu') for _ in range(3)], name='representation')
  head = lambda: tf.keras.Sequential([tf.keras.Input(shape=(units,)), tf.keras.layers.Dense(units, activation='relu'),
                                      tf.keras.layers.Dense(num_classes)], name='classifier')
  return Representation(tower, head, last_layers=1)


def extractor_representation(model_fn: Callable[[int], tf.keras.Model], num_classes: int) -> Representation:
  """The split of a multi-branch network (`multi_branch.build_multi_branch_model`) at its extractor."""

  def tower():
    extractor = next(layer for layer in model_fn(1).layers if isinstance(layer, tf.keras.Model))
    return tf.keras.models.clone_model(extractor)

  def head():
    features = tower().output_shape[-1]
    return tf.keras.Sequential([tf.keras.Input(shape=(features,)), tf.keras.layers.Dense(num_classes)],
                               name='classifier')

  return Representation(tower, head, last_layers=1)


def two_tower_model(representation: Representation, tied_init: bool = False) -> tf.keras.Model:
  """FedEvolve's network: outputs {'psi': psi(x) [B, d], 'phi': phi(x) [B, d]}, two towers of separate weights.

  `tied_init`: phi starts as a copy of psi's initial weights (two towers, one starting point). The copy is made when
  the model is built eagerly, as the run's initial weights are (`algorithms.core.learning_process.initial_weights`);
  a model built while tracing a computation has its weights assigned from the server state before use."""
  psi, phi = representation.tower(), representation.tower()
  psi._name, phi._name = PSI, PHI  # pylint: disable=protected-access
  if tied_init and tf.executing_eagerly():
    phi.set_weights(psi.get_weights())
  inputs = tf.keras.Input(shape=psi.input_shape[1:], dtype=psi.inputs[0].dtype, name='x')
  return tf.keras.Model(inputs=inputs, outputs={PSI: psi(inputs), PHI: phi(inputs)}, name='two_towers')


def two_tower_outputs(model: tf.keras.Model, x: tf.Tensor, is_support: tf.Tensor, training: bool = True) -> dict:
  """A `two_tower_model`'s outputs when each row needs one tower: {'psi': [B, d], 'phi': [B, d]} with psi(x) on the
  rows where `is_support` [B] and phi(x) on the others, zeros elsewhere. Each tower runs on its rows only (FedEvolve's
  pair batches: psi makes the support's prototypes, phi embeds the queries), half the work of both on every row."""
  rows = {PSI: tf.where(is_support), PHI: tf.where(tf.logical_not(is_support))}  # [n, 1] row indices.
  outputs = {}
  for name, indices in rows.items():
    features = model.get_layer(name)(tf.gather_nd(x, indices), training=training)
    outputs[name] = tf.scatter_nd(indices, features, tf.stack([tf.shape(x, out_type=tf.int64)[0],
                                                              tf.shape(features, out_type=tf.int64)[1]]))
  return outputs


def tower_head_model(representation: Representation) -> tf.keras.Model:
  """FedEvp's network in the multi-branch output format: {'features': f(x) [B, d], 'logits': [B, 1, C]}."""
  tower, head = representation.tower(), representation.head()
  inputs = tf.keras.Input(shape=tower.input_shape[1:], dtype=tower.inputs[0].dtype, name='x')
  features = tower(inputs)
  logits = tf.keras.layers.Reshape((1, -1))(head(features))
  return tf.keras.Model(inputs=inputs, outputs={multi_branch.FEATURES: features, multi_branch.LOGITS: logits},
                        name='tower_head')


def personalized_mask(model: tf.keras.Model, last_layers: int) -> tuple[bool, ...]:
  """For each trainable tensor of a `tower_head_model` (in `ModelWeights.trainable` order), whether FedEvp's
  personalization tunes it: the head's, and the tower's last `last_layers` weighted layers' (0: the head alone,
  FedRep's personal part)."""
  tower, head = [layer for layer in model.layers if isinstance(layer, tf.keras.Model)]
  weighted = [layer for layer in tower.layers if layer.trainable_weights]
  tuned = {id(v) for v in head.trainable_weights}
  tuned |= {id(v) for layer in weighted[len(weighted) - last_layers:] for v in layer.trainable_weights}
  return tuple(id(v) in tuned for v in model.trainable_variables)
