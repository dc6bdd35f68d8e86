"""The TFF worker that tools/start_worker.sh serves on this host: on loopback, checked, and alone on its port.

    python -m utils.worker_host --port=P

Starts TFF's `worker_binary` as every worker of the suite starts (`utils.execution_context.start_worker_process`:
the loopback preload, two malloc arenas, the parent-death signal) and then checks, rather than assumes:
- before start, that the preload library is a shared library at all (the loader ignores an empty or damaged one with
  a warning, and the worker would bind every interface), and that no socket of this host listens on port P (TFF's
  worker binds with SO_REUSEPORT, so a second worker on a port succeeds and connections reach either);
- after start, that the worker listens on loopback only (`utils.loopback.check_worker`, the check a run makes of its
  own worker) and that no other process took the port meanwhile.
Any failure stops the worker and ends in one line on stderr, exit status 2. Once both checks pass it prints the
address to give `--workers`, serves until SIGINT, SIGTERM or SIGHUP (passed on to the worker), and exits with the
worker's status.
"""

import argparse
import signal
import socket
import sys
from typing import Sequence

from utils import loopback
from utils import stderr_filter

_USAGE_STATUS = 2
_ELF_MAGIC = b'\x7fELF'


def check_library() -> int:
  """0 when the loopback preload library is there and an ELF file; else 2, after one line on stderr."""
  path = loopback.library_path()
  try:
    with open(path, 'rb') as f:
      if f.read(len(_ELF_MAGIC)) == _ELF_MAGIC:
        return 0
    problem = 'is not a shared library (empty or damaged)'
  except OSError:
    problem = 'is missing'
  print(f'start_worker: {path} {problem}, so a TFF worker would listen on every interface; delete it if it is there '
        'and run tools/bootstrap.sh to build it again.', file=sys.stderr)
  return _USAGE_STATUS


def _shown(listener: loopback.Listener) -> str:
  mapped = getattr(listener.address, 'ipv4_mapped', None)  # An IPv6 socket that takes IPv4 shows its IPv4 address.
  return f'{mapped}:{listener.port}' if mapped else str(listener)


def port_listeners(port: int) -> dict[str, loopback.Listener]:
  """Socket inode -> listener of every TCP socket of this host's network namespace listening on `port`."""
  return {inode: found for inode, found in loopback.listeners().items() if found.port == port}


def check_port(port: int) -> int:
  """0 when no socket of this host listens on `port`; else 2, after one line on stderr naming the listeners."""
  if not port_listeners(port):
    return 0
  listening = ', '.join(_shown(found) for found in port_listeners(port).values())
  print(f'start_worker: port {port} is already in use ({listening}): a second worker there would share its '
        'connections; stop that process or choose another --port.', file=sys.stderr)
  return _USAGE_STATUS


def serve(port: int, user: str) -> int:
  """Starts the worker on `port`, checks it and waits for it; the exit status (2 with one line on stderr when a
  check fails)."""
  if check_library() or check_port(port):
    return _USAGE_STATUS
  with stderr_filter.dropping(stderr_filter.IMPORT_NOISE):  # TensorFlow and TFF, once the port is free.
    from utils import remote_workers  # pylint: disable=g-import-not-at-top
  try:
    worker = remote_workers.start_local_worker(port)
  except loopback.NotLoopbackError as error:
    print(f'start_worker: {error}', file=sys.stderr)
    return _USAGE_STATUS
  others = set(port_listeners(port)) - loopback.socket_inodes(worker.pid)
  if others:
    worker.terminate()
    worker.wait()
    print(f'start_worker: another process started listening on port {port} with this worker; both would share '
          'its connections, so this one was stopped; choose another --port.', file=sys.stderr)
    return _USAGE_STATUS
  print(f'TFF worker listening on loopback, port {port}: run_experiment.py --workers=ssh://{user}@'
        f'{socket.gethostname()}:{port} from another host (an SSH tunnel), --workers=localhost:{port} from this one',
        flush=True)
  for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
    signal.signal(signum, lambda received, frame: worker.send_signal(received))
  status = worker.wait()
  return 128 - status if status < 0 else status  # A worker ended by a signal, as a shell reports it.


def main(argv: Sequence[str]) -> int:
  parser = argparse.ArgumentParser(prog='start_worker')
  parser.add_argument('--port', type=int, required=True)
  parser.add_argument('--user', required=True)
  args = parser.parse_args(argv)
  return serve(args.port, args.user)


if __name__ == '__main__':
  sys.exit(main(sys.argv[1:]))
