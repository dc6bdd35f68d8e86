"""One process owns a directory for as long as it lives: an advisory lock on a file in it.

    with directory_lock.DirectoryLock(output_dir):   # DirectoryInUse (one line naming the holder) if held
      ...                                            # nothing else that takes this lock writes here meanwhile

The lock is `flock(2)` on `<directory>/.lock`, held by an open file description for the owner's life: the kernel
releases it when the owner exits by any means, SIGKILL included, so no stale lock is ever left to clear by hand. The
file holds the owner's pid, host and start time for a refusal to name, and stays when the owner ends; an owner
that wrote nothing else (a run refused by a check that needs the lock) undoes its record, or removes the file and the
directory it made, and `acquire` checks that the file it locked is still the one at its path (else it opens the new
one), so two processes never own two files of one name. `holder` asks, without taking the lock, whether a live
process holds it.

Scope: processes on one host. On NFS, Linux turns `flock` into the server's byte-range locks, which hold across the
hosts that mount it when the server keeps locks (NFSv4, or NFSv3 with lockd); a filesystem that keeps none answers
ENOLCK or EOPNOTSUPP, and `LocksUnsupported` says so (the caller refuses unless told to go on unlocked).
"""

import datetime
import errno
import fcntl
import json
import os
import socket
import time
from typing import Optional

LOCK_FILE = '.lock'
_BUSY = (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES)
_UNSUPPORTED = (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL)
# How long `acquire` retries a lock that is busy: `holder`'s probes hold it for microseconds, an owner for its life.
_PROBE_SECONDS = 1.0
_HELD_HERE: set[str] = set()  # The lock files this process holds: its own lock is no other run's.


class DirectoryInUse(ValueError):
  """Another live process holds the directory's lock; the message is one line naming it."""


class LocksUnsupported(ValueError):
  """The directory's filesystem keeps no locks; the message is one line."""


def _describe(descriptor: int) -> str:
  """`pid P on host H since T` from the holder's record, read through `descriptor`."""
  try:
    record = json.loads(os.pread(descriptor, 4096, 0) or b'{}')
  except (OSError, ValueError):
    record = {}
  if not isinstance(record, dict) or 'pid' not in record:
    return 'another process (its record is being written)'
  return f'pid {record["pid"]} on host {record.get("host", "?")} since {record.get("started", "?")}'


class DirectoryLock:
  """The lock of `directory` (created if missing), on its file `name`. `acquire` raises DirectoryInUse or
  LocksUnsupported; `release` (or leaving the `with` block) lets go. With `required=False`, a filesystem without
  locks is accepted unlocked. `release(undo=True)`, for an owner that wrote nothing else, leaves the directory as
  `acquire` found it: the earlier owner's record back in the file, or no file and no directory where it made them."""

  def __init__(self, directory: str, required: bool = True, name: str = LOCK_FILE):
    self.path = os.path.join(directory, name)
    self._directory, self._required = directory, required
    self._descriptor: Optional[int] = None
    self._made_directory = False
    self._previous: Optional[bytes] = None  # The file's bytes before this owner's record; None: it made the file.

  def acquire(self) -> 'DirectoryLock':
    self._made_directory = not os.path.isdir(self._directory)
    os.makedirs(self._directory, exist_ok=True)
    deadline = time.monotonic() + _PROBE_SECONDS
    while True:
      existed = os.path.exists(self.path)
      descriptor = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
      try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
      except OSError as error:
        if error.errno in _BUSY and time.monotonic() < deadline:
          os.close(descriptor)
          time.sleep(0.02)
          continue
        held_by = _describe(descriptor) if error.errno in _BUSY else None
        os.close(descriptor)
        if held_by is not None:
          raise _in_use(self._directory, held_by) from None
        if error.errno in _UNSUPPORTED:
          if not self._required:
            return self
          raise LocksUnsupported(f'{self._directory} is on a filesystem that keeps no locks '
                                 f'({os.strerror(error.errno)}), so nothing would stop a second run from writing '
                                 'there at once; pass --unlocked_run_directory to run without the lock.') from None
        raise
      if _same_file(descriptor, self.path):
        break
      os.close(descriptor)  # An owner that undid its lock removed this file after it was opened: open it afresh.
    self._previous = os.pread(descriptor, 4096, 0) if existed else None
    started = datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M:%S UTC')
    record = json.dumps({'pid': os.getpid(), 'host': socket.gethostname(), 'started': started}).encode()
    try:
      _rewrite(descriptor, record)
    except OSError:  # A full disk: nothing holds the lock, and the caller names the fault.
      os.close(descriptor)
      raise
    self._descriptor = descriptor
    _HELD_HERE.add(os.path.realpath(self.path))
    return self

  def release(self, undo: bool = False) -> None:
    if self._descriptor is None:
      return
    _HELD_HERE.discard(os.path.realpath(self.path))
    try:
      if undo and self._previous is not None:
        _rewrite(self._descriptor, self._previous)
      elif undo:
        os.remove(self.path)  # Still locked: a process that opened it meanwhile sees it gone and opens afresh.
        if self._made_directory:
          try:
            os.rmdir(self._directory)
          except OSError:  # Not empty: something else wrote there.
            pass
    finally:
      os.close(self._descriptor)  # Closing the last descriptor of the open file releases its flock.
      self._descriptor = None

  def __enter__(self) -> 'DirectoryLock':
    return self.acquire()

  def __exit__(self, *exc_info) -> None:
    self.release()


def _same_file(descriptor: int, path: str) -> bool:
  try:
    return os.path.samestat(os.fstat(descriptor), os.stat(path))
  except FileNotFoundError:
    return False


def _rewrite(descriptor: int, content: bytes) -> None:
  os.ftruncate(descriptor, 0)
  os.pwrite(descriptor, content, 0)


def holder(directory: str, name: str = LOCK_FILE) -> Optional[str]:
  """`pid P on host H since T` of the live process holding `directory`'s lock (on its file `name`), None when none
  does (or the filesystem keeps no locks, or this process holds it). Takes a shared lock for an instant, writes
  nothing."""
  path = os.path.join(directory, name)
  if os.path.realpath(path) in _HELD_HERE:
    return None
  try:
    descriptor = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
  except OSError:
    return None
  try:
    fcntl.flock(descriptor, fcntl.LOCK_SH | fcntl.LOCK_NB)
    return None
  except OSError as error:
    return _describe(descriptor) if error.errno in _BUSY else None
  finally:
    os.close(descriptor)


def check_free(directory: str) -> None:
  """Raises DirectoryInUse (one line naming the holder) when a live process holds `directory`'s lock."""
  held_by = holder(directory)
  if held_by is not None:
    raise _in_use(directory, held_by)


def _in_use(directory: str, held_by: str) -> DirectoryInUse:
  return DirectoryInUse(f'{directory} is in use by another run ({held_by}); wait for it to end, or choose another '
                        '--experiment_name.')
