"""The client-state store: every client's state for methods that keep one, keyed by client id.

A client's state (a structure of numpy arrays, the method's `initial_client_state`, each field keeping its dtype:
float32 values, int32 counts and ids, bool flags) is created at the client's
first round with the initial value, handed to the client computation as a one-element dataset
(`algorithms.core.client_state`), and replaced by the value the round returns. The store is saved in every checkpoint
(`snapshot` / `restore`: the ids and one stacked array per field), so a resumed run continues from exactly the
states of the checkpointed round.
"""

import collections
from typing import Callable, Optional, Sequence

import numpy as np
import tensorflow as tf

from algorithms.core import client_state

IDS = 'ids'


class ClientStateStore:
  """Per-client state, created on first use with `initial`."""

  def __init__(self, initial: dict):
    self._initial = {key: client_state.typed(value) for key, value in initial.items()}
    self._states: dict[str, dict] = {}

  def __len__(self) -> int:
    return len(self._states)

  def get(self, client_id: str) -> dict:
    return self._states.get(client_id, self._initial)

  def frozen_get(self) -> Callable[[str], dict]:
    """`get` on the states as they are now: later rounds' `update`s do not show in it (they replace a client's
    entry, never change its arrays)."""
    states = dict(self._states)
    return lambda client_id: states.get(client_id, self._initial)

  def datasets(self, client_ids: Sequence[str], trainers: Optional[int] = None,
               census: bool = False) -> list[tf.data.Dataset]:
    """The one-element state dataset of each client, with its position in the round; the clients after the first
    `trainers` (None: all train) only report, and `census` marks a census round (`client_state.element`)."""
    trainers = len(client_ids) if trainers is None else trainers
    return [tf.data.Dataset.from_tensors(client_state.element(self.get(client_id), position, position < trainers,
                                                              census))
            for position, client_id in enumerate(client_ids)]

  def update(self, client_ids: Sequence[str], collected: dict) -> None:
    """Stores the states a round returned: `collected` = {'position': [m], field: [m, ...]}."""
    for row, position in enumerate(np.asarray(collected[client_state.POSITION])):
      self._states[client_ids[int(position)]] = {key: self._typed(key, collected[key][row]) for key in self._initial}

  def snapshot(self) -> collections.OrderedDict:
    """{'ids': [n] bytes, field: [n, ...]} in id order (empty arrays for an empty store)."""
    ids = sorted(self._states)
    snapshot = collections.OrderedDict([(IDS, np.array([i.encode() for i in ids], dtype=np.bytes_))])
    for key, value in self._initial.items():
      snapshot[key] = (np.stack([self._states[i][key] for i in ids]) if ids else
                       np.zeros((0,) + value.shape, value.dtype))
    return snapshot

  def restore(self, snapshot: Optional[dict]) -> None:
    """Replaces the states with a `snapshot`'s."""
    self._states = {}
    ids = [] if snapshot is None else np.asarray(snapshot[IDS]).reshape(-1)
    for row, client_id in enumerate(ids):
      client_id = client_id.decode() if isinstance(client_id, bytes) else str(client_id)
      self._states[client_id] = {key: self._typed(key, snapshot[key][row]) for key in self._initial}

  def _typed(self, key: str, value) -> np.ndarray:
    """`value` as field `key` of a state: the initial value's dtype."""
    return np.asarray(value, self._initial[key].dtype)
