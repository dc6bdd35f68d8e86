"""Tests that every registered task module honours the contract of `tasks.task`, and the registry's handling of
task settings (flags `--<task>_<setting>`)."""

import tempfile

from absl.testing import absltest

from periodic_shift import scenarios
from tasks import registry
from tasks import synthetic
from tasks import task as task_lib
from utils import settings as settings_lib

# Every training setting a task's defaults must fill (`experiment.core.assembly`'s task-defaulted settings but the
# optional element cap).
_REQUIRED_DEFAULTS = {'period', 'total_rounds', 'clients_per_round', 'client_batch_size', 'client_learning_rate',
                      'server_learning_rate', 'server_adam_epsilon'}
# Tasks that make their data themselves (in-process, or from scikit-learn's bundled digits); the others read files.
_GENERATED = [name for name in registry.TASKS if not registry.module(name).READS_FILES]


class TaskContractTest(absltest.TestCase):

  def test_every_module_declares_the_contract(self):
    self.assertLen(set(registry.TASKS), len(registry.MODULES))
    for module in registry.MODULES:
      with self.subTest(task=module.NAME):
        self.assertEmpty(_REQUIRED_DEFAULTS - set(module.DEFAULTS))
        self.assertEmpty(set(module.UNSUPPORTED) - set(scenarios.SCENARIOS))
        self.assertLess(len(module.UNSUPPORTED), len(scenarios.SCENARIOS))  # It runs some scenario.
        self.assertTrue(module.Settings.__dataclass_params__.frozen)
        self.assertIsInstance(module.READS_FILES, bool)
        self.assertIsInstance(module.RAW_INPUT_SPACE, bool)
        for field in settings_lib.declared(module.Settings):
          self.assertIn(settings_lib.flag_type(module.Settings, field), (bool, int, float, str, list))
        registry.validate(module.NAME)  # The defaults are valid.

  def test_generated_tasks_build_under_their_name(self):
    for name in sorted(_GENERATED):
      with self.subTest(task=name):
        task = registry.create(name, seed=1)
        self.assertIsInstance(task, task_lib.Task)
        self.assertEqual(task.name, name)
        self.assertNotEmpty(task.population_summary())

  def test_file_tasks_name_the_missing_directory_in_one_line(self):
    empty = tempfile.mkdtemp()
    for name in sorted(set(registry.TASKS) - set(_GENERATED)):
      with self.subTest(task=name):
        # A task whose files' directory is its own setting (`--fashion_mnist_dir`) is given the empty one there.
        settings = registry.module(name).Settings(dir=empty) if name == 'fashion_mnist' else None
        with self.assertRaisesRegex(FileNotFoundError, r'^[^\n]*--(cache_dir|tfds_data_dir|fashion_mnist_dir)[^\n]*$'):
          registry.create(name, settings, files=task_lib.DataFiles(empty, empty))

  def test_unsupported_scenario_is_refused_with_the_reason_and_the_alternatives(self):
    for name in registry.TASKS:
      unsupported = registry.module(name).UNSUPPORTED
      supported = [scenario for scenario in scenarios.SCENARIOS if scenario not in unsupported]
      for scenario in scenarios.SCENARIOS:
        with self.subTest(task=name, scenario=scenario):
          if scenario in supported:
            registry.validate_scenario(name, scenario)
            continue
          expected = (f'task {name} cannot run scenario {scenario}: {unsupported[scenario]} (it runs '
                      f'{", ".join(supported)}).')
          with self.assertRaises(ValueError) as raised:
            registry.validate_scenario(name, scenario)
          self.assertEqual(str(raised.exception), expected)
          self.assertNotIn('\n', expected)


class TaskSettingsTest(absltest.TestCase):

  def test_a_set_flag_becomes_the_task_setting(self):
    self.assertEqual(registry.settings_from('synthetic', {'synthetic_style_scale': 0.3}),
                     synthetic.Settings(style_scale=0.3))
    self.assertEqual(registry.settings_from('synthetic', {'synthetic_style_scale': None}), synthetic.Settings())

  def test_a_flag_of_another_task_is_refused(self):
    with self.assertRaisesRegex(ValueError, '^--synthetic_style_scale is a setting of task synthetic; the task is '
                                            'digits.$'):
      registry.settings_from('digits', {'synthetic_style_scale': 0.3})

  def test_bad_setting_is_refused_before_the_task_is_built(self):
    with self.assertRaisesRegex(ValueError, '^--synthetic_style_scale must be > 0; got 0.0.$'):
      registry.create('synthetic', synthetic.Settings(style_scale=0.0))

  def test_record_names_the_flags_with_their_defaults(self):
    self.assertEqual(registry.settings_record('synthetic', synthetic.Settings(style_scale=0.3)),
                     ({'synthetic_style_scale': 0.3}, {'synthetic_style_scale': None}))
    self.assertEqual(registry.settings_record('emnist', settings_lib.NoSettings()), ({}, {}))

  def test_unknown_task_is_one_line(self):
    with self.assertRaisesRegex(ValueError, "^--task must be one of synthetic, .*; got 'emnst'.$"):
      registry.validate('emnst')


if __name__ == '__main__':
  absltest.main()
