"""Every registered method keeps the private-aggregation contract, under every aggregator that is not the mean.

For each method and `--aggregator` in dp, secure, the method is built by run_experiment's `main` in this process, on
the scenario it targets (stopped before its first round, as tests/client_messages_test.py builds it), and:
- a method that declares `SENT_IN_THE_CLEAR = None` is refused in one line, and its round, built with the resolve
  check bypassed, really does aggregate its updates its own way (TFF's aggregator cannot be put in);
- a method that declares statistics of its own (`method_sums`) is refused in one line without
  `--accept_unprotected_sums`;
- otherwise the built round aggregates the model update with the chosen aggregator (DP: the aggregator's state is
  TFF's DP query's; secure: the round holds `federated_secure_sum_bitwidth`), and the named fields of everything its
  round aggregates, beside the client state on its way to the store, are exactly the training metrics and what the
  method declares (`algorithms.core.method.SentInTheClear`), so a new method cannot send something unprotected
  without declaring it, nor skip this test (the parameters are the registry's).
"""

import tempfile
from unittest import mock

from absl.testing import absltest
from absl.testing import parameterized

from algorithms import registry as algorithms
from algorithms.core import aggregation_only
from algorithms.core import method
from experiment.core import assembly
from experiment.core import training_loop
from tests import client_messages_test
from tests import in_process_run

_PRIVATE = ('dp', 'secure')
# The fields of the private aggregator's own client messages: the DP query's sample state (the clipped update's sum and
# the adaptive clip's below-estimate count, both noised by the query), none for the secure aggregator.
_AGGREGATOR_FIELDS = {'dp': {'sum_state', 'quantile_estimator_state'}, 'secure': set()}
_OWN_WAY = 'aggregates its updates its own way'


class _Built(Exception):
  pass


def _build(name: str, aggregator: str, *extra: str):
  """(exit status, stderr, the built `Algorithm` or None) of `name` under `aggregator`."""
  built = {}

  def capture(algorithm, *args, **kwargs):
    del args, kwargs  # Unused.
    built['algorithm'] = algorithm
    raise _Built()

  scenario = client_messages_test._METHOD_SCENARIO[name]  # pylint: disable=protected-access
  args = ['--task=synthetic', f'--algorithm={name}', f'--scenario={scenario}',
          *client_messages_test._SCENARIOS[scenario],  # pylint: disable=protected-access
          '--clients_per_round=4', '--total_rounds=2', f'--aggregator={aggregator}',
          f'--root_output_dir={tempfile.mkdtemp()}', *extra]
  if aggregator == 'dp':
    args.append('--dp_noise_multiplier=0.7')
  with mock.patch.object(training_loop, 'run', capture):
    try:
      status, stderr = in_process_run.run(args)
    except _Built:
      return 0, '', built['algorithm']
  return status, stderr, None


def _one_error_line(test, status: int, stderr: str) -> str:
  test.assertEqual(status, 2, stderr[-2000:])
  errors = [line for line in stderr.strip().splitlines() if line.startswith('run_experiment: error: ')]
  test.assertLen(errors, 1, stderr[-2000:])
  test.assertEqual(errors[0], stderr.strip().splitlines()[-1])
  return errors[0]


class PrivateAggregationContractTest(parameterized.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    in_process_run.start_worker()

  def test_every_method_module_declares_what_it_sends_in_the_clear(self):
    for name, entry in algorithms.METHODS.items():
      declared = entry.module.SENT_IN_THE_CLEAR  # AttributeError: a method that declares nothing.
      self.assertTrue(declared is None or isinstance(declared, method.SentInTheClear), name)

  @parameterized.parameters(*[(name, aggregator) for name in algorithms.ALGORITHMS for aggregator in _PRIVATE])
  def test_the_method_honours_refuses_or_asks_for_acknowledgement(self, name, aggregator):
    declared = algorithms.METHODS[name].module.SENT_IN_THE_CLEAR
    if declared is None:
      self.assertIn(_OWN_WAY, _one_error_line(self, *_build(name, aggregator)[:2]))
      with mock.patch.object(assembly, '_check_private_aggregation', lambda *args: None):
        status, stderr, _ = _build(name, aggregator)
      self.assertIn(f'--aggregator={aggregator} replaces the mean of one model update',
                    _one_error_line(self, status, stderr))
      return
    if declared.method_sums:
      line = _one_error_line(self, *_build(name, aggregator)[:2])
      self.assertIn(f'also aggregates {", ".join(declared.method_sums)} in the clear', line)
      self.assertIn('--accept_unprotected_sums', line)
    status, stderr, algorithm = _build(name, aggregator, '--accept_unprotected_sums')
    self.assertIsNotNone(algorithm, f'{name} was not built: {status} {stderr[-2000:]}')
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
