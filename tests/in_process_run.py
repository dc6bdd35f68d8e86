"""run_experiment's run in the test's own process, for tests that make many short runs.

Each run parses its arguments into flags of its own (`run_experiment.define_flags` on a fresh `flags.FlagValues`,
absl's global FLAGS untouched), turns them into an `experiment.core.assembly.ExperimentConfig` and runs it as the
binary does (`run_experiment.run`). Running in-process spares each run the interpreter, TensorFlow and TFF start-up of a subprocess (about 5 of
its 10 seconds here); the binary as users run it is tested in run_experiment_test. Call `start_worker()` once
first (in `setUpClass`): TFF starts its worker with this process's stdout and stderr, which the runs redirect to
buffers without file descriptors. Runs on several workers use `start_local_workers` and compare with the local run
by `assert_same_rounds`.
"""

import contextlib
import csv
import gc
import io
import os
import subprocess
import warnings

from absl import flags
import numpy as np
import portpicker
import tensorflow as tf
import tensorflow_federated as tff

import run_experiment
from utils import execution_context
from utils import remote_workers


def start_worker() -> None:
  execution_context.install()
  tff.tensorflow.computation(lambda: tf.constant(0))()


def run(args) -> tuple[int, str]:
  """run_experiment's main with `args` (other flags at their defaults): (exit status, stderr)."""
  status, _, stderr = run_with_stdout(args)
  return status, stderr


def run_with_stdout(args) -> tuple[int, str, str]:
  """As `run`: (exit status, stdout, stderr)."""
  flag_values = flags.FlagValues()
  run_experiment.define_flags(flag_values)
  flag_values(['run_experiment', *args])
  stdout, stderr = io.StringIO(), io.StringIO()
  gc.collect()  # What earlier runs left (and any warning its collection prints) stays out of this run's stderr.
  # The binary's warning filters: Python ignores DeprecationWarnings raised outside __main__ (Keras' unseeded
  # initializers raise one), which the test runner shows.
  with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr), warnings.catch_warnings():
    warnings.simplefilter('ignore', DeprecationWarning)
    try:
      run_experiment.run(flag_values)
      status = 0
    except SystemExit as exit_:
      status = exit_.code
  return status, stdout.getvalue(), stderr.getvalue()


def metrics_rows(output_dir: str) -> list[dict]:
  with open(os.path.join(output_dir, 'metrics.csv')) as f:
    return list(csv.DictReader(f))


def start_local_workers(count: int) -> tuple[list[subprocess.Popen], list[str]]:
  """`count` TFF worker processes on 127.0.0.1 (stop them with `stop_workers`): (processes, addresses)."""
  ports = [portpicker.pick_unused_port() for _ in range(count)]
  workers = [remote_workers.start_local_worker(port, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
             for port in ports]
  addresses = [f'127.0.0.1:{port}' for port in ports]
  remote_workers.wait_until_ready(addresses, timeout_seconds=30)
  return workers, addresses


def stop_workers(workers) -> None:
  for worker in workers:
    worker.kill()
    worker.wait()


def assert_same_rounds(test, local: list[dict], remote: list[dict], name: str) -> None:
  """Every metrics.csv row of a run on several workers equals the local run's: counts and accuracies exactly, other
  values within 1e-6 (the workers' partial sums are added in another order)."""
  test.assertEqual(len(remote), len(local), name)
  for local_row, remote_row in zip(local, remote):
    test.assertEqual(set(local_row), set(remote_row), name)
    for key in sorted(set(local_row) - {'round_seconds'}):
      message = f'{name} round {local_row["round"]}: {key}'
      if local_row[key] == '' or key.endswith('accuracy') or float(local_row[key]).is_integer():
        test.assertEqual(local_row[key], remote_row[key], message)
      else:
        np.testing.assert_allclose(float(remote_row[key]), float(local_row[key]), rtol=1e-6, atol=1e-6,
                                   err_msg=message)
