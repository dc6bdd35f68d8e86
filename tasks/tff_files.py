"""TFF's cached dataset files, offline: where they are, and how many examples of each mode every client holds.

TFF's loaders (`tff.simulation.datasets.{emnist,cifar100,stackoverflow}.load_data(cache_dir=...)`) download
`<cache_dir>/<name>.sqlite.lzma` and decompress it to `<cache_dir>/<name>.sqlite` unless that file exists. The suite
calls them only after `require` found the file, so a run never tries the network; a missing file stops the run with
one line naming the path and the flag (`--cache_dir`) to fix it, and an empty, truncated, corrupt or differently
laid out database with one line naming the file and what is wrong (`check_database`, before any data is built).

The SQLite schema (`tff.simulation.datasets.SqlClientData`): table `examples` (split_name, client_id,
serialized_example_proto = a serialized `tf.train.Example`) and table `client_metadata` (client_id, split_name,
num_examples).

A task whose modes are defined per example (EMNIST digits vs characters, Stack Overflow questions vs answers) needs
each client's example count per mode, for the populations and the sampler. `mode_counts` gets them with one SQL
scan of the split, parsing only the feature that decides the mode, in large vectorized batches; the result is
cached next to the database (`<file>.<split>.mode_counts.json`, keyed by the file's size and modification time)
because a scan of Stack Overflow's 135M training examples takes minutes.

A client's dataset is the SQL query `... WHERE client_id = '<id>' AND split_name = '<split>'`, run by the TFF worker
each time a round samples the client. TFF's schema has no index, so every such read scans the whole table: on a
file of the real EMNIST layout with the paper-size test split (85,434 rows) that is 36 ms per client, 0.36 s of a
0.78 s Table 2 round (measured: the round's `next` 0.78 -> 0.42 s with an index), and it grows with the file
(Stack Overflow: 135M rows). `index_clients` adds the index `(client_id, split_name)` to the database once, before
anything is counted (an index changes the file's size, so the mode-count caches are keyed after it); it leaves
the table, and so every query's result, unchanged. A database the suite cannot write (a read-only cache) is read
unindexed, with one warning line. On a host that only runs TFF workers for another's runs, the databases are
indexed by `index_databases` (`tools/start_worker.sh --cache_dir=...`).

A round builds each sampled client's dataset on the driver. Through TFF's loaders that traces the loader's parsing
function and the task's mode filter again for every client (tf.data traces the function of every `map` and
`filter` it builds): 12 ms a client on EMNIST, 0.12 s of a 0.77 s Table 2 round. `traced_client_data` makes the
same datasets from one traced function of the client id (0.6 ms a client); their elements are the same, in the same
order (`tasks/paper_tasks_test.py`).
"""

import contextlib
import json
import os
import sqlite3
from typing import Callable, Optional

from absl import logging
import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

CACHE_DIR_FLAG = '--cache_dir'
CLIENT_INDEX = 'examples_by_client'
_SCAN_BATCH = 1 << 16
_LOCK_TIMEOUT_SECONDS = 600.0


def default_cache_dir() -> str:
  """TFF's own default (`~/.tff`)."""
  return os.path.join(os.path.expanduser('~'), '.tff')


def require(cache_dir: Optional[str], filename: str, task_name: str) -> str:
  """The path of `filename` in `cache_dir`; FileNotFoundError with a one-line message if it is missing."""
  directory = cache_dir or default_cache_dir()
  path = os.path.join(directory, filename)
  if not os.path.exists(path):
    raise FileNotFoundError(
        f'task {task_name} needs {path}, which does not exist and cannot be downloaded without network; copy the '
        f'file there or set {CACHE_DIR_FLAG} to the directory that holds it.')
  return path


class DamagedFileError(ValueError):
  """A dataset file that cannot be read as what it should be; the message is one line naming the file."""


_COLUMNS = ('split_name', 'client_id', 'serialized_example_proto')


@contextlib.contextmanager
def _reading(path: str):
  """SQLite's and TensorFlow's errors on reading `path` as `DamagedFileError` naming it."""
  try:
    yield
  except (sqlite3.Error, tf.errors.OpError) as error:
    reason = (getattr(error, 'message', None) or str(error)).splitlines()[0][:200]
    raise DamagedFileError(f'{path} cannot be read as a TFF SQLite database ({reason}); replace it with an intact '
                           'copy.') from None


def check_database(path: str) -> None:
  """Raises DamagedFileError (one line naming `path`) unless it is an SQLite database with TFF's table `examples`
  (`_COLUMNS`) whose first and last rows read: an empty, truncated, corrupt or other file stops a run before any
  data is built, instead of deep inside a round."""
  with _reading(path), contextlib.closing(sqlite3.connect(path)) as connection:
    columns = {row[1] for row in connection.execute("PRAGMA table_info('examples')").fetchall()}
    if not set(_COLUMNS) <= columns:
      raise DamagedFileError(f'{path} has no table "examples" with columns {", ".join(_COLUMNS)} (TFF\'s layout); '
                             'replace it with an intact copy.')
    for order in ('ASC', 'DESC'):  # The last row sits on the last pages: a truncated file fails here.
      connection.execute(f'SELECT {", ".join(_COLUMNS)} FROM examples ORDER BY rowid {order} LIMIT 1').fetchall()


def require_database(cache_dir: Optional[str], filename: str, task_name: str) -> str:
  """`require`, for one of TFF's SQLite databases (`check_database`), indexed by client (`index_clients`)."""
  path = require(cache_dir, filename, task_name)
  check_database(path)
  with _reading(path):
    index_clients(path)
  return path


def has_client_index(connection: sqlite3.Connection) -> bool:
  """True when some index of table `examples` starts with column client_id (ours, or one the file came with)."""
  for _, name, *_ in connection.execute("PRAGMA index_list('examples')").fetchall():
    columns = [row[2] for row in connection.execute(f"PRAGMA index_info('{name}')").fetchall()]
    if columns[:1] == ['client_id']:
      return True
  return False


def index_clients(database_path: str) -> bool:
  """Adds the index `CLIENT_INDEX` on examples (client_id, split_name) unless the table has one by client; returns
  whether the table is indexed by client afterwards (False, with a warning, when the file cannot be written)."""
  with contextlib.closing(sqlite3.connect(database_path, timeout=_LOCK_TIMEOUT_SECONDS)) as connection:
    if has_client_index(connection):
      return True
    directory = os.path.dirname(os.path.abspath(database_path))
    if not (os.access(database_path, os.W_OK) and os.access(directory, os.W_OK)):
      logging.warning('%s has no index by client and cannot be written here: every client read scans the whole '
                      'file (make it writable once to index it).', database_path)
      return False
    logging.warning('Indexing %s by client, once (each client read would scan the whole file).', database_path)
    connection.execute(f'CREATE INDEX IF NOT EXISTS {CLIENT_INDEX} ON examples (client_id, split_name)')
  return True


def index_databases(cache_dir: str) -> list[str]:
  """`index_clients` on every TFF database (a `*.sqlite` file with table `examples`) in `cache_dir`; returns the
  paths of those left unindexed."""
  unindexed = []
  for filename in sorted(os.listdir(cache_dir)):
    path = os.path.join(cache_dir, filename)
    if filename.endswith('.sqlite') and _has_examples(path) and not index_clients(path):
      unindexed.append(path)
  return unindexed


def _has_examples(database_path: str) -> bool:
  with contextlib.closing(sqlite3.connect(database_path)) as connection:
    return bool(connection.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'examples'").fetchall())


def client_counts(database_path: str, split_name: str) -> dict[str, int]:
  """client id -> number of examples in `split_name`, counted in the `examples` table."""
  with _reading(database_path), contextlib.closing(sqlite3.connect(database_path)) as connection:
    rows = connection.execute('SELECT client_id, COUNT(*) FROM examples WHERE split_name = ? GROUP BY client_id',
                              (split_name,)).fetchall()
  return {client_id: int(count) for client_id, count in rows}


ModeFn = Callable[[tf.Tensor], tf.Tensor]  # serialized examples [N] -> mode index [N] (int)


def _scan(database_path: str, split_name: str, mode_fn: ModeFn, num_modes: int) -> dict[str, list[int]]:
  dataset = tf.data.experimental.SqlDataset(
      'sqlite', database_path,
      f"SELECT client_id, serialized_example_proto FROM examples WHERE split_name = '{split_name}'",
      (tf.string, tf.string)).batch(_SCAN_BATCH)
  parse = tf.function(lambda ids, serialized: (ids, tf.cast(mode_fn(serialized), tf.int64)))
  ids, modes = [], []
  for batch_ids, batch_serialized in dataset:
    batch_ids, batch_modes = parse(batch_ids, batch_serialized)
    ids.append(batch_ids.numpy())
    modes.append(batch_modes.numpy())
  if not ids:
    return {}
  ids, modes = np.concatenate(ids), np.concatenate(modes)
  unique_ids, client_index = np.unique(ids, return_inverse=True)
  counts = np.zeros((len(unique_ids), num_modes), np.int64)
  np.add.at(counts, (client_index, modes), 1)
  return {client_id.decode(): row.tolist() for client_id, row in zip(unique_ids, counts)}


def mode_counts(database_path: str, split_name: str, mode_fn: ModeFn, num_modes: int,
                cache_key: str) -> dict[str, list[int]]:
  """client id -> [examples of mode 0, mode 1, ...] in `split_name` (clients with no example are absent).

  `cache_key` names the mode rule (it is part of the cache file name, so two rules never share a cache).
  """
  stat = os.stat(database_path)
  source = {'size': stat.st_size, 'mtime_ns': stat.st_mtime_ns}
  cache_path = f'{database_path}.{split_name}.{cache_key}.mode_counts.json'
  try:
    with open(cache_path) as f:
      cached = json.load(f)
    if cached['source'] == source:
      return cached['counts']
  except (OSError, ValueError, KeyError):
    pass
  with _reading(database_path):
    counts = _scan(database_path, split_name, mode_fn, num_modes)
  try:
    temporary = f'{cache_path}.{os.getpid()}.tmp'
    with open(temporary, 'w') as f:
      json.dump({'source': source, 'counts': counts}, f)
    os.replace(temporary, cache_path)
  except OSError:
    pass  # A read-only cache directory: scan again next time.
  return counts


def split_dataset(database_path: str, split_name: str) -> tf.data.Dataset:
  """Every serialized example of `split_name`, in one SQL query (for centralized test sets)."""
  return tf.data.experimental.SqlDataset(
      'sqlite', database_path, f"SELECT serialized_example_proto FROM examples WHERE split_name = '{split_name}'",
      tf.string)


def traced_client_data(client_data: tff.simulation.datasets.ClientData) -> tff.simulation.datasets.ClientData:
  """`client_data`'s client datasets, each made by one `tf.function` of the client id traced once (module
  docstring)."""
  dataset_fn = tf.function(client_data.serializable_dataset_fn, input_signature=[tf.TensorSpec([], tf.string)])
  return tff.simulation.datasets.ClientData.from_clients_and_tf_fn(client_data.client_ids, dataset_fn)
