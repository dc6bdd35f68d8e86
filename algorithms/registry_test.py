"""Tests of the method registry's check of the method flags a user set and of its settings' sources."""

import dataclasses
import types

from absl.testing import absltest

from algorithms import registry
from algorithms.core import method


class CheckSetFlagsTest(absltest.TestCase):

  def test_a_setting_of_another_method_is_refused_naming_its_owner(self):
    with self.assertRaisesRegex(ValueError, r'^--fedevp_batching is a setting of fedevp; the method is '
                                r'vanilla_single\.$'):
      registry.check_set_flags('vanilla_single', {'fedevp_batching': 'packed'})

  def test_a_flag_two_methods_share_names_both(self):
    with self.assertRaisesRegex(ValueError, r'--prior is a setting of fedtem and fedtkm; the method is vanilla'):
      registry.check_set_flags('vanilla', {'prior': 'cosine'})

  def test_the_methods_own_settings_and_another_methods_at_their_defaults_pass(self):
    registry.check_set_flags('fedevp', {'fedevp_batching': 'packed', 'fedevp_distance': 'squared'})
    registry.check_set_flags('fedtem', {'prior': 'cosine'})
    # A grid that sweeps FedTKM's leak gives every method it compares the default, 0.
    registry.check_set_flags('vanilla', {'alpha_leak': 0.0, 'fedevp_batching': 'stage_sweep'})
    with self.assertRaisesRegex(ValueError, '--alpha_leak is a setting of fedtkm; the method is vanilla'):
      registry.check_set_flags('vanilla', {'alpha_leak': 0.2})


class SettingSourcesTest(absltest.TestCase):

  def test_every_setting_of_every_method_has_a_source_of_a_known_kind_with_its_reason(self):
    for name in registry.ALGORITHMS:
      module = registry.METHODS[name].module
      flags = set(method.settings(module.NAME, module.Config))
      sources = registry.setting_sources(name)
      self.assertEqual(set(sources), flags, name)
      for flag, source in sources.items():
        kind, _, why = source.partition(': ')
        self.assertIn(kind, registry.SOURCE_KINDS, f'{name} --{flag}')
        self.assertGreater(len(why.split()), 2, f'{name} --{flag}: a source says where or why')

  def test_the_departures_the_papers_were_checked_against_are_named(self):
    # The paper's reading would be 0 (Eq. 10, Eq. 12), Euclidean (FedEvolve, Section 3) and kept mixture weights
    # (Marfoq et al.): each default that is not is a named departure, in effect unless a flag moves it.
    self.assertEqual(set(registry.departures('fedtem', {})), {'statistics_decay'})
    self.assertEqual(set(registry.departures('fedtkm', {})), {'center_decay'})
    self.assertEqual(set(registry.departures('fedevolve', {})), {'fedevolve_distance'})
    self.assertEqual(set(registry.departures('fedem', {})), {'fedem_client_state'})
    self.assertEqual(registry.departures('fedtem', {'statistics_decay': 0.0}), {})
    self.assertEqual(registry.departures('fedevolve', {'fedevolve_distance': 'euclidean'}), {})
    self.assertEqual(registry.departures('vanilla', {}), {})

  def test_a_setting_without_a_source_or_a_source_of_no_setting_is_refused(self):
    @dataclasses.dataclass(frozen=True)
    class Config:
      decay: float = method.setting(0.7, 'a decay.')

    module = types.ModuleType('algorithms.methods.example')
    module.Config = Config
    with self.assertRaisesRegex(ValueError, r'^algorithms\.methods\.example: setting decay needs a source'):
      registry.check_setting_sources(module)
    module.SETTING_SOURCES = {'decay': 'paper:'}
    with self.assertRaisesRegex(ValueError, 'setting decay needs a source'):
      registry.check_setting_sources(module)
    module.SETTING_SOURCES = {'decay': 'the authors said so'}
    with self.assertRaisesRegex(ValueError, 'setting decay needs a source'):
      registry.check_setting_sources(module)
    module.SETTING_SOURCES = {'decay': 'departure: Eq. 10 is 0; 0 swaps the modes', 'rate': 'paper: Table 2'}
    with self.assertRaisesRegex(ValueError, 'SETTING_SOURCES names rate, which are not settings'):
      registry.check_setting_sources(module)
    module.SETTING_SOURCES = {'decay': 'departure: Eq. 10 is 0; 0 swaps the modes'}
    registry.check_setting_sources(module)


if __name__ == '__main__':
  absltest.main()
