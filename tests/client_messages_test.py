"""What each method sends, read from its TFF round (`aggregation_only.client_messages`), pinned.

Every method is built by run_experiment's `main` in this process on the scenario it targets (the synthetic task),
stopped before its first round; every intrinsic of its `process.next` that moves client values to the server is
listed with what a client contributes. The pinned table is docs/operations.md's ("Privacy: what each method sends"): a
change that makes a method send more, or send a per-client value where it sent an aggregate, fails here. On a
mismatch the message prints the method's rows as they are now.
"""

import tempfile
from unittest import mock

from absl.testing import absltest
from absl.testing import parameterized

from algorithms import registry as algorithms
from algorithms.core import aggregation_only
from experiment.core import training_loop
from tests import in_process_run

_SCENARIOS = {
    'periodic': [],
    'dirichlet_mixture': ['--num_clients=12', '--unseen_fraction=0.25'],
    'evolving_domains': ['--num_domains=4', '--num_clients=6'],
    'windowed': ['--window_rounds=2', '--num_clients=20'],
}
_METHOD_SCENARIO = dict(
    **{name: 'periodic' for name in ('vanilla', 'nds', 'vanilla_single', 'nds_single', 'scsgd', 'tshot_kmeans',
                                     'min_loss', 'fedem', 'fedtem', 'fedtkm', 'pfedem', 'cfl', 'fedprox',
                                     'fedavg_plus')},
    fedgmm='dirichlet_mixture', local='dirichlet_mixture', fedevolve='evolving_domains', fedevp='evolving_domains',
    fedrep='evolving_domains', shiftex='windowed', feddrift='windowed')

PINNED = {
    'cfl': [
        'federated_aggregate (client state): position, cluster, weight, update; 4 tensors, 6,903 values '
        'per client',
        'federated_sum (aggregate): loss_sum, num_correct, num_examples, num_predictions, '
        'nonfinite_clients, routing; 6 tensors, 9 values per client',
        'federated_sum (aggregate): unnamed; 12 tensors, 13,800 values per client',
        'federated_sum (aggregate): unnamed; 12 tensors, 12 values per client',
    ],
    'fedavg_plus': [
        'federated_sum (aggregate): loss_sum, num_correct, num_examples, num_predictions, '
        'nonfinite_clients; 5 tensors, 5 values per client',
        'federated_sum (aggregate): unnamed; 6 tensors, 6,900 values per client',
        'federated_sum (aggregate): unnamed; 1 tensors, 1 values per client',
    ],
    'feddrift': [
        'federated_aggregate (client state): position, drifted, best, model_id, ref_score, ref_window, '
        'checked_window, ref_domain; 8 tensors, 8 values per client',
        'federated_sum (aggregate): loss_sum, num_correct, num_examples, num_predictions, '
        'nonfinite_clients, routing, slot_examples, cluster_scores, true_shifts, detected_shifts, '
        'stable_checks, false_alarms; 12 tensors, 19 values per client',
        'federated_sum (aggregate): unnamed; 12 tensors, 13,800 values per client',
        'federated_sum (aggregate): unnamed; 12 tensors, 12 values per client',
    ],
    'fedem': [
        'federated_sum (aggregate): loss_sum, num_correct, num_examples, num_predictions, '
        'nonfinite_clients, routing; 6 tensors, 9 values per client',
        'federated_sum (aggregate): unnamed; 8 tensors, 7,560 values per client',
        'federated_sum (aggregate): unnamed; 1 tensors, 1 values per client',
    ],
    'fedevolve': [
        'federated_sum (aggregate): loss_sum, num_correct, num_examples, num_predictions, '
        'nonfinite_clients; 5 tensors, 5 values per client',
        'federated_sum (aggregate): unnamed; 8 tensors, 12,480 values per client',
        'federated_sum (aggregate): unnamed; 1 tensors, 1 values per client',
    ],
    'fedevp': [
        'federated_sum (aggregate): loss_sum, num_correct, num_examples, num_predictions, '
        'nonfinite_clients; 5 tensors, 5 values per client',
        'federated_sum (aggregate): unnamed; 6 tensors, 6,900 values per client',
        'federated_sum (aggregate): unnamed; 1 tensors, 1 values per client',
    ],
    'fedgmm': [
        'federated_sum (aggregate): gamma, mass, first, second, count; 5 tensors, 12,493 values per client',
        'federated_sum (aggregate): loss_sum, num_correct, num_examples, num_predictions, '
        'nonfinite_clients, routing, log_likelihood; 7 tensors, 12 values per client',
        'federated_aggregate (client state): position, pi; 2 tensors, 10 values per client',
        'federated_sum (aggregate): unnamed; 18 tensors, 20,700 values per client',
        'federated_sum (aggregate): unnamed; 18 tensors, 18 values per client',
    ],
    'fedprox': [
        'federated_sum (aggregate): loss_sum, num_correct, num_examples, num_predictions, '
        'nonfinite_clients; 5 tensors, 5 values per client',
        'federated_sum (aggregate): unnamed; 6 tensors, 6,900 values per client',
        'federated_sum (aggregate): unnamed; 1 tensors, 1 values per client',
    ],
    'fedrep': [
        'federated_aggregate (client state): position, initialized, head_0, head_1; 4 tensors, 662 values '
        'per client',
        'federated_sum (aggregate): loss_sum, num_correct, num_examples, num_predictions, '
        'nonfinite_clients; 5 tensors, 5 values per client',
        'federated_sum (aggregate): unnamed; 6 tensors, 6,900 values per client',
        'federated_sum (aggregate): unnamed; 1 tensors, 1 values per client',
    ],
    'fedtem': [
        'federated_aggregate (per-client): key, included; 2 tensors, 3 values per client',
        'federated_sum (aggregate): loss_sum, num_correct, num_examples, num_predictions, '
        'nonfinite_clients, routing, mode_one_count, pass_count; 8 tensors, 11 values per client',
        'federated_sum (aggregate): count, feature_sum, squared_deviation_sum, assignment; 4 tensors, '
        '134 values per client',
        'federated_sum (aggregate): unnamed; 8 tensors, 7,560 values per client',
        'federated_sum (aggregate): unnamed; 1 tensors, 1 values per client',
    ],
    'fedtkm': [
        'federated_sum (aggregate): assignment, weighted_count, weighted_feature_sum, participants; 4 '
        'tensors, 69 values per client',
        'federated_sum (aggregate): loss_sum, num_correct, num_examples, num_predictions, '
        'nonfinite_clients, routing, assignment, mode_one_count, pass_count, mode_log_ratio, '
        'mode_clients; 11 tensors, 19 values per client',
        'federated_sum (aggregate): unnamed; 8 tensors, 7,560 values per client',
        'federated_sum (aggregate): unnamed; 1 tensors, 1 values per client',
    ],
    'local': [
        'federated_sum (aggregate): loss_sum, num_correct, num_examples, num_predictions, '
        'nonfinite_clients; 5 tensors, 5 values per client',
        'federated_sum (aggregate): unnamed; 6 tensors, 6,900 values per client',
        'federated_sum (aggregate): unnamed; 1 tensors, 1 values per client',
    ],
    'min_loss': [
        'federated_sum (aggregate): loss_sum, num_correct, num_examples, num_predictions, '
        'nonfinite_clients, routing; 6 tensors, 9 values per client',
        'federated_sum (aggregate): unnamed; 8 tensors, 7,560 values per client',
        'federated_sum (aggregate): unnamed; 1 tensors, 1 values per client',
    ],
    'nds': [
        'federated_sum (aggregate): loss_sum, num_correct, num_examples, num_predictions, '
        'nonfinite_clients; 5 tensors, 5 values per client',
        'federated_sum (aggregate): unnamed; 8 tensors, 7,560 values per client',
        'federated_sum (aggregate): unnamed; 1 tensors, 1 values per client',
    ],
    'nds_single': [
        'federated_sum (aggregate): loss_sum, num_correct, num_examples, num_predictions, '
        'nonfinite_clients; 5 tensors, 5 values per client',
        'federated_sum (aggregate): unnamed; 6 tensors, 6,900 values per client',
        'federated_sum (aggregate): unnamed; 1 tensors, 1 values per client',
    ],
    'pfedem': [
        'federated_sum (aggregate): count, weighted_means, weighted_variances; 3 tensors, 130 values per '
        'client',
        'federated_sum (aggregate): loss_sum, num_correct, num_examples, num_predictions, '
        'nonfinite_clients, routing; 6 tensors, 9 values per client',
        'federated_sum (aggregate): unnamed; 12 tensors, 13,800 values per client',
        'federated_sum (aggregate): unnamed; 1 tensors, 1 values per client',
    ],
    'scsgd': [
        'federated_sum (aggregate): loss_sum, num_correct, num_examples, num_predictions, '
        'nonfinite_clients, routing; 6 tensors, 9 values per client',
        'federated_sum (aggregate): unnamed; 8 tensors, 7,560 values per client',
        'federated_sum (aggregate): unnamed; 1 tensors, 1 values per client',
    ],
    'shiftex': [
        'federated_aggregate (per-client): valid, census, shifted, profile, histogram, size; '
        '6 tensors, 56 values per client',
        'federated_sum (aggregate): loss_sum, num_correct, num_examples, num_predictions, '
        'nonfinite_clients, routing, slot_examples, label_counts, true_shifts, detected_shifts, '
        'stable_checks, false_alarms, detected_covariate, detected_label, false_alarms_covariate, '
        'false_alarms_label, moved_by_domain, found_by_domain; 18 tensors, 31 values per client',
        'federated_aggregate (client state): position, expert_id, pending, local_window, checked_window, '
        'ref_window, profile, ref_inputs, ref_weights, ref_counts, ref_domain; 11 tensors, 2,139 values '
        'per client',
        'federated_sum (aggregate): unnamed; 12 tensors, 13,800 values per client',
        'federated_sum (aggregate): unnamed; 12 tensors, 12 values per client',
    ],
    'tshot_kmeans': [
        'federated_aggregate (per-client): centers, sizes, included; 3 tensors, ? values per client',
        'federated_sum (aggregate): loss_sum, num_correct, num_examples, num_predictions, '
        'nonfinite_clients, routing; 6 tensors, 9 values per client',
        'federated_sum (aggregate): unnamed; 8 tensors, 7,560 values per client',
        'federated_sum (aggregate): unnamed; 1 tensors, 1 values per client',
    ],
    'vanilla': [
        'federated_sum (aggregate): loss_sum, num_correct, num_examples, num_predictions, '
        'nonfinite_clients; 5 tensors, 5 values per client',
        'federated_sum (aggregate): unnamed; 8 tensors, 7,560 values per client',
        'federated_sum (aggregate): unnamed; 1 tensors, 1 values per client',
    ],
    'vanilla_single': [
        'federated_sum (aggregate): loss_sum, num_correct, num_examples, num_predictions, '
        'nonfinite_clients; 5 tensors, 5 values per client',
        'federated_sum (aggregate): unnamed; 6 tensors, 6,900 values per client',
        'federated_sum (aggregate): unnamed; 1 tensors, 1 values per client',
    ],
}


class _Built(Exception):
  pass


def messages(method: str) -> list[str]:
  """`ClientMessage.describe()` of every client-to-server intrinsic of `method`'s round."""
  built = {}

  def capture(algorithm, *args, **kwargs):
    del args, kwargs  # Unused.
    built['algorithm'] = algorithm
    raise _Built()

  scenario = _METHOD_SCENARIO[method]
  with mock.patch.object(training_loop, 'run', capture):
    try:
      status, stderr = in_process_run.run(
          ['--task=synthetic', f'--algorithm={method}', f'--scenario={scenario}', *_SCENARIOS[scenario],
           '--clients_per_round=4', '--total_rounds=2', f'--root_output_dir={tempfile.mkdtemp()}'])
      raise AssertionError(f'{method} was not built: {status} {stderr[-2000:]}')
    except _Built:
      pass
  return [message.describe() for message in aggregation_only.client_messages(built['algorithm'].process.next)]


class ClientMessagesTest(parameterized.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    in_process_run.start_worker()

  def test_every_registered_method_is_pinned(self):
    # A new method is listed here with its scenario and pinned: the privacy table leaves no method out.
    self.assertEqual(set(_METHOD_SCENARIO), set(algorithms.ALGORITHMS))
    self.assertEqual(set(PINNED), set(algorithms.ALGORITHMS))

  @parameterized.parameters(*sorted(_METHOD_SCENARIO))
  def test_what_the_method_sends_is_pinned(self, method):
    actual = messages(method)
    self.assertEqual(actual, PINNED.get(method), f'\n{method!r}: {actual!r},')


if __name__ == '__main__':
  absltest.main()
