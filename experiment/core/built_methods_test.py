"""Built methods kept between runs: every input of a build is in its key, and a reused build trains and evaluates as a
fresh one, on the new run's test data."""

import dataclasses
import os
import tempfile

from absl.testing import absltest
from absl.testing import parameterized

from algorithms.core import evaluation
from algorithms.core import learning_process
from algorithms.core import method
from experiment.core import assembly
from experiment.core import built_methods
from tests import in_process_run


class _Changed:
  """A value equal to nothing else, for a field the key must see."""

  def __repr__(self):
    return f'changed-{id(self)}'


def _evaluator(held_out=(), mixed=()) -> evaluation.Evaluator:
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
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
                          evaluator=self.evaluator, method_config=('config',))

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


class ReuseTest(parameterized.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    in_process_run.start_worker()

  def _rows(self, args, name):
    root = tempfile.mkdtemp()
    status, stderr = in_process_run.run([*args, f'--root_output_dir={root}', f'--experiment_name={name}'])
    self.assertEqual(status, 0, stderr[-2000:])
    return [{key: value for key, value in row.items() if key != 'round_seconds'}
            for row in in_process_run.metrics_rows(os.path.join(root, name))]

  # Another share of unseen clients: other held-out test data under the same build; FedGMM fits its held-out
  # clients' weights, FedAvg+ tunes per client, FedTEM routes test batches.
  @parameterized.parameters('fedgmm', 'fedavg_plus', 'fedtem')
  def test_a_reused_build_matches_a_fresh_one_on_the_new_runs_data(self, algorithm):
    base = [*in_process_run.smoke_args('dirichlet_mixture'), f'--algorithm={algorithm}']
    built_methods.clear()
    self._rows(base, 'first')
    reused_before = built_methods.reused()
    second = [*base, '--unseen_fraction=0.5', '--total_rounds=3', '--rounds_per_eval=1', '--rounds_per_checkpoint=1']
    reused_rows = self._rows(second, 'second')
    self.assertEqual(built_methods.reused(), reused_before + 1)
    built_methods.clear()
    self.assertEqual(reused_rows, self._rows(second, 'fresh'))
    self.assertEqual(built_methods.reused(), reused_before + 1)

  def test_another_seed_builds_anew(self):
    base = [*in_process_run.smoke_args('periodic'), '--algorithm=vanilla']
    built_methods.clear()
    self._rows(base, 'first')
    reused_before = built_methods.reused()
    self._rows([*base, '--seed=1'], 'second')
    self.assertEqual(built_methods.reused(), reused_before)


if __name__ == '__main__':
  absltest.main()
