"""The directory lock: one owner at a time across processes, released by the kernel when the owner dies."""

import errno
import fcntl
import os
import signal
import subprocess
import sys
from unittest import mock

from absl.testing import absltest

from utils import directory_lock

_REPOSITORY = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _hold(directory: str) -> subprocess.Popen:
  """Another process that holds `directory`'s lock until killed; returned once it holds it."""
  script = (f'from utils import directory_lock; lock = directory_lock.DirectoryLock({directory!r}).acquire(); '
            'print("held", flush=True); input()')
  process = subprocess.Popen([sys.executable, '-c', script], env=dict(os.environ, PYTHONPATH=_REPOSITORY),
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
  assert process.stdout.readline() == 'held\n'
  return process


class DirectoryLockTest(absltest.TestCase):

  def test_a_second_owner_is_refused_naming_the_first_until_it_is_killed(self):
    directory = os.path.join(self.create_tempdir().full_path, 'run')
    holder = _hold(directory)
    with open(os.path.join(directory, directory_lock.LOCK_FILE), 'rb') as f:
      record = f.read()
    self.assertRegex(directory_lock.holder(directory), rf'^pid {holder.pid} on host \S+ since \d{{4}}-')
    with self.assertRaisesRegex(directory_lock.DirectoryInUse,
                                rf'^{directory} is in use by another run \(pid {holder.pid} on host '):
      directory_lock.DirectoryLock(directory).acquire()
    with open(os.path.join(directory, directory_lock.LOCK_FILE), 'rb') as f:
      self.assertEqual(f.read(), record)  # The refused one wrote nothing.
    holder.send_signal(signal.SIGKILL)  # No cleanup runs: the kernel releases the lock.
    holder.communicate()
    self.assertIsNone(directory_lock.holder(directory))
    with directory_lock.DirectoryLock(directory):
      self.assertIsNone(directory_lock.holder(directory))  # This process's own lock is no other run's.
      with open(os.path.join(directory, directory_lock.LOCK_FILE)) as f:
        self.assertIn(f'"pid": {os.getpid()}', f.read())

  def test_a_released_lock_is_free_and_a_missing_one_never_held(self):
    directory = self.create_tempdir().full_path
    self.assertIsNone(directory_lock.holder(os.path.join(directory, 'absent')))
    lock = directory_lock.DirectoryLock(directory).acquire()
    lock.release()
    holder = _hold(directory)  # Another process can take it at once.
    holder.kill()
    holder.communicate()

  def test_undo_leaves_the_directory_as_it_was_found(self):
    root = self.create_tempdir().full_path
    fresh = os.path.join(root, 'fresh')
    directory_lock.DirectoryLock(fresh).acquire().release(undo=True)
    self.assertFalse(os.path.exists(fresh))  # Neither the file nor the directory it made.
    used = os.path.join(root, 'used')
    os.makedirs(used)
    record = b'{"pid": 1, "host": "another", "started": "2026-01-01 00:00:00 UTC"}'  # An earlier owner's.
    with open(os.path.join(used, directory_lock.LOCK_FILE), 'wb') as f:
      f.write(record)
    directory_lock.DirectoryLock(used).acquire().release(undo=True)
    with open(os.path.join(used, directory_lock.LOCK_FILE), 'rb') as f:
      self.assertEqual(f.read(), record)  # The earlier owner's record, byte for byte.

  def test_a_filesystem_without_locks_is_refused_unless_allowed(self):
    directory = self.create_tempdir().full_path
    unsupported = OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))
    with mock.patch.object(fcntl, 'flock', side_effect=unsupported):
      with self.assertRaisesRegex(directory_lock.LocksUnsupported,
                                  'keeps no locks .*; pass --unlocked_run_directory to run without the lock'):
        directory_lock.DirectoryLock(directory).acquire()
      directory_lock.DirectoryLock(directory, required=False).acquire().release()
      self.assertIsNone(directory_lock.holder(directory))


if __name__ == '__main__':
  absltest.main()
