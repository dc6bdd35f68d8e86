"""Serializes TFF values for its C++ executor top-down, so large models do not pay one copy per nesting level.

TFF 0.87 (`tensorflow_federated/python/core/impl/executors/value_serialization.py`) serializes a struct by first
serializing each element into its own `executor_pb2.Value` and then building the parent from them; protobuf copies
every child message into its parent, so a tensor nested d structs deep is copied d times. A learning process's
state is nested 4-6 levels deep (call argument, federated value, LearningAlgorithmState, ModelWeights / optimizer
state, lists), and with a ResNet-18 (11M parameters, 135 MB of weights and Adam state) that copying cost ~6 s of
every ~11 s round on CIFAR (measured with py-spy: most of the Python time in `_serialize_struct_type`).

`install()` replaces TFF's struct and federated serializers with versions that add each element to its parent
in place and serialize only the leaves (tensors, datasets, computations) with TFF's own code, copying each leaf
once. The protos are identical to TFF's (`utils/fast_serialization_test.py` compares their bytes).
"""

from tensorflow_federated.proto.v0 import executor_pb2
from tensorflow_federated.python.common_libs import py_typecheck
from tensorflow_federated.python.common_libs import structure
from tensorflow_federated.python.core.impl.executors import value_serialization
from tensorflow_federated.python.core.impl.types import computation_types
from tensorflow_federated.python.core.impl.types import type_serialization

_TFF_SERIALIZERS = (value_serialization._serialize_struct_type,  # pylint: disable=protected-access
                    value_serialization._serialize_federated_value)  # pylint: disable=protected-access


def _leaf(value, type_spec) -> executor_pb2.Value:
  proto, _ = value_serialization.serialize_value(value, type_spec)
  return proto


def _fill(target: executor_pb2.Value, value, type_spec) -> None:
  """Serializes `value` of `type_spec` into `target`, building structs and federated values in place."""
  if isinstance(type_spec, computation_types.StructType):
    _fill_struct(target, value, type_spec)
  elif isinstance(type_spec, computation_types.FederatedType):
    _fill_federated(target, value, type_spec)
  else:
    target.CopyFrom(_leaf(value, type_spec))


def _fill_struct(target: executor_pb2.Value, value, type_spec: computation_types.StructType) -> None:
  value_structure = structure.from_container(value)
  if len(value_structure) != len(type_spec):
    raise TypeError(f'Cannot serialize a struct value of {len(value_structure)} elements to a struct type '
                    f'requiring {len(type_spec)} elements. Trying to serialize\n{value!r}\nto\n{type_spec}.')
  elements = target.struct.element
  if not len(type_spec):
    target.struct.SetInParent()
  for (name, element_type), (_, element_value) in zip(structure.iter_elements(type_spec),
                                                        structure.iter_elements(value_structure)):
    element = elements.add()
    if name:
      element.name = name
    _fill(element.value, element_value, element_type)


def _fill_federated(target: executor_pb2.Value, value, type_spec: computation_types.FederatedType) -> None:
  values = [value] if type_spec.all_equal else value
  py_typecheck.check_type(values, list)
  for member in values:
    _fill(target.federated.value.add(), member, type_spec.member)
  target.federated.type.CopyFrom(type_serialization.serialize_type(type_spec).federated)


def _serialize_struct_type(value, type_spec):
  proto = executor_pb2.Value()
  _fill_struct(proto, value, type_spec)
  return proto, type_spec


def _serialize_federated_value(value, type_spec):
  proto = executor_pb2.Value()
  _fill_federated(proto, value, type_spec)
  return proto, type_spec


def install() -> None:
  """Makes TFF serialize structs and federated values in place (idempotent)."""
  value_serialization._serialize_struct_type = _serialize_struct_type  # pylint: disable=protected-access
  value_serialization._serialize_federated_value = _serialize_federated_value  # pylint: disable=protected-access


def uninstall() -> None:
  """Restores TFF's own serializers."""
  (value_serialization._serialize_struct_type,  # pylint: disable=protected-access
   value_serialization._serialize_federated_value) = _TFF_SERIALIZERS  # pylint: disable=protected-access
