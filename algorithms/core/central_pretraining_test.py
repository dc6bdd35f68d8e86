"""Tests `algorithms.core.central_pretraining`: every training example of every domain once per pass, and a network
that learns from them."""

import collections

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from algorithms.core import central_pretraining
from models import multi_branch
from periodic_shift import domains
from tasks import task as task_lib


def _model(num_branches: int = 1) -> tf.keras.Model:
  extractor = tf.keras.Sequential([tf.keras.Input((2,)), tf.keras.layers.Dense(8, activation='relu')])
  return multi_branch.build_multi_branch_model(extractor, num_branches, 2)


def _task(num_examples: int, rng: np.random.Generator) -> task_lib.Task:
  """Two bases of two clients each; the label is the side of the line x_0 = x_1 (a logistic regression's task)."""
  train_data, sizes = [], []
  for base in range(2):
    clients = {}
    for client in range(2):
      x = rng.normal(size=(num_examples, 2)).astype(np.float32) + base
      clients[f'b{base}c{client}'] = collections.OrderedDict(x=x, y=(x[:, 0] > x[:, 1]).astype(np.int32))
    train_data.append(tff.simulation.datasets.TestClientData(clients))
    sizes.append({client_id: num_examples for client_id in clients})
  return task_lib.Task(name='line', train_data=train_data, client_sizes=sizes, test_data=[], test_sizes=[],
                       batch_fn=lambda batch: batch, model_fn=_model, num_classes=2, mode_names=('a', 'b'))


class CentralPretrainingTest(tf.test.TestCase):

  def test_a_pass_holds_every_training_example_of_every_domain_once_with_its_domain(self):
    task = _task(5, np.random.default_rng(0))
    # A third domain: base 0 again with its labels swapped (the domain transform reaches the batches).
    task = task.with_domains([domains.Domain('a', 0), domains.Domain('b', 1),
                              domains.Domain('a_swapped', 0, label_permutation=(1, 0))])
    seen = collections.Counter()
    for batch in central_pretraining.pooled_training_batches(task, batch_size=4, seed=1):
      for x, y, mode in zip(batch['x'].numpy(), batch['y'].numpy(), batch['mode'].numpy()):
        seen[(tuple(np.round(x, 4)), int(y), int(mode))] += 1
    expected = collections.Counter()
    for domain, (base, swapped) in enumerate([(0, False), (1, False), (0, True)]):
      for client_id in task.train_data[base].client_ids:
        examples = task.train_data[base].create_tf_dataset_for_client(client_id)
        for example in examples.as_numpy_iterator():
          expected[(tuple(np.round(example['x'], 4)), int(example['y']) ^ int(swapped), domain)] += 1
    self.assertEqual(sum(expected.values()), 30)
    self.assertEqual(seen, expected)  # x to 4 decimals: the domain transform's arithmetic moves the last bits.

  def test_the_pretrained_network_learns_and_repeats_under_its_seed(self):
    task = _task(200, np.random.default_rng(2))
    weights = central_pretraining.pretrained_weights(task, _model, epochs=20, batch_size=32, learning_rate=0.02,
                                                     seed=3)
    again = central_pretraining.pretrained_weights(task, _model, epochs=20, batch_size=32, learning_rate=0.02, seed=3)
    for value, repeated in zip(weights, again):
      self.assertAllEqual(value, repeated)
    model = _model()
    untrained = model.get_weights()
    model.set_weights(weights)
    x = np.random.default_rng(4).normal(size=(500, 2)).astype(np.float32)
    y = x[:, 0] > x[:, 1]
    predicted = multi_branch.average_branch_logits(model(x)[multi_branch.LOGITS]).numpy().argmax(-1)
    self.assertGreater(np.mean(predicted == y), 0.9)  # Chance is 0.5.
    model.set_weights(untrained)
    predicted = multi_branch.average_branch_logits(model(x)[multi_branch.LOGITS]).numpy().argmax(-1)
    self.assertLess(np.mean(predicted == y), 0.9)


if __name__ == '__main__':
  tf.test.main()
