"""Tests of the method registry's check of the method flags a user set."""

from absl.testing import absltest

from algorithms import registry


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


if __name__ == '__main__':
  absltest.main()
