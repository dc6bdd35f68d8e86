"""TFF workers that listen on loopback only, and the check that they do.

TFF 0.87's `worker_binary` takes only `--port`, binds the wildcard address and serves gRPC with no TLS and no
authentication: whoever reaches the port can have the worker read and write files and run code as its user. The
worker is confined here with a preloaded library, `utils/loopback_bind.c` (built by tools/bootstrap.sh into the
project's environment), that turns its wildcard bind into a bind to loopback. Of the ways to confine it this is the
one that keeps TFF's worker as it is: TFF 0.87 has no in-process C++ executor (its Python side only starts the
worker binary), and a network namespace would hide the worker from the process that drives it too, needing a relay
that copies every byte of every round. The preload costs nothing per call (one `bind` at start-up).

Every worker the suite starts (TFF's own worker of a run, `utils.remote_workers.start_local_worker`) is checked after
start: the listening sockets it owns, read from /proc/<pid>/fd and /proc/net/tcp and tcp6, must all be loopback, or
the worker is stopped and `NotLoopbackError` says what it listened on. tools/start_worker.sh preloads the same library
unless given `--insecure_listen_on_all_interfaces`; hosts reach such a worker through SSH tunnels
(`utils.ssh_tunnels`).
"""

import ipaddress
import os
import sys
import time
from typing import NamedTuple, Optional

LIBRARY_NAME = 'loopback_bind.so'
_LISTEN = '0A'  # TCP_LISTEN in /proc/net/tcp's `st` column.


class NotLoopbackError(RuntimeError):
  """A worker listens beyond loopback, or cannot be confined to it; the message is one line."""


def library_path() -> str:
  """Where tools/bootstrap.sh builds the preload library: the project environment's lib/ directory."""
  return os.path.join(sys.prefix, 'lib', LIBRARY_NAME)


def preload_environment(environment: Optional[dict] = None) -> dict:
  """`environment` (default: this process's) with the preload library first in LD_PRELOAD; NotLoopbackError when the
  library has not been built."""
  path = library_path()
  if not os.path.isfile(path):
    raise NotLoopbackError(f'{path} is missing, so a TFF worker would listen on every interface; run '
                           'tools/bootstrap.sh to build it.')
  environment = dict(os.environ if environment is None else environment)
  others = [entry for entry in environment.get('LD_PRELOAD', '').split() if entry and entry != path]
  environment['LD_PRELOAD'] = ' '.join([path] + others)
  return environment


class Listener(NamedTuple):
  """A listening TCP socket: its local address and port."""
  address: ipaddress.IPv4Address | ipaddress.IPv6Address
  port: int

  @property
  def is_loopback(self) -> bool:
    mapped = getattr(self.address, 'ipv4_mapped', None)
    return self.address.is_loopback or (mapped is not None and mapped.is_loopback)

  def __str__(self) -> str:
    return f'[{self.address}]:{self.port}' if self.address.version == 6 else f'{self.address}:{self.port}'


def _address(hex_address: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
  """An address as /proc/net/tcp{,6} writes it: 32-bit words in host (little-endian) byte order."""
  raw = bytes.fromhex(hex_address)
  swapped = b''.join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
  return ipaddress.ip_address(swapped)


def listeners(inodes: Optional[set[str]] = None) -> dict[str, Listener]:
  """Socket inode -> `Listener` of every listening TCP socket in this network namespace (of `inodes` when given)."""
  found = {}
  for table in ('/proc/net/tcp', '/proc/net/tcp6'):
    try:
      with open(table) as f:
        lines = f.read().splitlines()[1:]
    except OSError:
      continue
    for line in lines:
      fields = line.split()
      if len(fields) < 10 or fields[3] != _LISTEN or (inodes is not None and fields[9] not in inodes):
        continue
      hex_address, hex_port = fields[1].split(':')
      found[fields[9]] = Listener(_address(hex_address), int(hex_port, 16))
  return found


def socket_inodes(pid: int) -> set[str]:
  """The inodes of the sockets process `pid` holds open (empty when it is gone)."""
  inodes = set()
  try:
    entries = os.listdir(f'/proc/{pid}/fd')
  except OSError:
    return inodes
  for entry in entries:
    try:
      target = os.readlink(f'/proc/{pid}/fd/{entry}')
    except OSError:
      continue
    if target.startswith('socket:['):
      inodes.add(target[len('socket:['):-1])
  return inodes


def process_listeners(pid: int) -> list[Listener]:
  """The listening TCP sockets of process `pid`."""
  return list(listeners(socket_inodes(pid)).values())


def check_worker(pid: int, exited=lambda: False, timeout_seconds: float = 60.0) -> None:
  """Waits until worker `pid` listens (or `exited()` says it is gone, or the timeout passes) and raises
  NotLoopbackError, naming the addresses, when any socket it listens on is reachable beyond loopback."""
  deadline = time.monotonic() + timeout_seconds
  while not (found := process_listeners(pid)) and not exited() and time.monotonic() < deadline:
    time.sleep(0.02)
  wide = [str(listener) for listener in found if not listener.is_loopback]
  if wide:
    raise NotLoopbackError(f'TFF worker {pid} listens beyond loopback ({", ".join(wide)}); it was stopped. The '
                           f'preload library {library_path()} did not take effect.')
