"""Tests that the in-place serializers give exactly TFF's protos, and that a process runs with them installed."""

import collections

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff
from tensorflow_federated.python.core.impl.executors import value_serialization

from utils import fast_serialization


def _normalize_datasets(proto) -> None:
  """Re-serializes dataset graphs deterministically (TF's own graph bytes order map entries arbitrarily)."""
  kind = proto.WhichOneof('value')
  if kind == 'sequence':
    graph = tf.compat.v1.GraphDef.FromString(proto.sequence.serialized_graph_def)
    proto.sequence.serialized_graph_def = graph.SerializeToString(deterministic=True)
  elif kind == 'struct':
    for element in proto.struct.element:
      _normalize_datasets(element.value)
  elif kind == 'federated':
    for member in proto.federated.value:
      _normalize_datasets(member)


def _serialized(value, type_spec) -> bytes:
  proto, _ = value_serialization.serialize_value(value, type_spec)
  _normalize_datasets(proto)
  return proto.SerializeToString(deterministic=True)


class FastSerializationTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    # Each test starts from TFF's own serializers and leaves the process's as it found them (installed where the
    # test shares its process with others, tests/bundled_tests.py).
    self._found = (value_serialization._serialize_struct_type,  # pylint: disable=protected-access
                   value_serialization._serialize_federated_value)  # pylint: disable=protected-access
    fast_serialization.uninstall()

  def tearDown(self):
    (value_serialization._serialize_struct_type,  # pylint: disable=protected-access
     value_serialization._serialize_federated_value) = self._found  # pylint: disable=protected-access
    super().tearDown()

  def test_protos_are_identical_to_tffs(self):
    rng = np.random.default_rng(0)
    weights = collections.OrderedDict(
        trainable=[rng.normal(size=(3, 4)).astype(np.float32), rng.normal(size=[4]).astype(np.float32)],
        non_trainable=[], step=np.int64(7))
    weights_type = tff.types.to_type(collections.OrderedDict(
        trainable=[tff.TensorType(np.float32, [3, 4]), tff.TensorType(np.float32, [4])], non_trainable=[],
        step=tff.TensorType(np.int64)))
    dataset = tf.data.Dataset.from_tensor_slices(collections.OrderedDict(x=np.arange(6.0, dtype=np.float32)))
    data_type = tff.SequenceType(tff.types.tensorflow_to_type(dataset.element_spec))
    cases = [
        (weights, weights_type),
        ((weights, [dataset, dataset]), tff.StructType([tff.FederatedType(weights_type, tff.SERVER),
                                                        tff.FederatedType(data_type, tff.CLIENTS)])),
        ([np.float32(1.0), np.float32(2.0)], tff.FederatedType(np.float32, tff.CLIENTS)),
        ((), tff.StructType([])),
        (collections.OrderedDict(a=(), b=np.int32(3)), tff.StructType([('a', tff.StructType([])), ('b', np.int32)])),
    ]
    for value, type_spec in cases:
      expected = _serialized(value, type_spec)
      fast_serialization.install()
      actual = _serialized(value, type_spec)
      fast_serialization.uninstall()
      self.assertEqual(actual, expected, str(type_spec))

  def test_install_replaces_tffs_serializers(self):
    tff_struct_serializer = value_serialization._serialize_struct_type  # pylint: disable=protected-access
    fast_serialization.install()
    self.assertIsNot(value_serialization._serialize_struct_type, tff_struct_serializer)  # pylint: disable=protected-access
    fast_serialization.uninstall()
    self.assertIs(value_serialization._serialize_struct_type, tff_struct_serializer)  # pylint: disable=protected-access

  def test_wrong_length_is_rejected_like_tff(self):
    fast_serialization.install()
    with self.assertRaisesRegex(TypeError, 'Cannot serialize a struct value of 1 elements'):
      value_serialization.serialize_value([np.float32(1.0)], tff.StructType([np.float32, np.float32]))


if __name__ == '__main__':
  tf.test.main()
