"""Tests the assembler: a run built from an `ExperimentConfig` without flags equals the binary's run of the same
settings, records only the settings of the plug-ins it uses, and refuses bad values with one line before building."""

import dataclasses
import json
import os
from unittest import mock

from absl.testing import absltest
from tensorboard.plugins.hparams import plugin_data_pb2
import tensorflow as tf

from algorithms import registry as algorithms
from algorithms.core import method
from algorithms.methods import fedprox
from experiment.core import assembly
from periodic_shift import dirichlet_mixture
from periodic_shift import windowed
from tests import in_process_run

_SHARED_ARGS = ['--task=synthetic', '--scenario=dirichlet_mixture', '--num_clients=12', '--unseen_fraction=0.25',
                '--algorithm=fedprox', '--fedprox_mu=0.5', '--total_rounds=2', '--clients_per_round=3', '--period=2',
                '--rounds_per_eval=2', '--eval_batch_size=500', '--seed=1']


def _config(root: str, **groups) -> assembly.ExperimentConfig:
  """The config of `_SHARED_ARGS`, written to <root>/direct; `groups` replace whole groups."""
  settings = dict(
      task=assembly.TaskChoice(task='synthetic'),
      scenario=assembly.ScenarioChoice(scenario='dirichlet_mixture', settings=dirichlet_mixture.Settings(
          num_clients=12, unseen_fraction=0.25)),
      method=assembly.MethodChoice(algorithm='fedprox', config=fedprox.Config(mu=0.5)),
      training=assembly.TrainingConfig(total_rounds=2, clients_per_round=3, period=2, seed=1),
      evaluation=assembly.EvaluationConfig(rounds_per_eval=2, eval_batch_size=500),
      outputs=assembly.OutputConfig(root_output_dir=root, experiment_name='direct'))
  settings.update(groups)
  return assembly.ExperimentConfig(**settings)


def _tensorboard(directory: str) -> tuple[set[str], dict]:
  """(the scalar tags, the HParams plugin's values) of a run's TensorBoard event files."""
  tags, hparams = set(), {}
  for name in os.listdir(directory):
    for event in tf.compat.v1.train.summary_iterator(os.path.join(directory, name)):
      for value in event.summary.value:
        if value.metadata.plugin_data.plugin_name == 'hparams':
          data = plugin_data_pb2.HParamsPluginData.FromString(value.metadata.plugin_data.content)
          for key, held in data.session_start_info.hparams.items():
            hparams[key] = getattr(held, held.WhichOneof('kind'))
        else:
          tags.add(value.tag)
  return tags, hparams


class AssemblyTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    in_process_run.start_worker()

  def test_a_config_without_flags_runs_as_the_binary_and_records_its_plugins_settings(self):
    root = self.create_tempdir().full_path
    summary = assembly.run(_config(root))
    status, stderr = in_process_run.run([*_SHARED_ARGS, f'--root_output_dir={root}', '--experiment_name=flags'])
    self.assertEqual(status, 0, stderr[-2000:])
    direct, by_flags = (in_process_run.metrics_rows(os.path.join(root, name)) for name in ('direct', 'flags'))
    self.assertLen(direct, 2)
    for row in direct + by_flags:
      row.pop('round_seconds')
    self.assertEqual(direct, by_flags)
    self.assertEqual(summary['final_metrics']['round'], 2.0)
    with open(os.path.join(root, 'direct', 'config.json')) as f:
      record = json.load(f)
    with open(os.path.join(root, 'flags', 'config.json')) as f:
      self.assertEqual(json.load(f), record)
    self.assertEqual((record['unseen_fraction'], record['fedprox_mu'], record['clients_per_round']), (0.25, 0.5, 3))
    self.assertEqual(record['client_learning_rate'], 0.05)  # The synthetic task's default, resolved.
    for other_plugins_setting in ('num_domains', 'shift_fn', 'eta_max', 'fedgmm_learners'):
      self.assertNotIn(other_plugins_setting, record)
    for cadence in assembly.CADENCE:
      self.assertNotIn(cadence, record)
    tags, hparams = _tensorboard(os.path.join(root, 'direct', 'tensorboard'))
    self.assertContainsSubset({'train/train_loss', 'train/train_accuracy', 'run/round_seconds',
                               'held_out/personalized_accuracy', 'shift/domain_share_0'}, tags)
    self.assertEmpty({tag for tag in tags if '/' not in tag})
    self.assertEqual((hparams['fedprox_mu'], hparams['task'], hparams['num_clients']), (0.5, 'synthetic', 12.0))

  def test_bad_values_are_one_line_naming_the_flag_before_anything_is_built(self):
    root = self.create_tempdir().full_path
    cases = (
        (dict(training=assembly.TrainingConfig(total_rounds=0)), '--total_rounds must be > 0; got 0.'),
        (dict(scenario=assembly.ScenarioChoice(scenario='windowed', settings=windowed.Settings(
             windowing='sliding', window_overlap=-1))),
         '--window_overlap must be in'),
        (dict(method=assembly.MethodChoice(algorithm='fedprox', config=fedprox.Config(mu=0.0))),
         '--fedprox_mu must be > 0'),
        (dict(method=assembly.MethodChoice(algorithm='fedfoo')), 'algorithm must be one of'),
    )
    for groups, message in cases:
      with self.subTest(message=message):
        with self.assertRaisesRegex(assembly.ExperimentError, message) as raised:
          assembly.run(_config(root, **groups))
        self.assertEqual(raised.exception.status, 2)
        self.assertNotIn('\n', str(raised.exception))
    self.assertEmpty(os.listdir(root))  # Nothing written.

  def test_a_flag_beats_the_methods_default_which_beats_the_optimizers_and_the_tasks(self):
    root = self.create_tempdir().full_path
    resolve = lambda **training: assembly.resolve(_config(root, training=dataclasses.replace(
        _config(root).training, **training)))
    chosen = lambda training: (training.server_optimizer, training.server_learning_rate, training.server_momentum,
                               training.client_learning_rate, training.client_batch_size)
    task = (0.01, 0.05, 20)  # The synthetic task's server and client learning rates and batch size.
    with mock.patch.object(fedprox, 'DEFAULTS', method.Defaults()):
      self.assertEqual(chosen(resolve().training), ('adam', task[0], None, task[1], task[2]))
    paper = {'server_optimizer': 'sgdm', 'server_momentum': 0.5, 'client_learning_rate': 0.2}
    with mock.patch.object(fedprox, 'DEFAULTS', method.Defaults(paper, source='a paper')):
      # The method's optimizer brings its learning rate 1 (parameter averaging) unless the method gives one.
      self.assertEqual(chosen(resolve().training), ('sgdm', 1.0, 0.5, 0.2, task[2]))
      self.assertEqual(resolve().sources | {'seed': None, 'period': None}, dict(
          resolve().sources, server_optimizer=assembly.METHOD, server_momentum=assembly.METHOD,
          client_learning_rate=assembly.METHOD, server_learning_rate=assembly.OPTIMIZER,
          client_batch_size=assembly.TASK, client_epochs=assembly.SUITE, total_rounds=assembly.FLAG,
          seed=None, period=None))
      self.assertEqual(chosen(resolve(client_learning_rate=0.3, server_momentum=0.7).training),
                       ('sgdm', 1.0, 0.7, 0.3, task[2]))
      # Another optimizer by flag: the method's server-step defaults go with its own optimizer.
      self.assertEqual(chosen(resolve(server_optimizer='adam').training), ('adam', task[0], None, 0.2, task[2]))
    with mock.patch.object(fedprox, 'DEFAULTS', method.Defaults(dict(paper, server_learning_rate=0.5), 'a paper')):
      self.assertEqual(chosen(resolve().training), ('sgdm', 0.5, 0.5, 0.2, task[2]))

  def test_a_resumed_run_keeps_the_values_it_started_with_where_no_flag_sets_them(self):
    root = self.create_tempdir().full_path
    with mock.patch.object(fedprox, 'DEFAULTS', method.Defaults()), mock.patch('builtins.print') as printed:
      assembly.run(_config(root))
    self.assertIn(mock.call('Defaults of task synthetic: client_batch_size=20, client_learning_rate=0.05, '
                            'server_adam_epsilon=0.0001, server_learning_rate=0.01'), printed.call_args_list)
    with open(os.path.join(root, 'direct', 'config.json')) as f:
      recorded = json.load(f)
    self.assertEqual((recorded['server_optimizer'], recorded['value_sources']['server_optimizer'],
                      recorded['value_sources']['total_rounds']), ('adam', assembly.SUITE, assembly.FLAG))
    longer = _config(root, training=dataclasses.replace(_config(root).training, total_rounds=4))
    with mock.patch.object(fedprox, 'DEFAULTS', method.Defaults({'server_optimizer': 'sgd'}, 'a paper')):
      resumed = assembly.resolve(longer)  # The method's default changed since the run started: the record stands.
      self.assertEqual((resumed.training.server_optimizer, resumed.training.server_learning_rate,
                        resumed.sources['server_optimizer']), ('adam', 0.01, assembly.RECORDED))
      self.assertEqual(assembly.resolve(dataclasses.replace(longer, outputs=dataclasses.replace(
          longer.outputs, overwrite=True))).training.server_optimizer, 'sgd')
      with self.assertRaisesRegex(Exception, 'server_optimizer'):  # A flag that differs is another configuration.
        assembly.resolve(dataclasses.replace(longer, training=dataclasses.replace(
            longer.training, server_optimizer='sgd')))

  def test_the_paper_methods_run_by_name_average_parameters_and_diurnals_use_fedadam(self):
    root = self.create_tempdir().full_path
    for name in ('fedevp', 'fedevolve', 'fedgmm', 'pfedem', 'cfl', 'feddrift', 'shiftex', 'fedrep', 'vanilla',
                 'fedtem', 'fedtkm'):
      with self.subTest(method=name):
        config = assembly.ExperimentConfig(
            task=assembly.TaskChoice(task='synthetic'),
            scenario=assembly.ScenarioChoice(scenario='evolving_domains' if name.startswith('fedev') else 'periodic'),
            method=assembly.MethodChoice(algorithm=name),
            outputs=assembly.OutputConfig(root_output_dir=root))
        resolved = assembly.resolve(config)
        averaging = name not in ('vanilla', 'fedtem', 'fedtkm')
        self.assertEqual((resolved.training.server_optimizer, resolved.training.server_learning_rate),
                         ('sgd', 1.0) if averaging else ('adam', 0.01))
        self.assertEqual(resolved.sources['server_optimizer'], assembly.METHOD)
        self.assertTrue(algorithms.METHODS[name].module.DEFAULTS.source)

  def test_a_methods_own_settings_are_credited_to_their_source_and_its_departures_are_printed(self):
    root = self.create_tempdir().full_path
    resolve = lambda config: assembly.resolve(assembly.ExperimentConfig(
        task=assembly.TaskChoice(task='synthetic'), method=assembly.MethodChoice(algorithm='fedtem', config=config),
        outputs=assembly.OutputConfig(root_output_dir=root)))
    sources = algorithms.setting_sources('fedtem')
    at_defaults = resolve(None)
    self.assertEqual({flag: at_defaults.sources[flag] for flag in sources},
                     {flag: f'method fedtem: {source}' for flag, source in sources.items()})
    self.assertStartsWith(at_defaults.sources['statistics_decay'], 'method fedtem: departure: Eq. 10 replaces')
    departures = [line for line in assembly.resolution_lines(at_defaults) if line.startswith('Departure')]
    self.assertEqual(departures, ['Departure of fedtem from its paper: statistics_decay=0.7 (' +
                                  sources['statistics_decay'].split(': ', 1)[1] + ')'])
    paper = resolve(algorithms.METHODS['fedtem'].module.Config(statistics_decay=0.0))
    self.assertEqual(paper.sources['statistics_decay'], assembly.FLAG)
    self.assertFalse([line for line in assembly.resolution_lines(paper) if line.startswith('Departure')])

  def test_every_methods_defaults_are_training_settings(self):
    training_settings = set(assembly.settings_of(assembly.TrainingConfig()))
    for name in algorithms.ALGORITHMS:
      with self.subTest(method=name):
        self.assertContainsSubset(algorithms.defaults(name), training_settings)

  def test_a_built_experiment_trains_a_round_on_its_scenarios_clients(self):
    experiment = assembly.build(assembly.resolve(_config(self.create_tempdir().full_path)))
    datasets = experiment.round_datasets(1)
    self.assertLen(datasets, 3)  # --clients_per_round.
    process = experiment.algorithm.process
    output = process.next(process.initialize(), datasets)
    planned = sum(part.num_examples for client in experiment.scenario.round_plan(1).clients for part in client.parts)
    self.assertEqual(output.metrics['client_work']['train_examples'], planned)

if __name__ == '__main__':
  absltest.main()
