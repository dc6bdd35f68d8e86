"""Checks, on a TFF computation's building blocks, that no per-client value reaches the server.

A value placed at CLIENTS reaches the server only through an intrinsic whose parameter is CLIENTS-placed and whose
result is SERVER-placed. `clients_to_server_intrinsics` lists every such intrinsic in a computation (walking its
whole building-block tree, so nested computations count), and `per_client_leaks` names those that are not an
aggregate: the only intrinsics accepted are sums and means over clients (`AGGREGATES`), whose results have a
fixed shape whatever the number of clients, and no server-placed tensor type in the computation may have a
dimension that depends on the number of clients (an unknown dimension). `federated_aggregate` is rejected because
its accumulator can hold one value per client (FedTEM uses it that way to collect its per-client scores).

`client_messages` lists what leaves a client in each of those intrinsics (the CLIENTS-placed value: its named
fields, tensors and values per client), the table of what a method sends.

The check reads TFF's compiler representation (`to_building_block`), which is not public API in TFF 0.87.
"""

from typing import NamedTuple

import numpy as np
from tensorflow_federated.python.common_libs import structure
from tensorflow_federated.python.core.impl.compiler import building_blocks
from tensorflow_federated.python.core.impl.compiler import tree_analysis
from tensorflow_federated.python.core.impl.types import computation_types
from tensorflow_federated.python.core.impl.types import placements

from algorithms.core import client_state

AGGREGATES = frozenset({'federated_sum', 'federated_mean', 'federated_weighted_mean', 'federated_secure_sum',
                        'federated_secure_sum_bitwidth', 'federated_secure_modular_sum'})


def _types(type_spec):
  """`type_spec` and every type nested in it."""
  yield type_spec
  for child in type_spec.children():
    yield from _types(child)


def _placed_at(type_spec, placement) -> bool:
  return any(isinstance(t, computation_types.FederatedType) and t.placement is placement
             for t in _types(type_spec))


def _intrinsics(computation):
  found = []

  def visit(block):
    if isinstance(block, building_blocks.Intrinsic):
      found.append(block)

  tree_analysis.visit_preorder(computation.to_building_block(), visit)
  return found


def clients_to_server_intrinsics(computation) -> list[str]:
  """URIs of the intrinsics in `computation` that take a CLIENTS-placed value and return a SERVER-placed one."""
  result = []
  for intrinsic in _intrinsics(computation):
    signature = intrinsic.type_signature
    if (signature.parameter is not None and _placed_at(signature.parameter, placements.CLIENTS)
        and _placed_at(signature.result, placements.SERVER)):
      result.append(intrinsic.uri)
  return result


def _server_tensors_with_unknown_dimensions(computation) -> list[str]:
  leaks = []
  for intrinsic in _intrinsics(computation):
    for federated in _types(intrinsic.type_signature):
      if isinstance(federated, computation_types.FederatedType) and federated.placement is placements.SERVER:
        for tensor in _types(federated.member):
          if isinstance(tensor, computation_types.TensorType) and None in (tensor.shape or ()):
            leaks.append(f'{intrinsic.uri} has a server value of type {tensor}')
  return leaks


def per_client_leaks(computation) -> list[str]:
  """Reasons why `computation` may place a per-client value at the server; empty when it is aggregation-only."""
  leaks = [f'{uri} moves client values to the server and is not a sum or mean'
           for uri in clients_to_server_intrinsics(computation) if uri not in AGGREGATES]
  return leaks + _server_tensors_with_unknown_dimensions(computation)


class ClientMessage(NamedTuple):
  """One intrinsic that moves client values to the server: `aggregate` when the server sees only a sum or mean over
  clients; `fields` the top-level names of the value a client contributes (empty when unnamed); `tensors` its
  number of tensors; `values` its number of scalars per client (None when a dimension is unknown: its length
  depends on the client).

  A per-client value whose fields start with the client-state position (`client_state.POSITION`) is the client's
  own state on its way to the simulation's client-state store (TFF keeps no state on clients between rounds); in a
  deployment it would stay on the client, and `describe` calls it client state."""
  uri: str
  aggregate: bool
  fields: tuple[str, ...]
  tensors: int
  values: object

  def describe(self) -> str:
    what = ', '.join(self.fields) if self.fields else 'unnamed'
    size = '?' if self.values is None else f'{self.values:,}'
    kind = ('aggregate' if self.aggregate else
            'client state' if self.fields[:1] == (client_state.POSITION,) else 'per-client')
    return f'{self.uri} ({kind}): {what}; {self.tensors} tensors, {size} values per client'


def _client_value(parameter):
  """The CLIENTS-placed member type of an intrinsic's parameter (the first one found)."""
  for type_spec in _types(parameter):
    if isinstance(type_spec, computation_types.FederatedType) and type_spec.placement is placements.CLIENTS:
      return type_spec.member
  raise ValueError(f'no CLIENTS-placed value in {parameter}')


def client_messages(computation) -> list[ClientMessage]:
  """What leaves the clients in `computation`: one `ClientMessage` per CLIENTS-to-SERVER intrinsic, in order."""
  messages = []
  for intrinsic in _intrinsics(computation):
    signature = intrinsic.type_signature
    if not (signature.parameter is not None and _placed_at(signature.parameter, placements.CLIENTS)
            and _placed_at(signature.result, placements.SERVER)):
      continue
    value = _client_value(signature.parameter)
    tensors = [t for t in _types(value) if isinstance(t, computation_types.TensorType)]
    fields = ()
    if isinstance(value, computation_types.StructType):
      fields = tuple(name for name, _ in structure.to_elements(value) if name)
    sizes = [None if t.shape is None or None in t.shape else int(np.prod(t.shape, dtype=np.int64)) for t in tensors]
    messages.append(ClientMessage(intrinsic.uri, intrinsic.uri in AGGREGATES, fields, len(tensors),
                                  None if None in sizes else sum(sizes)))
  return messages
