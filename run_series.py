"""Runs `run_experiment` runs one after another in one process: a job of the grid runner
(`experiment/core/matrix_runner.py`), which so pays for starting Python, TensorFlow, TFF and TFF's worker once per
job rather than once per run.

    printf '%s\n' '{"arguments": ["--task=synthetic", "--total_rounds=2"], "log": "/tmp/r.log"}' | python run_series.py

Each line on stdin is one run, a JSON object: `arguments`, the run's `run_experiment` flags, and `log`, the file its
output goes to (stdout and stderr at the descriptor level, so TensorFlow's C++ messages too). When the run ends, one
line `{"status": N, "exits": bool}` (the binary's exit status; whether this process ends after it) goes to stdout.
The process reads the next line after a run that finished (0), was refused (2) or stopped at a non-finite value (3):
these end through the run's own error handling and leave nothing behind. Any other end (a lost worker, an unexpected exception, SIGTERM or SIGHUP) ends the process
with that status after its line, so the next run starts in a fresh one; end of input ends it with status 0.

Between runs the process collects garbage, clears TensorFlow's eager caches (`execution_context.release_eager_caches`)
and, once TFF's worker holds more than `WORKER_RESTART_BYTES`, starts a new worker: a run here trains as in a process
of its own, with identical metrics (`tests/run_series_test.py`).
"""

import contextlib
import gc
import json
import os
import sys
import traceback

# As run_experiment: TensorFlow's C++ INFO and WARNING logs (here and in TFF's worker) stay out of the runs' logs.
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import run_experiment  # pylint: disable=g-bad-import-order
import tensorflow as tf
import tensorflow_federated as tff

from utils import execution_context
from utils import loopback

# TFF's worker keeps what it built for each computation it ran (about 18 MB for a two-round run of the synthetic
# task), so a worker grown beyond this is replaced between runs; a restart costs about a second.
WORKER_RESTART_BYTES = 1 << 30
# Statuses after which the process takes the next run: finished, refused, stopped at a non-finite value.
CONTINUE_STATUSES = (0, 2, 3)


@contextlib.contextmanager
def _output_to(path: str):
  """This process's stdout and stderr (descriptors 1 and 2) write to `path` while the context is open."""
  sys.stdout.flush()
  sys.stderr.flush()
  saved = [os.dup(1), os.dup(2)]
  with open(path, 'w') as log:
    os.dup2(log.fileno(), 1)
    os.dup2(log.fileno(), 2)
  try:
    yield
  finally:
    sys.stdout.flush()
    sys.stderr.flush()
    for descriptor, original in zip((1, 2), saved):
      os.dup2(original, descriptor)
      os.close(original)


def _run(arguments: list[str], log: str) -> int:
  """The exit status of the run of `arguments`, its output in `log`."""
  with _output_to(log):
    try:
      status = run_experiment.run_arguments(arguments)
    except Exception:  # pylint: disable=broad-except
      traceback.print_exc()
      status = 1
  gc.collect()  # The run's TFF values and datasets go now, not during the next run.
  execution_context.release_eager_caches()
  if execution_context.worker_resident_bytes() > WORKER_RESTART_BYTES:
    _restart_worker()
  return status


def _start_worker() -> None:
  """Starts TFF's worker now, with this process's own stdout and stderr (not a run's log)."""
  tff.tensorflow.computation(lambda: tf.constant(0))()


def _restart_worker() -> None:
  execution_context.restart_worker()
  _start_worker()


def serve(requests, replies) -> int:
  """Runs each request line of `requests`, writing its status line to `replies`; the exit status of the process."""
  for line in requests:
    request = json.loads(line)
    status = _run(request['arguments'], request['log'])
    exits = status not in CONTINUE_STATUSES or execution_context.signalled()
    replies.write(json.dumps({'status': status, 'exits': exits}) + '\n')
    replies.flush()
    execution_context.exit_if_signalled()
    if exits:
      return status
  return 0


@execution_context.exits_with_signal_status
def main() -> int:
  execution_context.install()
  try:
    _start_worker()
  except loopback.NotLoopbackError as error:  # Before any run: one line, as a run's own check ends.
    print(f'run_series: error: {error}', file=sys.stderr)
    return 2
  execution_context.freeze_startup_objects()
  replies = os.fdopen(os.dup(1), 'w')
  return serve(sys.stdin, replies)


if __name__ == '__main__':
  sys.exit(main())
