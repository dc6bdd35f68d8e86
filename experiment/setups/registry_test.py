"""Every registered setup puts the methods it lists on one footing, and a setup the contract does not allow is
refused when it loads, in one line."""

import dataclasses
import tempfile
import types
from unittest import mock

from absl import flags
from absl.testing import absltest

from experiment.core import assembly
from experiment.setups import registry
from experiment.setups import setup
import run_experiment

_OWN = ('num_branches', 'seed')  # A method's own parameter, and the run's seed: not a setup's.


def _resolved(root: str, *args: str) -> assembly.Resolved:
  flag_values = flags.FlagValues()
  run_experiment.define_flags(flag_values)
  flag_values(['run_experiment', f'--root_output_dir={root}', *args])
  return assembly.resolve(run_experiment.experiment_config(flag_values))


def _footing(resolved: assembly.Resolved) -> dict:
  """Each training setting but a method's own: (value, source)."""
  return {field.name: (getattr(resolved.training, field.name), resolved.sources.get(field.name))
          for field in dataclasses.fields(resolved.training) if field.name not in _OWN}


class SetupsTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.root = tempfile.mkdtemp()

  def test_every_method_of_a_setup_gets_its_values_from_it_and_the_same_footing(self):
    for name, declared in registry.SETUPS.items():
      footings = {}
      for algorithm in declared.methods:
        resolved = _resolved(self.root, f'--setup={name}', f'--algorithm={algorithm}')
        for flag, value in declared.flags.items():
          recorded = resolved.record[flag]
          self.assertEqual(recorded, list(value.value) if isinstance(value.value, tuple) else value.value,
                           (name, algorithm, flag))
          self.assertEqual(resolved.sources[flag], f'setup {name}: {value.source}', (name, algorithm, flag))
        self.assertTrue(assembly.resolution_lines(resolved)[0].startswith(f'Setup {name} ('))
        footings[algorithm] = _footing(resolved)
      first = declared.methods[0]
      for algorithm, footing in footings.items():
        self.assertEqual(footing, footings[first], f'setup {name}: {algorithm} and {first} differ')

  def test_what_a_setup_leaves_out_comes_from_no_methods_paper(self):
    cited = setup.paper('Section 1')
    minimal = setup.Setup('minimal', 'A paper', 'an experiment', {'task': setup.Value('digits_written', cited),
                                                                  'scenario': setup.Value('windowed', cited)},
                          ('shiftex', 'vanilla_single'))
    with mock.patch.dict(registry.SETUPS, minimal=minimal):
      shiftex, fedavg = (_resolved(self.root, '--setup=minimal', f'--algorithm={name}') for name in minimal.methods)
    self.assertEqual(_footing(shiftex), _footing(fedavg))
    self.assertEqual(shiftex.sources['server_optimizer'], assembly.SUITE)  # Not ShiftEx's averaging.

  def test_a_methods_own_pool_size_is_its_own_under_a_setup_too(self):
    shiftex = _resolved(self.root, '--setup=shiftex_fashion_mnist', '--algorithm=shiftex')
    self.assertEqual((shiftex.hparams.num_branches, shiftex.sources['num_branches']), (7, assembly.METHOD))
    fedprox = _resolved(self.root, '--setup=shiftex_fashion_mnist', '--algorithm=fedprox')
    self.assertEqual((fedprox.hparams.num_branches, fedprox.sources['num_branches']), (2, assembly.SUITE))
    smaller = _resolved(self.root, '--setup=shiftex_fashion_mnist', '--algorithm=shiftex', '--num_branches=5')
    self.assertEqual((smaller.hparams.num_branches, smaller.sources['num_branches']), (5, assembly.FLAG))

  def test_an_explicit_flag_wins_and_is_credited_to_the_flag(self):
    resolved = _resolved(self.root, '--setup=shiftex_digits_windowed', '--algorithm=shiftex', '--client_epochs=2')
    self.assertEqual((resolved.training.client_epochs, resolved.sources['client_epochs']), (2, assembly.FLAG))
    self.assertEqual(resolved.training.server_optimizer, 'sgd')

  def test_without_a_setup_methods_keep_their_papers_footings_and_the_run_says_so(self):
    flags_ = ('--task=digits_written', '--scenario=windowed')
    shiftex = _resolved(self.root, *flags_, '--algorithm=shiftex')
    fedavg = _resolved(self.root, *flags_, '--algorithm=vanilla_single')
    self.assertEqual((shiftex.training.server_optimizer, fedavg.training.server_optimizer), ('sgd', 'adam'))
    self.assertStartsWith(assembly.resolution_lines(fedavg)[0], 'No --setup: vanilla_single runs on its own paper')

  def test_an_empty_setup_is_no_setup(self):
    flags_ = ('--task=digits_written', '--scenario=windowed', '--algorithm=shiftex')
    empty, none = _resolved(self.root, '--setup=', *flags_), _resolved(self.root, *flags_)
    self.assertIsNone(empty.config.setup.declared)
    self.assertEqual((empty.record, empty.sources), (none.record, none.sources))
    self.assertEqual(assembly.resolution_lines(empty), assembly.resolution_lines(none))

  def test_an_unknown_setup_is_refused_in_one_line(self):
    with self.assertRaisesRegex(ValueError, r'^--setup must be one of diurnal_emnist, .*; got \'nope\'\.$'):
      registry.get('nope')

  def test_a_setup_outside_the_contract_is_refused_when_it_loads(self):
    base = registry.SETUPS['shiftex_digits_windowed']
    cited = setup.paper('Section 1')
    broken = {
        'an unknown flag': ({'no_such_flag': setup.Value(1, cited)}, (), r'--no_such_flag is not a flag the methods'),
        'a method\'s own flag': ({'fedprox_mu': setup.Value(0.1, cited)}, (), r'--fedprox_mu is not a flag the'),
        'a value of another type': ({'client_epochs': setup.Value('five', cited)}, (), r'--client_epochs takes a int'),
        'an unregistered method': ({}, ('fedsomething',), r'methods fedsomething are not registered'),
    }
    for what, (more, methods, message) in broken.items():
      declared = dataclasses.replace(base, flags={**base.flags, **more}, methods=base.methods + methods)
      module = types.SimpleNamespace(__name__='broken_setups', SETUPS=(declared,))
      with self.assertRaisesRegex(ValueError, rf'^broken_setups: setup shiftex_digits_windowed: {message}', msg=what):
        registry._load([module])
    twice = types.SimpleNamespace(__name__='twice', SETUPS=(base, base))
    with self.assertRaisesRegex(ValueError, r'^twice: setup shiftex_digits_windowed is declared twice\.$'):
      registry._load([twice])

  def test_a_value_without_its_source_or_a_setup_without_its_data_cannot_be_declared(self):
    with self.assertRaisesRegex(ValueError, r'source is paper\(\.\.\.\), suite_choice\(\.\.\.\)'):
      setup.Value(1, 'because')
    with self.assertRaisesRegex(ValueError, 'must be finite'):
      setup.Value(float('nan'), setup.paper('Table 2'))
    with self.assertRaisesRegex(ValueError, 'names its task and its scenario'):
      setup.Setup('s', 'A paper', 'an experiment', {'task': setup.Value('digits', setup.paper('x'))}, ('vanilla',))
    with self.assertRaisesRegex(ValueError, 'num_branches, seed are not shared'):
      setup.Setup('s', 'A paper', 'an experiment', {
          'task': setup.Value('digits', setup.paper('x')), 'scenario': setup.Value('periodic', setup.paper('x')),
          'seed': setup.Value(1, setup.paper('x')), 'num_branches': setup.Value(2, setup.paper('x'))}, ('vanilla',))


if __name__ == '__main__':
  absltest.main()
