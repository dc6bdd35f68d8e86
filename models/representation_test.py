"""FedEvolve's and FedEvp's networks: Table 8's parameter counts, the Circle MLP, what FedEvp personalizes."""

import numpy as np
import tensorflow as tf

from models import representation
from tasks import circle


def _count(model: tf.keras.Model) -> int:
  return int(sum(np.prod(variable.shape) for variable in model.trainable_variables))


class RepresentationTest(tf.test.TestCase):

  def test_conv_network_has_table_8s_parameter_counts(self):
    network = representation.conv_representation((28, 28, 1), 10)
    self.assertEqual(_count(network.tower()), 370_560)
    self.assertEqual(_count(network.head()), 8_832)
    self.assertEqual(_count(representation.two_tower_model(network)), 741_120)  # FedEvolve.
    self.assertEqual(_count(representation.tower_head_model(network)), 379_392)  # FedEvp.
    outputs = representation.two_tower_model(network)(tf.zeros([3, 28, 28, 1]))
    self.assertEqual(outputs[representation.PSI].shape, [3, 128])

  def test_tied_towers_start_equal_and_independent_ones_do_not(self):
    network = representation.mlp_representation(2, circle.NUM_CLASSES, circle.HIDDEN_UNITS)
    x = tf.random.stateless_normal([16, 2], seed=[0, 1])
    for tied in (True, False):
      with self.subTest(tied=tied):
        outputs = representation.two_tower_model(network, tied_init=tied)(x)
        difference = np.max(np.abs(outputs[representation.PSI] - outputs[representation.PHI]))
        if tied:
          self.assertEqual(difference, 0.0)
        else:
          self.assertGreater(difference, 1e-3)

  def test_circle_mlp_is_the_task_network_split_three_and_two(self):
    network = representation.mlp_representation(2, circle.NUM_CLASSES, circle.HIDDEN_UNITS)
    self.assertLen([l for l in network.tower().layers if l.trainable_weights], 3)
    self.assertLen([l for l in network.head().layers if l.trainable_weights], 2)
    self.assertEqual(_count(representation.tower_head_model(network)), _count(circle.create_model(1)))

  def test_personalization_tunes_the_head_and_the_towers_last_layer(self):
    network = representation.conv_representation((28, 28, 1), 10)
    model = representation.tower_head_model(network)
    mask = representation.personalized_mask(model, network.last_layers)
    tuned = [v.shape.as_list() for v, m in zip(model.trainable_variables, mask) if m]
    # Block 4: conv kernel and bias, the norm's scale and offset; the head's two kernels.
    self.assertEqual(tuned, [[3, 3, 128, 128], [128], [128], [128], [128, 64], [64, 10]])

  def test_no_tower_layer_leaves_the_head_alone(self):
    model = representation.tower_head_model(representation.conv_representation((28, 28, 1), 10))
    mask = representation.personalized_mask(model, 0)
    self.assertEqual([v.shape.as_list() for v, m in zip(model.trainable_variables, mask) if m], [[128, 64], [64, 10]])


if __name__ == '__main__':
  tf.test.main()
