"""The key of a kept build holds every input of the build (tests/build_reuse_test.py runs reused builds against
fresh ones)."""

import dataclasses

from absl.testing import absltest
import tensorflow as tf

from algorithms.core import evaluation
from algorithms.core import learning_process
from algorithms.core import method
from experiment.core import assembly
from experiment.core import built_methods


class _Changed:
  """A value equal to nothing else, for a field the key must see."""

  def __repr__(self):
    return f'changed-{id(self)}'


def _evaluator(held_out=(), mixed=()) -> evaluation.Evaluator:
  model = tf.keras.Sequential([tf.keras.Input((2,)), tf.keras.layers.Dense(2)])
  data = evaluation.HeldOutData(tf.data.Dataset.range(1), tf.data.Dataset.range(1), 1)
  return evaluation.Evaluator(model, {'a': tf.data.Dataset.range(1)}, {name: data for name in held_out},
                              mixed_datasets={name: tf.data.Dataset.range(1) for name in mixed})


class KeyTest(absltest.TestCase):

  def setUp(self):
    super().setUp()
    self.training = assembly.TrainingConfig(period=4, total_rounds=8, clients_per_round=3, client_epochs=1,
                                            client_batch_size=20, client_learning_rate=0.1, server_optimizer='sgd',
                                            server_learning_rate=1.0, server_adam_epsilon=1e-3, server_momentum=0.0)
    self.hparams = method.Hyperparameters(0.1, learning_process.ServerStep.named('sgd', 1.0, 1e-3, 0.0, 'mean', 0.0, 3))
    self.evaluator = _evaluator()
    self.arguments = dict(name='fedtem', task_identity=('synthetic', 'settings', None, None, 'domains'),
                          training=self.training, element_spec='spec', hparams=self.hparams,
                          evaluator=self.evaluator, method_config=('config',), seeded=True)

  def _key(self, **changes):
    return built_methods.key(**dict(self.arguments, **changes))

  def test_every_training_setting_but_the_data_only_ones_is_in_the_key(self):
    base = self._key()
    for field in dataclasses.fields(self.training):
      changed = self._key(training=dataclasses.replace(self.training, **{field.name: _Changed()}))
      if field.name in built_methods.DATA_ONLY:
        self.assertEqual(changed, base, field.name)
      else:
        self.assertNotEqual(changed, base, field.name)

  def test_the_seed_is_in_the_key_of_a_seeded_build_only(self):
    for seeded in (True, False):
      base = self._key(seeded=seeded)
      other_seed = self._key(seeded=seeded, training=dataclasses.replace(self.training, seed=1),
                             hparams=dataclasses.replace(self.hparams, seed=1))
      self.assertEqual(other_seed != base, seeded)
      # Every other field still counts without the seed.
      self.assertNotEqual(self._key(seeded=seeded, training=dataclasses.replace(self.training, period=8)), base)

  def test_every_hyperparameter_is_in_the_key(self):
    base = self._key()
    for field in dataclasses.fields(self.hparams):
      if field.name != 'server_step':  # Made from training settings, which the key holds.
        self.assertNotEqual(self._key(hparams=dataclasses.replace(self.hparams, **{field.name: _Changed()})), base,
                            field.name)

  def test_every_other_input_is_in_the_key(self):
    base = self._key()
    for name in ('name', 'task_identity', 'element_spec', 'method_config'):
      self.assertNotEqual(self._key(**{name: _Changed()}), base, name)
    self.assertNotEqual(self._key(evaluator=_evaluator(held_out=('personalized',))), base)
    self.assertNotEqual(self._key(evaluator=_evaluator(mixed=('mixed_q0.5',))), base)
    self.assertNotEqual(self._key(evaluator=self.evaluator.held_out_only()), base)
    self.assertEqual(self._key(evaluator=_evaluator()), base)  # Other data of the same structure.


if __name__ == '__main__':
  absltest.main()
