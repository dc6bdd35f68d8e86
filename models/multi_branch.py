"""Multi-branch networks: a shared feature extractor f(w_f, x) and K light branches g_k (Section 3 of Zhu et al.).

One builder serves every task's architecture:

    x --extractor--> h --branch_k--> z_k --output_layer (shared, optional)--> logits_k,   k = 1..K

- `extractor` is any Keras model (a CNN, a ResNet, an embedding + LSTM);
- each branch is a single Dense layer (the paper's "single linear layer"); for classification the branch outputs
  the logits, for next-word prediction the branch is the projection before a shared output layer;
- the model's outputs are a dict: `features` [B, D], the clustering features, and `logits` [B, K, ...], every
  branch's logits stacked on axis 1. By default the features are h itself; a task may give `features_fn` (e.g.
  Stack Overflow pools its sequence outputs).

The Vanilla / No-Dist-Shift prediction averages the branches' logits (`average_branch_logits`): the network is
trained and evaluated as one model whose last layer is the mean of the K branches. K = 1 is the single-branch model
of Appendix A.8.
"""

from typing import Callable, Optional

import tensorflow as tf

FEATURES = 'features'
LOGITS = 'logits'

FeaturesFn = Callable[[tf.Tensor, list[tf.Tensor]], tf.Tensor]


def build_multi_branch_model(extractor: tf.keras.Model, num_branches: int, branch_units: int,
                             output_layer: Optional[tf.keras.layers.Layer] = None,
                             features_fn: Optional[FeaturesFn] = None,
                             branch_initializer='glorot_uniform', name: str = 'multi_branch') -> tf.keras.Model:
  """Builds the K-branch network on top of `extractor`.

  Args:
    extractor: Maps the model input to the shared representation h.
    num_branches: K >= 1.
    branch_units: Output units of each branch's Dense layer.
    output_layer: An optional layer shared by all branches, applied after each branch.
    features_fn: (h, [z_1..z_K]) -> clustering features [B, D]; default: h.
    branch_initializer: Kernel initializer of the branch layers.
    name: The Keras model name.

  Returns:
    A Keras model with outputs {'features': [B, D], 'logits': [B, K, ...]}.
  """
  if num_branches < 1:
    raise ValueError(f'num_branches must be >= 1; got {num_branches}.')
  inputs = tf.keras.Input(shape=extractor.input_shape[1:], dtype=extractor.inputs[0].dtype, name='x')
  shared = extractor(inputs)
  branch_outputs = [
      tf.keras.layers.Dense(branch_units, kernel_initializer=branch_initializer, name=f'branch_{k + 1}')(shared)
      for k in range(num_branches)
  ]
  logits = [output_layer(z) if output_layer is not None else z for z in branch_outputs]
  stacked = tf.keras.layers.Lambda(lambda ls: tf.stack(ls, axis=1), name='stack_branches')(logits)
  features = features_fn(shared, branch_outputs) if features_fn is not None else shared
  return tf.keras.Model(inputs=inputs, outputs={FEATURES: features, LOGITS: stacked}, name=name)


def build_multi_network_model(network_fn: Callable[[], tf.keras.Model], num_networks: int,
                              name: str = 'multi_network', stack_features: bool = False) -> tf.keras.Model:
  """K complete single-branch networks side by side, in the multi-branch model's output format.

  Args:
    network_fn: Builds one single-branch network (a `build_multi_branch_model` with one branch).
    num_networks: K >= 1.
    name: The Keras model name.
    stack_features: Output every network's features [B, K, D] rather than network 1's.

  Returns:
    A Keras model with outputs {'features': network 1's features [B, D] (every network's [B, K, D] with
    `stack_features`), 'logits': [B, K, ...]}, network k's logits and features at index k - 1; the networks share
    nothing (layers `network_1` ... `network_K`).
  """
  networks = [network_fn() for _ in range(num_networks)]
  for k, network in enumerate(networks):
    network._name = f'network_{k + 1}'  # pylint: disable=protected-access
  inputs = tf.keras.Input(shape=networks[0].input_shape[1:], dtype=networks[0].inputs[0].dtype, name='x')
  outputs = [network(inputs) for network in networks]
  logits = tf.keras.layers.Lambda(lambda ls: tf.stack(ls, axis=1), name='stack_networks')(
      [output[LOGITS][:, 0] for output in outputs])
  features = outputs[0][FEATURES]
  if stack_features:
    features = tf.keras.layers.Lambda(lambda fs: tf.stack(fs, axis=1), name='stack_features')(
        [output[FEATURES] for output in outputs])
  return tf.keras.Model(inputs=inputs, outputs={FEATURES: features, LOGITS: logits}, name=name)


def tensor_owners(model: tf.keras.Model, layer_prefix: str, count: int) -> list[int]:
  """For each trainable tensor of `model` (in `ModelWeights.trainable` order), the index k of the layer
  `<layer_prefix><k + 1>` (k < count) it belongs to, or -1 for a tensor of none (a shared extractor)."""
  owner = {}
  for k in range(count):
    for variable in model.get_layer(f'{layer_prefix}{k + 1}').trainable_variables:
      owner[variable.ref()] = k
  return [owner.get(variable.ref(), -1) for variable in model.trainable_variables]


def average_branch_logits(logits: tf.Tensor) -> tf.Tensor:
  """The Vanilla prediction: the mean over the branch axis of logits [B, K, ...] -> [B, ...]."""
  return tf.reduce_mean(logits, axis=1)


def branch_parameter_count(model: tf.keras.Model) -> int:
  """Parameters of one branch (its Dense layer), or of one network of a `build_multi_network_model`."""
  names = {layer.name for layer in model.layers}
  part = model.get_layer('network_1' if 'network_1' in names else 'branch_1')
  return int(sum(tf.size(w).numpy() for w in part.weights))


def parameter_counts(model: tf.keras.Model) -> dict[str, float]:
  """Total parameters, parameters of one branch, and the extra branch's overhead in percent.

  The overhead is what one extra branch adds to the single-branch network (the communication overhead the paper
  reports as 0.7%, 0.5% and 1.6% for EMNIST, CIFAR and Stack Overflow). A network without branches (the FedEvolve
  paper's towers) has the total only.
  """
  total = int(sum(tf.size(w).numpy() for w in model.weights))
  if not {'branch_1', 'network_1'} & {layer.name for layer in model.layers}:
    return {'total': total}
  branch = branch_parameter_count(model)
  num_branches = int(model.output_shape[LOGITS][1])
  single_branch_total = total - (num_branches - 1) * branch
  return {
      'total': total,
      'branch': branch,
      'branch_overhead_percent': 100.0 * branch / single_branch_total,
  }
