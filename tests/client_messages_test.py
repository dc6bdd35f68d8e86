"""What each method sends, read from its TFF round (`aggregation_only.client_messages`), against what its module
declares (`SENDS`, `algorithms.core.method.Sends`).

Every method is built by run_experiment's `main` in this process on the first scenario it does not refuse (the
synthetic task, the scenario's smoke settings), stopped before its first round; every intrinsic of its `process.next`
that moves client values to the server is read with the names of what a client contributes. The named fields of the
sums must be exactly the training metrics and the method's declared sums, those of the values the server receives per
client exactly its declared per-client values, and those of the client state on its way to the store exactly its
declared client state; the unnamed sums (the model update and its weights) hold at most the model's parameters. A
method that sends something it does not declare, or declares something it does not send, fails here, and the privacy
table (docs/privacy.md) is generated from the declarations (`experiment.privacy_table`).
"""

from absl.testing import absltest
from absl.testing import parameterized
import numpy as np

from algorithms import registry as algorithms
from algorithms.core import aggregation_only
from algorithms.core import client_state
from algorithms.core import method
from tests import in_process_run


def _parameters(algorithm: method.Algorithm) -> int:
  """The number of parameters of the global model of `algorithm`'s process (all networks of a pool)."""
  weights = algorithm.process.state_type.member.global_model_weights
  return sum(int(np.prod(t.shape)) for t in weights.trainable)


def _kind(message: aggregation_only.ClientMessage) -> str:
  if message.aggregate:
    return 'sums'
  return 'client_state' if message.fields[:1] == (client_state.POSITION,) else 'per_client'


class ClientMessagesTest(parameterized.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    in_process_run.start_worker()

  @parameterized.parameters(*algorithms.ALGORITHMS)
  def test_what_the_method_sends_is_what_it_declares(self, name):
    declared = algorithms.METHODS[name].module.SENDS
    _, built = in_process_run.build_on_first_scenario(name)
    messages = aggregation_only.client_messages(built.process.next)
    fields = {'sums': set(), 'per_client': set(), 'client_state': set()}
    for message in messages:
      fields[_kind(message)].update(message.fields)
      if message.aggregate and not message.fields:  # The model update or its weights.
        self.assertLessEqual(message.values, _parameters(built), message.describe())
    described = '\n'.join(message.describe() for message in messages)
    self.assertEqual(fields['sums'], set(method.TRAINING_METRICS) | set(declared.simulation_only)
                     | (set(declared.method_sums) - set(declared.per_client)), described)
    self.assertEqual(fields['per_client'], set(declared.per_client), described)
    self.assertEqual(fields['client_state'] - {client_state.POSITION}, set(declared.client_state), described)
    self.assertTrue(any(message.aggregate and not message.fields for message in messages), described)


if __name__ == '__main__':
  absltest.main()
