"""A run's test sets kept between evaluations (`Task.test_datasets`): the batches a kept test set gives on every pass
are those a fresh pipeline computes, and only transformed test sets within the memory bound are kept."""

from unittest import mock

import numpy as np
import tensorflow as tf

from periodic_shift import domains as domains_lib
from tasks import registry
from tasks import task as task_lib


def _batches(dataset) -> list[dict]:
  return [{key: value.numpy() for key, value in batch.items()} for batch in dataset]


def _kept(dataset: tf.data.Dataset) -> bool:
  """Whether the pipeline holds a cache op (its serialized graph's ops)."""
  graph = tf.compat.v1.GraphDef.FromString(tf.raw_ops.DatasetToGraphV2(input_dataset=dataset._variant_tensor).numpy())
  return any(node.op.startswith('CacheDataset') for node in graph.node)


class TestDatasetsTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.plain = registry.create('digits_written', seed=0)
    # Fog draws its field from each example's fingerprint; motion blur is a fixed filter.
    cls.corrupted = cls.plain.with_domains((
        domains_lib.Domain('clean', 0), domains_lib.Domain('fog', 0, corruption='fog', severity=4),
        domains_lib.Domain('blur', 0, corruption='motion_blur', severity=3)))

  def test_kept_batches_are_what_a_fresh_pipeline_computes_on_every_pass(self):
    kept = self.corrupted.test_datasets(batch_size=64)
    for mode, name in enumerate(self.corrupted.domain_names):
      self.assertTrue(_kept(kept[name]))
      fresh = _batches(self.corrupted.test_dataset(mode, 64))
      for _ in range(2):  # The first pass computes and keeps, the second reads what was kept.
        passed = _batches(kept[name])
        self.assertLen(passed, len(fresh))
        for got, expected in zip(passed, fresh):
          for key in expected:
            np.testing.assert_array_equal(got[key], expected[key])
    fog = np.concatenate([batch['x'] for batch in _batches(kept['fog'])])
    clean = np.concatenate([batch['x'] for batch in _batches(kept['clean'])])
    self.assertGreater(np.abs(fog - clean).mean(), 0.05)  # The kept fog set is corrupted.

  def test_only_transformed_test_sets_within_the_bound_are_kept(self):
    self.assertFalse(any(_kept(d) for d in self.plain.test_datasets(64).values()))  # Nothing to compute again.
    size = self.corrupted.transformed_test_bytes()
    self.assertEqual(size, 4 * 64 * 3 * self.corrupted.test_sizes[0])  # 8 x 8 inputs, three domains of one base.
    with mock.patch.object(task_lib, 'TEST_SET_MEMORY', size - 1):
      self.assertFalse(any(_kept(d) for d in self.corrupted.test_datasets(64).values()))
    with mock.patch.object(task_lib, 'TEST_SET_MEMORY', size):
      self.assertTrue(all(_kept(d) for d in self.corrupted.test_datasets(64).values()))


if __name__ == '__main__':
  tf.test.main()
