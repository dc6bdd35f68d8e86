"""SSH tunnels to TFF workers that listen on their host's loopback: `--workers=ssh://[user@]host:port`.

A worker started by tools/start_worker.sh listens on its host's loopback only (`utils.loopback`). To reach it from
another host, the run opens one OpenSSH local forward per such address,

    ssh -N -o ExitOnForwardFailure=yes -o BatchMode=yes -L 127.0.0.1:<free local port>:127.0.0.1:<port> [user@]host

and talks to the worker at `127.0.0.1:<local port>`. What the tunnel protects: the gRPC traffic between the hosts is
encrypted and authenticated by SSH (the worker host's key, the user's key), and the worker's port is open to no
interface but its host's loopback. What it does not: the local end of the forward, and the worker's port on its
host, are open to every process of every user on those hosts' loopback, since TFF's worker has no authentication
of its own. SSH's port, identity and host keys come from the user's SSH configuration (`~/.ssh/config`); BatchMode
makes a missing key or an unknown host fail at once, in one line, instead of prompting.

The tunnels end with the process that opened them (the kernel's parent-death signal, and `close_all` at exit).
"""

import atexit
import ctypes
import ipaddress
import re
import signal
import socket
import subprocess
import tempfile
import time
from typing import NamedTuple, Sequence

import portpicker

SCHEME = 'ssh://'
_TARGET = re.compile(r'^ssh://(?:(?P<user>[^@/:\s]+)@)?(?P<host>[^@/:\s]+|\[[0-9A-Fa-f:.]+\]):(?P<port>\d+)$')
_PR_SET_PDEATHSIG = 1
_open: list[tuple[subprocess.Popen, object]] = []


class TunnelError(RuntimeError):
  """A tunnel could not be opened; the message is one line naming the address and what SSH said."""


class Target(NamedTuple):
  """A worker reached through SSH: `[user@]host` to log in to, and the worker's port on that host's loopback."""
  login: str
  port: int


def is_tunneled(address: str) -> bool:
  return address.startswith(SCHEME)


def parse(address: str) -> Target:
  """`ssh://[user@]host:port` -> Target; ValueError (one line) for another form. An IPv6 host is written in
  brackets (`ssh://alice@[::1]:8000`), which ssh takes without them."""
  match = _TARGET.match(address)
  bracketed = match is not None and match['host'].startswith('[')
  if not match or not 0 < int(match['port']) < 65536 or (bracketed and not _is_ipv6(match['host'][1:-1])):
    raise ValueError(f'--workers takes ssh://[user@]host:port for a worker reached through SSH; got {address!r}.')
  host = match['host'][1:-1] if bracketed else match['host']
  login = f'{match["user"]}@{host}' if match['user'] else host
  return Target(login, int(match['port']))


def _is_ipv6(text: str) -> bool:
  try:
    return ipaddress.ip_address(text).version == 6
  except ValueError:
    return False


def _die_with_parent() -> None:
  ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _accepts(port: int) -> bool:
  with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
    probe.settimeout(1.0)
    return probe.connect_ex(('127.0.0.1', port)) == 0


def open_tunnel(address: str, timeout_seconds: float = 60.0, ssh_command: Sequence[str] = ('ssh',)) -> str:
  """Opens the forward of `address` (`ssh://[user@]host:port`) and returns the local address to use
  (`127.0.0.1:<port>`); TunnelError when SSH exits or the forward does not listen within the timeout.
  `ssh_command` is the SSH client and options before the forward's own (tests give a configuration file)."""
  target = parse(address)
  local_port = portpicker.pick_unused_port()
  command = [*ssh_command, '-N', '-o', 'ExitOnForwardFailure=yes', '-o', 'BatchMode=yes',
             '-o', 'ServerAliveInterval=15', '-L', f'127.0.0.1:{local_port}:127.0.0.1:{target.port}', target.login]
  messages = tempfile.TemporaryFile()  # Not a pipe: SSH may write to it for as long as the run lasts.
  process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=messages,
                             preexec_fn=_die_with_parent)
  deadline = time.monotonic() + timeout_seconds
  while process.poll() is None and not _accepts(local_port):
    if time.monotonic() > deadline:
      process.kill()
      process.wait()
      messages.close()
      raise TunnelError(f'the SSH tunnel to {address} did not open within {timeout_seconds:g} s.')
    time.sleep(0.05)
  if process.poll() is not None:
    messages.seek(0)
    said = [line for line in messages.read().decode(errors='replace').splitlines() if line.strip()]
    messages.close()
    raise TunnelError(f'the SSH tunnel to {address} failed (ssh exited with {process.returncode}: '
                      f'{said[-1] if said else "no message"}).')
  _open.append((process, messages))
  return f'127.0.0.1:{local_port}'


def close_all() -> None:
  """Ends every tunnel this process opened."""
  while _open:
    process, messages = _open.pop()
    messages.close()
    if process.poll() is None:
      process.terminate()
      try:
        process.wait(timeout=5)
      except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


atexit.register(close_all)
