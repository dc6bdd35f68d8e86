"""Nothing of the suite listens beyond loopback: a run's own TFF worker, tools/start_worker.sh at its defaults, and
the local end of an SSH tunnel; a worker that listens wider is refused; the tunnel carries a round to a worker on a
host's loopback (an OpenSSH server on 127.0.0.1 stands in for the other host).

Listening sockets are read from /proc/<pid>/fd and /proc/net/tcp{,6} (`utils.loopback`), and checked against `ss`.
"""

import contextlib
import io
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from unittest import mock

from absl.testing import absltest
import numpy as np
import portpicker
import tensorflow_federated as tff

from utils import execution_context
from utils import loopback
from utils import remote_workers
from utils import ssh_tunnels
from utils import worker_host

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_SSHD = '/usr/sbin/sshd'


def _descendants(pid: int) -> list[int]:
  """`pid` and every live process below it."""
  found, frontier = [pid], [pid]
  while frontier:
    parent = frontier.pop()
    children = execution_context._child_pids(parent)  # pylint: disable=protected-access
    found += children
    frontier += children
  return found


def _listeners_of(pids) -> list[loopback.Listener]:
  return [listener for pid in pids for listener in loopback.process_listeners(pid)]


def _ss_lines(port: int) -> list[str]:
  """`ss -ltn`'s lines for local port `port` (what a user would look at)."""
  output = subprocess.run(['ss', '-ltnH'], capture_output=True, text=True, check=True).stdout
  return [line for line in output.splitlines() if line.split()[3].endswith(f':{port}')]


def _federated_sum(address: str) -> int:
  clients = tff.FederatedType(np.int32, tff.CLIENTS)

  @tff.federated_computation(clients)
  def total(values):
    return tff.federated_sum(values)

  with tff.framework.get_context_stack().install(remote_workers.round_context([address])):
    return int(total([1, 2, 3, 4]))


class ListenerTest(absltest.TestCase):

  def test_reads_this_processs_listeners_and_tells_loopback_from_wildcard(self):
    with socket.socket() as wide, socket.socket() as narrow, socket.socket(socket.AF_INET6) as wide6:
      wide.bind(('0.0.0.0', 0))
      narrow.bind(('127.0.0.1', 0))
      wide6.bind(('::', 0))
      for listening in (wide, narrow, wide6):
        listening.listen()
      found = {listener.port: listener for listener in loopback.process_listeners(os.getpid())}
      self.assertFalse(found[wide.getsockname()[1]].is_loopback)
      self.assertTrue(found[narrow.getsockname()[1]].is_loopback)
      self.assertFalse(found[wide6.getsockname()[1]].is_loopback)
      with self.assertRaisesRegex(loopback.NotLoopbackError, r'listens beyond loopback \(.*0\.0\.0\.0'):
        loopback.check_worker(os.getpid(), timeout_seconds=1)

  def test_a_worker_without_the_preload_is_stopped(self):
    port = portpicker.pick_unused_port()
    environment = dict(os.environ, LD_PRELOAD='')
    original = loopback.preload_environment
    loopback.preload_environment = lambda env=None: dict(environment)  # The preload not taking effect.
    try:
      with self.assertRaisesRegex(loopback.NotLoopbackError, rf'listens beyond loopback \(.*:{port}\)'):
        remote_workers.start_local_worker(port, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    finally:
      loopback.preload_environment = original
    self.assertEqual(_ss_lines(port), [])  # Stopped.


class StartWorkerTest(absltest.TestCase):

  def test_a_damaged_or_inert_preload_library_stops_the_worker_in_one_line(self):
    inert = next(line.split()[-1] for line in open('/proc/self/maps') if '/libm.so' in line)  # An ELF that binds nothing.
    for name, source in (('empty', None), ('inert', inert)):
      library = self.create_tempfile(f'{name}.so').full_path
      if source:
        shutil.copyfile(source, library)
      port = portpicker.pick_unused_port()
      stderr = io.StringIO()
      with mock.patch.object(loopback, 'library_path', return_value=library), contextlib.redirect_stderr(stderr):
        status = worker_host.serve(port, 'user')
      lines = stderr.getvalue().strip().splitlines()
      self.assertEqual(status, 2, name)
      self.assertLen([line for line in lines if line.startswith('start_worker: ')], 1, lines)
      self.assertRegex(lines[-1], {'empty': rf'^start_worker: {library} is not a shared library',
                                   'inert': rf'^start_worker: TFF worker \d+ listens beyond loopback \(.*:{port}\); it '
                                            'was stopped'}[name])
      self.assertEqual(_ss_lines(port), [], name)  # Stopped: nothing listens.


class RunListenersTest(absltest.TestCase):

  def test_a_run_and_a_started_worker_listen_on_loopback_only(self):
    root = self.create_tempdir().full_path
    worker_port = portpicker.pick_unused_port()
    environment = dict(os.environ, PYTHONPATH=_ROOT, TF_CPP_MIN_LOG_LEVEL='3')
    worker = subprocess.Popen(['bash', os.path.join(_ROOT, 'tools', 'start_worker.sh'), f'--port={worker_port}'],
                              env=environment, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                              start_new_session=True)
    run = subprocess.Popen([sys.executable, os.path.join(_ROOT, 'run_experiment.py'), '--task=synthetic',
                            '--total_rounds=40', '--clients_per_round=3', f'--root_output_dir={root}'],
                           env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    seen = []
    try:
      deadline = time.monotonic() + 240
      while run.poll() is None and time.monotonic() < deadline:
        seen += _listeners_of(_descendants(run.pid) + _descendants(worker.pid))
        if {listener.port for listener in seen} > {worker_port} and _ss_lines(worker_port):
          break  # Both workers listen: the run's own (a random port) and the started one.
        time.sleep(0.1)
      run_ports = {listener.port for listener in seen} - {worker_port}
      self.assertNotEmpty(run_ports, 'the run\'s own worker was never seen listening')
      ss_lines = _ss_lines(worker_port) + [line for port in run_ports for line in _ss_lines(port)]
      second = subprocess.run(['bash', os.path.join(_ROOT, 'tools', 'start_worker.sh'), f'--port={worker_port}'],
                              env=environment, capture_output=True, text=True, timeout=120)
      self.assertEqual((second.returncode, second.stderr.strip().splitlines()),
                       (2, [f'start_worker: port {worker_port} is already in use (127.0.0.1:{worker_port}): a second '
                            'worker there would share its connections; stop that process or choose another --port.']))
      self.assertLen(_ss_lines(worker_port), 1)
    finally:
      run.kill()
      os.killpg(worker.pid, signal.SIGTERM)
      run.wait()
      worker.wait()
    self.assertEqual([str(listener) for listener in seen if not listener.is_loopback], [])
    self.assertLen(ss_lines, 2)
    for line in ss_lines:
      self.assertRegex(line.split()[3], r'^(127\.0\.0\.1|\[::ffff:127\.0\.0\.1\]|\[::1\]):\d+$', line)
    with worker.stdout:
      self.assertIn('--workers=ssh://', worker.stdout.read())

  def test_start_worker_binds_every_interface_only_when_asked_and_warns(self):
    port = portpicker.pick_unused_port()
    worker = subprocess.Popen(['bash', os.path.join(_ROOT, 'tools', 'start_worker.sh'), f'--port={port}',
                               '--insecure_listen_on_all_interfaces'], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
      remote_workers.wait_until_ready([f'127.0.0.1:{port}'], timeout_seconds=60)
      lines = _ss_lines(port)
    finally:
      os.killpg(worker.pid, signal.SIGTERM)
      worker.wait()
    self.assertLen(lines, 1)
    self.assertRegex(lines[0].split()[3], r'^(\*|0\.0\.0\.0|\[::\]):\d+$')
    with worker.stdout, worker.stderr:
      self.assertIn('WARNING: --insecure_listen_on_all_interfaces', worker.stderr.read())


@absltest.skipUnless(os.path.exists(_SSHD), f'{_SSHD} (Debian\'s openssh-server) is not installed')
class SshTunnelTest(absltest.TestCase):
  """An OpenSSH server on 127.0.0.1 with keys made for the test; the worker on the same loopback."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    execution_context.install()
    cls._dir = tempfile.mkdtemp()
    keys = {name: os.path.join(cls._dir, name) for name in ('host_key', 'user_key')}
    for path in keys.values():
      subprocess.run(['ssh-keygen', '-q', '-t', 'ed25519', '-N', '', '-f', path], check=True)
    shutil.copy(keys['user_key'] + '.pub', os.path.join(cls._dir, 'authorized_keys'))
    cls._ssh_port = portpicker.pick_unused_port()
    sshd_config = os.path.join(cls._dir, 'sshd_config')
    with open(sshd_config, 'w') as f:
      f.write(f'ListenAddress 127.0.0.1\nPort {cls._ssh_port}\nHostKey {keys["host_key"]}\n'
              f'AuthorizedKeysFile {cls._dir}/authorized_keys\nPasswordAuthentication no\nUsePAM no\n'
              f'StrictModes no\nPermitRootLogin prohibit-password\nAllowTcpForwarding local\n'
              f'PidFile {cls._dir}/sshd.pid\n')
    cls._ssh_config = os.path.join(cls._dir, 'ssh_config')
    with open(cls._ssh_config, 'w') as f:
      f.write(f'Host *\n  Port {cls._ssh_port}\n  IdentityFile {keys["user_key"]}\n  IdentitiesOnly yes\n'
              '  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n')
    if os.geteuid() == 0:
      os.makedirs('/run/sshd', exist_ok=True)  # sshd's privilege-separation directory.
    cls._sshd_log = os.path.join(cls._dir, 'sshd.log')
    with open(cls._sshd_log, 'w') as log:
      cls._sshd = subprocess.Popen([_SSHD, '-D', '-e', '-f', sshd_config], stderr=log)
    deadline = time.monotonic() + 30
    while not _ss_lines(cls._ssh_port) and time.monotonic() < deadline:
      if cls._sshd.poll() is not None:
        with open(cls._sshd_log) as log:
          raise RuntimeError(f'sshd exited: {log.read()}')
      time.sleep(0.05)
    cls._worker_port = portpicker.pick_unused_port()
    cls._worker = remote_workers.start_local_worker(cls._worker_port, stdout=subprocess.DEVNULL,
                                                    stderr=subprocess.DEVNULL)
    cls._login = f'{os.environ.get("USER") or subprocess.check_output(["id", "-un"], text=True).strip()}@127.0.0.1'

  @classmethod
  def tearDownClass(cls):
    ssh_tunnels.close_all()
    for process in (cls._worker, cls._sshd):
      process.kill()
      process.wait()
    shutil.rmtree(cls._dir, ignore_errors=True)
    super().tearDownClass()

  def setUp(self):
    super().setUp()
    self.addCleanup(self._print_sshd_log_on_failure)

  def _print_sshd_log_on_failure(self):
    outcome = self._outcome.result
    if outcome.errors or outcome.failures:
      with open(self._sshd_log) as log:
        print(f'sshd said:\n{log.read()}')

  def test_a_round_runs_through_the_tunnel_whose_local_end_is_loopback(self):
    self.assertEqual(loopback.process_listeners(self._worker.pid)[0].is_loopback, True)
    address = ssh_tunnels.open_tunnel(f'ssh://{self._login}:{self._worker_port}',
                                      ssh_command=('ssh', '-F', self._ssh_config))
    local_port = int(address.rpartition(':')[2])
    self.assertNotEqual(local_port, self._worker_port)
    self.assertEqual(_federated_sum(address), 10)
    lines = _ss_lines(local_port)
    self.assertLen(lines, 1)
    self.assertRegex(lines[0].split()[3], rf'^127\.0\.0\.1:{local_port}$')

  def test_a_tunnel_that_cannot_log_in_fails_in_one_line(self):
    with self.assertRaisesRegex(ssh_tunnels.TunnelError, r'^the SSH tunnel to ssh://nobody@127\.0\.0\.1:\d+ failed '
                                r'\(ssh exited with 255: [^\n]*\)\.$'):
      ssh_tunnels.open_tunnel(f'ssh://nobody@127.0.0.1:{self._worker_port}',
                              ssh_command=('ssh', '-F', self._ssh_config), timeout_seconds=30)

  def test_addresses_parse(self):
    self.assertEqual(ssh_tunnels.parse('ssh://alice@host-a:8000'), ssh_tunnels.Target('alice@host-a', 8000))
    self.assertEqual(ssh_tunnels.parse('ssh://host-a:8000'), ssh_tunnels.Target('host-a', 8000))
    self.assertEqual(ssh_tunnels.parse('ssh://alice@[::1]:8000'), ssh_tunnels.Target('alice@::1', 8000))
    self.assertEqual(ssh_tunnels.parse('ssh://[fe80::2]:8000'), ssh_tunnels.Target('fe80::2', 8000))
    for bad in ('ssh://host-a', 'ssh://alice@host-a:0', 'ssh://a@b@c:1', 'ssh://host-a:80/x', 'ssh://[::g]:80',
                'ssh://[1.2.3.4]:80'):
      with self.assertRaisesRegex(ValueError, '^--workers takes ssh://'):
        remote_workers.parse(bad)


if __name__ == '__main__':
  absltest.main()
