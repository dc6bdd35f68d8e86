"""run_experiment's main in the test's own process, for tests that make many short runs.

Calling `main` in-process spares each run the interpreter, TensorFlow and TFF start-up of a subprocess (about 5 of
its 10 seconds here); the binary as users run it is tested in run_experiment_test. Call `start_worker()` once
first (in `setUpClass`): TFF starts its worker with this process's stdout and stderr, which the runs redirect to
buffers without file descriptors.
"""

import contextlib
import csv
import io
import os
import warnings

from absl import flags
import tensorflow as tf
import tensorflow_federated as tff

import run_experiment
from utils import execution_context


def start_worker() -> None:
  execution_context.install()
  tff.tensorflow.computation(lambda: tf.constant(0))()


def run(args) -> tuple[int, str]:
  """run_experiment's main with `args` (other flags at their defaults): (exit status, stderr)."""
  status, _, stderr = run_with_stdout(args)
  return status, stderr


def run_with_stdout(args) -> tuple[int, str, str]:
  """As `run`: (exit status, stdout, stderr)."""
  for flag in flags.FLAGS.flags_by_module_dict().get(run_experiment.__name__, []):
    flag.unparse()
  flags.FLAGS(['run_experiment', *args])
  stdout, stderr = io.StringIO(), io.StringIO()
  # The binary's warning filters: Python ignores DeprecationWarnings raised outside __main__ (Keras' unseeded
  # initializers raise one), which the test runner shows.
  with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr), warnings.catch_warnings():
    warnings.simplefilter('ignore', DeprecationWarning)
    try:
      run_experiment.main(['run_experiment'])
      status = 0
    except SystemExit as exit_:
      status = exit_.code
  return status, stdout.getvalue(), stderr.getvalue()


def metrics_rows(output_dir: str) -> list[dict]:
  with open(os.path.join(output_dir, 'metrics.csv')) as f:
    return list(csv.DictReader(f))
