"""run_experiment's run in the test's own process, for tests that make many short runs.

Each run is `run_experiment.run_arguments`: its arguments parsed into flags of its own (absl's global FLAGS
untouched) and run as the binary runs them, a bad flag ending it with status 2 and one line on stderr. Running in-process spares each run the interpreter, TensorFlow and TFF start-up of a subprocess (about 5 of
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
import tempfile
from typing import Optional
from unittest import mock
import warnings

from absl import flags
import numpy as np
import portpicker
import tensorflow as tf
import tensorflow_federated as tff

from algorithms.core import method
from experiment.core import assembly
from experiment.core import training_loop
from periodic_shift import scenarios
import run_experiment
from utils import execution_context
from utils import remote_workers


def start_worker() -> None:
  execution_context.install()
  tff.tensorflow.computation(lambda: tf.constant(0))()
  execution_context.freeze_startup_objects()


def run(args) -> tuple[int, str]:
  """run_experiment's main with `args` (other flags at their defaults): (exit status, stderr)."""
  status, _, stderr = run_with_stdout(args)
  return status, stderr


def run_with_stdout(args) -> tuple[int, str, str]:
  """As `run`: (exit status, stdout, stderr)."""
  stdout, stderr = io.StringIO(), io.StringIO()
  gc.collect()  # What earlier runs left (and any warning its collection prints) stays out of this run's stderr.
  # The binary's warning filters: Python ignores DeprecationWarnings raised outside __main__ (Keras' unseeded
  # initializers raise one), which the test runner shows.
  with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr), warnings.catch_warnings():
    warnings.simplefilter('ignore', DeprecationWarning)
    status = run_experiment.run_arguments(args)
  return status, stdout.getvalue(), stderr.getvalue()


def smoke_args(scenario: str, seed: int = 0) -> list[str]:
  """The flags of a two-round run of `scenario` on the synthetic task with its `SMOKE_RUN` flags
  (`periodic_shift.scenario.SmokeRun`), every method with two branches (a smoke run checks the plumbing, the same at
  any pool size; a method's own larger default pool would only cost time)."""
  settings = scenarios.module(scenario).SMOKE_RUN.flags
  return ['--task=synthetic', f'--scenario={scenario}', '--clients_per_round=3', '--total_rounds=2', '--period=2',
          '--num_branches=2',
          '--rounds_per_eval=2', '--rounds_per_checkpoint=2', '--eval_batch_size=500', f'--seed={seed}',
          *[f'--{name}={value}' for name, value in settings.items()]]


class _Built(Exception):
  pass


def build_only(args) -> tuple[int, str, Optional[method.Algorithm]]:
  """run_experiment's main with `args`, stopped once the method is built, before its first round: (exit status,
  stderr, the built `Algorithm`; None when the run ended before)."""
  built = {}

  def capture(algorithm, *unused_args, **unused_kwargs):
    built['algorithm'] = algorithm
    raise _Built()

  with mock.patch.object(training_loop, 'run', capture):
    try:
      status, stderr = run(args)
    except _Built:
      return 0, '', built['algorithm']
  return status, stderr, None


def build_on_first_scenario(algorithm: str, *extra: str) -> tuple[str, method.Algorithm]:
  """(scenario, the built `Algorithm`): `algorithm` built on the first scenario of the registry it does not refuse,
  with that scenario's smoke settings and `extra` flags; AssertionError when every scenario refuses it or it fails
  otherwise."""
  for scenario in scenarios.SCENARIOS:
    status, stderr, built = build_only([*smoke_args(scenario), f'--algorithm={algorithm}', '--clients_per_round=4',
                                        f'--root_output_dir={tempfile.mkdtemp()}', *extra])
    if built is not None:
      return scenario, built
    if status != 2 or f'error: {algorithm} ' not in stderr:
      raise AssertionError(f'{algorithm} on {scenario} was not built: {status} {stderr[-2000:]}')
  raise AssertionError(f'every scenario refuses {algorithm}')


def built_scenario(args):
  """The scenario a run of `args` trains under, built as the run builds it (without a run directory)."""
  flag_values = flags.FlagValues()
  run_experiment.define_flags(flag_values)
  flag_values(['run_experiment', *args, '--experiment_name=unused'])
  return assembly.build_data(assembly.resolve(run_experiment.experiment_config(flag_values))).scenario


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
