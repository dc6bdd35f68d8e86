"""The data invariant every reported number rests on, end to end: no example a client trains on is in any test,
validation or unseen-client test split, and what the clients train on does not depend on TF's global seed.

Each case runs `run_experiment.main` in this process for a few rounds and records, as the run builds them, the
client datasets of every round (`Task.plan_dataset`), the held-out clients' raw examples (`Task._plan_examples`
called by `Task.held_out_dataset`) and the centralized test sets (`Task.test_dataset`'s raw data). An example's
identity is the bytes of its raw features and label; the few raw examples equal by chance (1-d inputs: under 0.1%
of the pool, checked) are left out. Checked: no trained example is in any held-out client's test split, an unseen
client's adaptation half, a validation split or a centralized test set, and no held-out client's personalization
data hold its test examples. The run is made twice, with two different TF global seeds set before it: the training
examples must be the same, round by round and client by client, in the same order, and so must the held-out ones.

Measured on the version before seeded splits (the TF global seed changed between cutting the held-out splits and
training): 2,074 of the 12,046 personalized test examples of `dirichlet_gaussian_mixture` were trained on.
"""

import collections
from unittest import mock

from absl.testing import absltest
from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from periodic_shift import dirichlet_mixture
from periodic_shift import scenarios
from tasks import task as task_lib
from tests import in_process_run


def _rows(batch: dict) -> list[bytes]:
  """The identity of every example of a batch of raw examples: the bytes of its fields, keys in sorted order."""
  fields = [np.ascontiguousarray(batch[key]) for key in sorted(batch)]
  size = len(fields[0])
  flat = np.concatenate([field.reshape(size, -1).view(np.uint8).reshape(size, -1) for field in fields], axis=1)
  return [row.tobytes() for row in flat]


def _element_identities(dataset: tf.data.Dataset) -> list[bytes]:
  """The identities of a dataset of raw elements, in order."""
  return [row for batch in dataset.batch(4096).as_numpy_iterator() for row in _rows(batch)]


def _raw_identities(dataset: tf.data.Dataset) -> list[bytes]:
  """The identities of a dataset of `(raw_element, domain)` examples, in order."""
  return [row for batch, _ in dataset.batch(4096).as_numpy_iterator() for row in _rows(batch)]


def _batched_identities(dataset: tf.data.Dataset) -> list[bytes]:
  """The identities of a client dataset of batches `(raw_batch, domain [B])`, in order."""
  return [row for batch, _ in dataset.as_numpy_iterator() for row in _rows(batch)]


class _Recorder:
  """Spies on the task and the scenario while `run_experiment.main` builds and runs (see the module docstring)."""

  def __init__(self):
    self.training = []  # Per plan_dataset call, in order: (plan, the dataset the training loop hands to the round).
    self.held_out = []  # (plan, raw dataset) of every plan `held_out_dataset` builds.
    self.test_sets = {}  # Base population -> the raw centralized test data its domains' `test_dataset`s batch.
    self.scenario = None
    self.task = None
    self._in_held_out = False

  def patches(self):
    recorder = self
    plan_dataset, held_out_dataset = task_lib.Task.plan_dataset, task_lib.Task.held_out_dataset
    plan_examples, test_dataset, build = task_lib.Task._plan_examples, task_lib.Task.test_dataset, scenarios.build

    def spy_plan_dataset(self, plan, client_spec, shuffle_seed):
      dataset = plan_dataset(self, plan, client_spec, shuffle_seed)
      recorder.training.append((plan, dataset))
      recorder.task = self
      return dataset

    def spy_held_out_dataset(self, plans, batch_size, shuffle_seed=None):
      recorder._in_held_out = True
      try:
        return held_out_dataset(self, plans, batch_size, shuffle_seed)
      finally:
        recorder._in_held_out = False

    def spy_plan_examples(self, plan, shuffle_seed):
      dataset = plan_examples(self, plan, shuffle_seed)
      if recorder._in_held_out:
        recorder.held_out.append((plan, dataset))
      return dataset

    def spy_test_dataset(self, mode, batch_size, keep=False):
      base = self.domain_list[mode].base
      recorder.test_sets[base] = self.test_data[base]
      return test_dataset(self, mode, batch_size, keep)

    def spy_build(*args, **kwargs):
      recorder.scenario = build(*args, **kwargs)
      return recorder.scenario

    return [mock.patch.object(task_lib.Task, 'plan_dataset', spy_plan_dataset),
            mock.patch.object(task_lib.Task, 'held_out_dataset', spy_held_out_dataset),
            mock.patch.object(task_lib.Task, '_plan_examples', spy_plan_examples),
            mock.patch.object(task_lib.Task, 'test_dataset', spy_test_dataset),
            mock.patch.object(scenarios, 'build', spy_build)]


_ROUNDS = 3
_DIRICHLET = ['--scenario=dirichlet_mixture', '--unseen_fraction=0.2', '--clients_per_round=8']
_CASES = (
    ('dirichlet_gaussian_mixture', 'gaussian_mixture', [*_DIRICHLET, '--num_clients=20']),
    ('dirichlet_gaussian_toy_1d', 'gaussian_toy_1d', _DIRICHLET),
    ('dirichlet_synthetic', 'synthetic', [*_DIRICHLET, '--num_clients=40']),
    ('dirichlet_digits', 'digits', _DIRICHLET),
    ('evolving_synthetic', 'synthetic', ['--scenario=evolving_domains', '--num_domains=3', '--num_clients=6',
                                         '--clients_per_round=3', '--dirichlet_alpha=1']),
    ('evolving_digits', 'digits', ['--scenario=evolving_domains', '--num_domains=3', '--num_clients=4',
                                   '--clients_per_round=2']),
    ('mixture_drift_synthetic', 'synthetic', ['--scenario=mixture_drift', '--num_cycles=1', '--num_clients=20',
                                              '--clients_per_round=5']),
    ('windowed_digits', 'digits', ['--scenario=windowed', '--window_rounds=1', '--clients_per_round=5',
                                   '--label_skew_alpha=1']),
    ('periodic_digits', 'digits', ['--clients_per_round=5']),
)


class DataInvariantTest(parameterized.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    in_process_run.start_worker()

  def _run(self, task: str, args: list[str], global_seed: int) -> _Recorder:
    """A short vanilla run with TF's global seed set to `global_seed` first; what it built."""
    recorder = _Recorder()
    root = self.create_tempdir().full_path
    tf.random.set_seed(global_seed)
    patches = recorder.patches()
    for patch in patches:
      patch.start()
    try:
      status, stderr = in_process_run.run([
          f'--task={task}', '--algorithm=vanilla', '--seed=3', f'--total_rounds={_ROUNDS}',
          f'--rounds_per_eval={_ROUNDS}', '--rounds_per_checkpoint=100', '--eval_batch_size=64',
          '--max_elements_per_client=100000', f'--root_output_dir={root}', '--experiment_name=run', *args])
    finally:
      for patch in patches:
        patch.stop()
    self.assertEqual(status, 0, stderr[-3000:])
    return recorder

  @parameterized.named_parameters(*_CASES)
  def test_no_trained_example_is_held_out_and_training_ignores_the_global_seed(self, task, args):
    first = self._run(task, args, global_seed=11)
    training = [_batched_identities(dataset) for _, dataset in first.training]
    self.assertLen(training, _ROUNDS * len(first.scenario.round_plan(1).clients))
    trained = set().union(*training)
    self.assertNotEmpty(trained)

    # Equal bytes mean the same example, except for the few raw examples of the test sets and of the source clients
    # the run drew from that are equal by chance (1-d inputs): those are left out of the checks.
    sources = {(first.task.domain_list[part.domain].base, part.source_id)
               for plan, _ in first.training + first.held_out for part in plan.parts}
    centralized_test = [identity for dataset in first.test_sets.values() for identity in _element_identities(dataset)]
    pool = list(centralized_test)
    for base, source_id in sorted(sources):
      pool.extend(_element_identities(first.task.train_data[base].create_tf_dataset_for_client(source_id)))
    ambiguous = {identity for identity, count in collections.Counter(pool).items() if count > 1}
    self.assertLess(len(ambiguous), 0.001 * len(pool))
    trained -= ambiguous

    built = collections.defaultdict(set)  # Plan -> the identities of the raw examples the run built for it.
    for plan, dataset in first.held_out:
      built[plan].update(_raw_identities(dataset))
    held_out = collections.defaultdict(set)
    for name, clients in first.scenario.evaluation_plans().items():
      test = set().union(*(built[plan] for plan in clients.test)) - ambiguous
      own = set().union(*(built[plan] for plan in clients.personalization)) - ambiguous
      self.assertNotEmpty(test)
      self.assertEqual(len(test & own), 0, f'{name}: a client personalizes on its own test examples')
      held_out['test'] |= test
      if name == 'unseen':
        held_out['unseen adaptation'] = own
    if isinstance(first.scenario, dirichlet_mixture.DirichletMixtureScenario):  # Not built by the run: built here.
      self.assertNotEmpty(held_out['unseen adaptation'])
      held_out['validation'] = set().union(*(_raw_identities(task_lib.Task._plan_examples(first.task, plan, None))
                                             for plan in first.scenario.split_plans('validation')))
    held_out['centralized test'] = set(centralized_test)
    self.assertNotEmpty(held_out['centralized test'])
    for split, examples in held_out.items():
      overlap = trained & examples
      self.assertEqual(len(overlap), 0, f'{len(overlap)} of the {len(examples)} examples of the {split} split were '
                       'trained on')

    second = self._run(task, args, global_seed=12345)
    self.assertEqual([_batched_identities(dataset) for _, dataset in second.training], training)
    self.assertEqual([_raw_identities(dataset) for _, dataset in second.held_out],
                     [_raw_identities(dataset) for _, dataset in first.held_out])


if __name__ == '__main__':
  absltest.main()
