"""Prints, for each TFF worker, the device type its TensorFlow runs the suite's client work on (CPU or GPU).

    bazel run //experiment:worker_devices -- --workers=host:port,...

(`utils.remote_workers.device_types`: the worker runs a computation whose unpinned op reports its own device.)
"""

import sys

from absl import app
from absl import flags

from utils import remote_workers

_WORKERS = flags.DEFINE_string('workers', 'localhost:8000', 'TFF workers, host:port separated by commas.')
_TIMEOUT = flags.DEFINE_float('worker_timeout', 60.0, 'Seconds to wait for each worker.')


def main(argv):
  del argv  # Unused.
  try:
    addresses = remote_workers.parse(_WORKERS.value)
    remote_workers.wait_until_ready(addresses, _TIMEOUT.value)
  except (ValueError, remote_workers.WorkerUnavailableError) as error:
    print(f'worker_devices: {error}', file=sys.stderr)
    sys.exit(2)
  for address, device in remote_workers.device_types(addresses, _TIMEOUT.value).items():
    print(f'{address}: client work runs on {device}')


if __name__ == '__main__':
  app.run(main)
