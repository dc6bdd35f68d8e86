"""Every registered method is given its server step, as TFF's builders are given `server_optimizer_fn` and
`model_aggregator`, and honours it or refuses it in one line, never ignores it.

Each method is built by run_experiment's `main` in this process on the first scenario it does not refuse (stopped
before its first round, `in_process_run.build_on_first_scenario`), and:
- server optimizer: with every `--server_optimizer` but the method's default (its `DEFAULTS`', else adam: the one every
  other test runs it with) and a learning rate and epsilon no default has, the built process's finalizer state is
  that optimizer's initial state, value for value;
- model aggregator, for `--aggregator` dp and secure:
  - a method that declares `own_aggregation` (`algorithms.core.method.Sends`) is refused in one line, and its round,
    built with the resolve check bypassed, really does aggregate its updates its own way (TFF's aggregator cannot be
    put in);
  - a method that declares statistics of its own (`method_sums`) is refused in one line without
    `--accept_unprotected_sums`;
  - otherwise the built round aggregates the model update with the chosen aggregator (DP: the aggregator's state is
    TFF's DP query's; secure: the round holds `federated_secure_sum_bitwidth`), and the named fields of everything its
    round aggregates, beside the client state on its way to the store, are exactly the training metrics and what the
    method declares, so a new method cannot send something unprotected without declaring it, nor skip this test (the
    parameters are the registry's).
"""

from unittest import mock

from absl.testing import absltest
from absl.testing import parameterized
import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from algorithms import registry as algorithms
from algorithms.core import aggregation_only
from algorithms.core import learning_process
from algorithms.core import method
from experiment.core import assembly
from periodic_shift import scenarios
from tests import in_process_run

_PRIVATE = ('dp', 'secure')
# The fields of the private aggregator's own client messages: the DP query's sample state (the clipped update's sum and
# the adaptive clip's below-estimate count, both noised by the query), none for the secure aggregator.
_AGGREGATOR_FIELDS = {'dp': {'sum_state', 'quantile_estimator_state'}, 'secure': set()}
_OWN_WAY = 'aggregates its updates its own way'
_RATE, _EPSILON = 0.0123, 0.0456  # No default server learning rate or epsilon.


def _private_flags(aggregator: str) -> list[str]:
  return [f'--aggregator={aggregator}'] + (['--dp_noise_multiplier=0.7'] if aggregator == 'dp' else [])


def _one_error_line(test, status: int, stderr: str) -> str:
  test.assertEqual(status, 2, stderr[-2000:])
  errors = [line for line in stderr.strip().splitlines() if line.startswith('run_experiment: error: ')]
  test.assertLen(errors, 1, stderr[-2000:])
  test.assertEqual(errors[0], stderr.strip().splitlines()[-1])
  return errors[0]


def _refusal(test, name: str, *extra: str) -> str:
  """The one error line of `name`, which every scenario's run refuses with `extra` flags (the first scenario's)."""
  scenario = scenarios.SCENARIOS[0]
  status, stderr, built = in_process_run.build_only([*in_process_run.smoke_args(scenario), f'--algorithm={name}',
                                                     f'--root_output_dir={test.create_tempdir().full_path}', *extra])
  test.assertIsNone(built)
  return _one_error_line(test, status, stderr)


class ServerStepContractTest(parameterized.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    in_process_run.start_worker()

  def test_every_method_module_declares_what_it_sends(self):
    for name, entry in algorithms.METHODS.items():
      self.assertIsInstance(entry.module.SENDS, method.Sends, name)  # AttributeError: a method that declares nothing.

  @parameterized.parameters(*[(name, optimizer) for name in algorithms.ALGORITHMS
                               for optimizer in learning_process.SERVER_OPTIMIZERS
                               if optimizer != algorithms.defaults(name).get('server_optimizer', 'adam')])
  def test_the_method_applies_the_server_optimizer_it_is_given(self, name, optimizer):
    _, built = in_process_run.build_on_first_scenario(
        name, f'--server_optimizer={optimizer}', f'--server_learning_rate={_RATE}', f'--server_adam_epsilon={_EPSILON}',
        *(['--server_momentum=0.5'] if optimizer == 'sgdm' else []))
    state = built.process.initialize()
    weights_type = built.process.state_type.member.global_model_weights
    expected = tff.learning.templates.build_apply_optimizer_finalizer(
        learning_process.build_server_optimizer(optimizer, _RATE, _EPSILON, 0.5), weights_type).initialize()
    self.assertEqual(tf.nest.map_structure(lambda _: None, state.finalizer),
                     tf.nest.map_structure(lambda _: None, expected), f'{name} with {optimizer}')
    tf.nest.map_structure(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-6), state.finalizer, expected)

  @parameterized.parameters(*[(name, aggregator) for name in algorithms.ALGORITHMS for aggregator in _PRIVATE])
  def test_the_method_honours_refuses_or_asks_for_acknowledgement(self, name, aggregator):
    declared = algorithms.METHODS[name].module.SENDS
    if declared.own_aggregation:
      self.assertIn(_OWN_WAY, _refusal(self, name, *_private_flags(aggregator)))
      with mock.patch.object(assembly, '_check_private_aggregation', lambda *args: None):
        line = _refusal(self, name, *_private_flags(aggregator))
      self.assertIn('--aggregator replaces the mean of one model update', line)
      return
    if declared.method_sums:
      line = _refusal(self, name, *_private_flags(aggregator))
      self.assertIn(f'also aggregates {", ".join(declared.method_sums)} in the clear', line)
      self.assertIn('--accept_unprotected_sums', line)
    _, algorithm = in_process_run.build_on_first_scenario(name, *_private_flags(aggregator),
                                                          '--accept_unprotected_sums')
    next_computation = algorithm.process.next
    if aggregator == 'dp':
      self.assertIn('noise_multiplier', str(algorithm.process.state_type.member.aggregator))
    else:
      self.assertIn('federated_secure_sum_bitwidth', aggregation_only.clients_to_server_intrinsics(next_computation))
    messages = [message for message in aggregation_only.client_messages(next_computation)
                if 'client state' not in message.describe()]
    sent = {field for message in messages for field in message.fields}
    self.assertEqual(sent - set(method.TRAINING_METRICS) - _AGGREGATOR_FIELDS[aggregator],
                     set(declared.method_sums) | set(declared.simulation_only),
                     f'{name}: its round aggregates {sorted(sent)}')


if __name__ == '__main__':
  absltest.main()
