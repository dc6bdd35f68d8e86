"""No method decides with test labels unless `--oracle_test_labels` says so.

Every method that chooses a branch, component, cluster or model per test batch runs six rounds of
`run_experiment.main` in this process; at its evaluations the same weights are evaluated a second time on the same
test batches with every label y replaced by C - 1 - y (`Evaluator.evaluate` is wrapped). The routing counts (test
domain x branch, the record of every decision) must be identical, and the accuracy must move (the changed labels did
reach the evaluation). With `--oracle_test_labels`, FedEM's and CFL's decisions must move: the check sees a decision
that reads labels. FedDrift's label-reading fallback needs a domain no client has held while it has several models,
which a short run does not reach; it is checked on constructed outputs in feddrift_test.
"""

from unittest import mock

from absl.testing import absltest
from absl.testing import parameterized
import numpy as np

from algorithms.core import evaluation
from tasks import synthetic
from tests import in_process_run

_RUN = ['--task=synthetic', '--total_rounds=6', '--rounds_per_eval=3', '--clients_per_round=4', '--period=8',
        '--eval_batch_size=64', '--client_batch_size=32', '--max_elements_per_client=256']
# Methods that decide per test batch, with settings that make them decide between more than one model in six rounds.
_CASES = (
    ('fedem', ['--algorithm=fedem']),
    ('cfl', ['--algorithm=cfl', '--cfl_warmup_rounds=0', '--cfl_eps1=1e9', '--cfl_eps2=0']),
    ('feddrift', ['--algorithm=feddrift']),  # Its label-free fallback alone: tests/feddrift_test.py.
    ('min_loss', ['--algorithm=min_loss']),
    ('scsgd', ['--algorithm=scsgd']),
    ('fedtem', ['--algorithm=fedtem']),
    ('fedtkm', ['--algorithm=fedtkm']),
    ('tshot_kmeans', ['--algorithm=tshot_kmeans']),
    ('pfedem', ['--algorithm=pfedem']),
    ('shiftex', ['--algorithm=shiftex', '--window_rounds=1']),
)


def _mirrored_labels(batch: dict) -> dict:
  """Every label y replaced by C - 1 - y: none stays right, and a mode's labels become the other mode's (the
  synthetic task's day classes are 0..C/2 - 1, its night classes the rest)."""
  return dict(batch, y=synthetic.NUM_CLASSES - 1 - batch['y'])


class LabelFreeDecisionsTest(parameterized.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    in_process_run.start_worker()

  def _evaluations(self, args: list[str]) -> list[tuple[dict, dict]]:
    """(metrics, metrics with every test label mirrored) of every routed evaluation of a six-round run."""
    original = evaluation.Evaluator.evaluate
    pairs = []

    def evaluate_twice(evaluator, weights, objective, routing_shape=None, objective_args=(), **kwargs):
      metrics = original(evaluator, weights, objective, routing_shape, objective_args, **kwargs)
      if routing_shape is not None:
        data = evaluator._data  # pylint: disable=protected-access
        test_datasets = data.test_datasets
        data.test_datasets = {name: dataset.map(_mirrored_labels) for name, dataset in test_datasets.items()}
        try:
          pairs.append((dict(metrics), original(evaluator, weights, objective, routing_shape, objective_args,
                                                **kwargs)))
        finally:
          data.test_datasets = test_datasets
      return metrics

    root = self.create_tempdir().full_path
    with mock.patch.object(evaluation.Evaluator, 'evaluate', evaluate_twice):
      status, stderr = in_process_run.run([*_RUN, *args, f'--root_output_dir={root}', '--experiment_name=run'])
    self.assertEqual(status, 0, stderr[-3000:])
    self.assertNotEmpty(pairs)
    return pairs

  @parameterized.named_parameters(*_CASES)
  def test_routing_ignores_the_test_labels(self, args):
    for metrics, mirrored in self._evaluations(args):
      self.assertNotAlmostEqual(metrics['test_accuracy'], mirrored['test_accuracy'], places=3)
      np.testing.assert_array_equal(mirrored['test_routing'], metrics['test_routing'])

  @parameterized.named_parameters(*_CASES[:2])
  def test_oracle_routing_reads_the_test_labels(self, args):
    moved = [not np.array_equal(metrics['test_routing'], mirrored['test_routing'])
             for metrics, mirrored in self._evaluations([*args, '--oracle_test_labels'])]
    self.assertTrue(any(moved))


if __name__ == '__main__':
  absltest.main()
