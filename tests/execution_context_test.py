"""Proves that no TFF worker process outlives a process that used `execution_context.install()`."""

import ctypes
import functools
import os
import signal
import subprocess
import sys
import time

from absl.testing import absltest

# A child process that runs one federated computation, prints the pids of its child processes (the TFF worker)
# and then either exits or waits to be killed. argv[1]: 'install' (uses the module) or 'plain' (does not import
# it); argv[2]: 'exit' or 'wait'.
_CHILD = r'''
import os, sys, time
import numpy as np
import tensorflow_federated as tff
if sys.argv[1] == 'install':
  from utils import execution_context
  execution_context.install()

def child_pids():
  pids = []
  for entry in filter(str.isdigit, os.listdir('/proc')):
    try:
      with open(f'/proc/{entry}/stat') as f:
        if int(f.read().rsplit(')', 1)[1].split()[1]) == os.getpid():
          pids.append(int(entry))
    except OSError:
      pass
  return pids

@tff.federated_computation(tff.FederatedType(np.float32, tff.CLIENTS))
def mean(x):
  return tff.federated_mean(x)

assert mean([1.0, 3.0]) == 2.0
print(' '.join(map(str, child_pids())), flush=True)
if sys.argv[2] == 'wait':
  time.sleep(600)
'''

# A child that restarts its worker: the pids before and after, whether the old one still runs, the new one's resident
# bytes and a computation's result on it; first, how many objects a second `freeze_startup_objects` froze (a test's
# in-process runs call it before each run: what a run keeps alive must stay collectable). Its start-up objects are
# frozen first, as a series of runs freezes them, and it holds on to the old context, so that only the restart itself
# can stop the old worker (not the context's collection).
_RESTART_CHILD = r'''
import gc
import os
import numpy as np
import tensorflow_federated as tff
from utils import execution_context
execution_context.install()

@tff.federated_computation(tff.FederatedType(np.float32, tff.CLIENTS))
def mean(x):
  return tff.federated_mean(x)

mean([1.0, 3.0])
execution_context.freeze_startup_objects()
frozen = gc.get_freeze_count()
run_objects = [[] for _ in range(1000)]
execution_context.freeze_startup_objects()
print(gc.get_freeze_count() - frozen)
old_context = tff.framework.get_context_stack().current
old, = execution_context.worker_pids()
execution_context.restart_worker()
result = mean([1.0, 3.0])
new, = execution_context.worker_pids()
print(old, new, os.path.exists(f'/proc/{old}'), execution_context.worker_resident_bytes(), result)
'''

# A child whose SIGTERM lands inside a garbage-collector callback, where Python ignores the handler's SystemExit.
_SWALLOWING_CHILD = r'''
import gc, os, signal
from utils import execution_context
execution_context.install()

def callback(phase, info):
  if phase == 'start':
    gc.callbacks.remove(callback)
    os.kill(os.getpid(), signal.SIGTERM)
    for _ in range(1000):  # Bytecodes inside the callback: the handler runs here.
      pass

gc.callbacks.append(callback)
gc.collect()
print('went on after the signal', flush=True)
execution_context.exit_if_signalled()
print('not reached', flush=True)
'''

# A main whose SIGTERM exit is replaced, on its way out, by another exception (cleanup code that fails).
_REPLACING_CHILD = r'''
import os, signal
from utils import execution_context
execution_context.install()

@execution_context.exits_with_signal_status
def main():
  try:
    os.kill(os.getpid(), signal.SIGTERM)
  finally:
    raise RuntimeError('cleanup failed during the exit')

main()
'''


# Builds client-like datasets with a function of their own (a filter drawing a stateless uniform, as label
# thinning does), 300 at a time, and prints the resident growth (MB) over 1,200 of them with the eager kernels
# released after every 300 and over 1,200 without (the control).
_DATASETS_CHILD = """
import gc
import tensorflow as tf
from utils import execution_context

def rss_mb():
  with open('/proc/self/status') as f:
    return next(int(line.split()[1]) for line in f if line.startswith('VmRSS')) / 1024

def build(i):
  keep, seed = tf.constant([[0.5, 1.0]]), tf.constant([i], tf.int64)
  examples = tf.data.Dataset.zip((tf.data.Dataset.range(100), tf.data.Dataset.range(100)))
  return examples.filter(
      lambda p, y: tf.random.stateless_uniform([], seed=tf.stack([seed[0], p])) < keep[0, y % 2])

def growth(release):
  for _ in range(3):  # Warm-up: TF's one-off allocations.
    datasets = [build(i) for i in range(300)]
    del datasets
    gc.collect()
    execution_context.release_eager_caches()
  started = rss_mb()
  for _ in range(4):
    datasets = [build(i) for i in range(300)]
    del datasets
    gc.collect()
    if release:
      execution_context.release_eager_caches()
  return rss_mb() - started

print(growth(release=True), growth(release=False))
"""

# A child process that converts three Python numbers to tensors and prints the numbers' summed reference counts
# before, after, and after `release_eager_caches`: TensorFlow's scalar cache holds a reference to every number it
# converted (with its tensor, about 780 bytes), so the count shows whether the cache still holds it.
_SCALAR_CACHE_CHILD = """
import sys
import tensorflow as tf
from utils import execution_context

values = [1234.5 + i for i in range(3)]  # Floats made at run time: no other reference to them.
count = lambda: sum(sys.getrefcount(value) for value in values)
before = count()
tensors = [tf.constant(value) for value in values]
converted = count()
execution_context.release_eager_caches()
print(before, converted, count())
"""

# A child process that sends 100 client datasets of 2,000 x 20 floats (160 KB each) to the TFF worker in each of 8
# calls and prints how much the worker's resident size grew after the first call, in MB. argv[1]: 'install' (the
# module's executors: each value disposed on the worker when Python drops it) or 'batched' (TFF's own
# `RemoteExecutor`, which disposes values in batches of 20, the control).
_DISPOSAL_CHILD = """
import os, sys
import numpy as np
import tensorflow as tf
import tensorflow_federated as tff
from tensorflow_federated.python.core.impl.executor_stacks import executor_factory
from tensorflow_federated.python.core.impl.executors import remote_executor
from tests import worker_calls
from utils import execution_context

execution_context.install()
if sys.argv[1] == 'batched':
  executor_factory.remote_executor = remote_executor
sequence_type = tff.SequenceType(tff.TensorType(np.float32, [None, 20]))

@tff.tensorflow.computation(sequence_type)
def local_sum(dataset):
  return dataset.reduce(tf.constant(0.0), lambda total, batch: total + tf.reduce_sum(batch))

total = worker_calls.federated_total(local_sum, sequence_type)
arrays = [np.random.default_rng(i).normal(size=(2000, 20)).astype(np.float32) for i in range(100)]
for call in range(8):
  total([tf.data.Dataset.from_tensor_slices(array).batch(20) for array in arrays])
  if call == 0:
    worker = execution_context.worker_pids(os.getpid())[0]
    first = worker_calls.rss_mb(worker)
print(worker_calls.rss_mb(worker) - first)
"""


@functools.cache
def _restart_child_output() -> tuple[int, int, int, str, int, str]:
  """What `_RESTART_CHILD` prints: objects frozen by a second freeze, old and new worker pids, whether the old one
  still runs, the new one's resident bytes and the result (one child for the tests that read it)."""
  env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), TF_CPP_MIN_LOG_LEVEL='3')
  output = subprocess.run([sys.executable, '-c', _RESTART_CHILD], env=env, capture_output=True, text=True,
                          check=True).stdout.split()
  return int(output[0]), int(output[1]), int(output[2]), output[3], int(output[4]), output[5]


def _is_running(pid: int) -> bool:
  """True if `pid` exists and is not a zombie."""
  try:
    with open(f'/proc/{pid}/stat') as stat_file:
      return stat_file.read().rsplit(')', 1)[1].split()[0] != 'Z'
  except OSError:
    return False


def _wait_until_gone(pids, timeout_seconds=10.0) -> bool:
  deadline = time.monotonic() + timeout_seconds
  while time.monotonic() < deadline:
    if not any(_is_running(pid) for pid in pids):
      return True
    time.sleep(0.05)
  return False


class ExecutionContextTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    # Orphaned workers get re-parented to this process (not to init), so the control test can reap what it kills.
    pr_set_child_subreaper = 36
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_child_subreaper, 1, 0, 0, 0)

  def _start_child(self, mode: str, ending: str) -> tuple[subprocess.Popen, list[int]]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), TF_CPP_MIN_LOG_LEVEL='3')
    # The worker inherits stdout; reading one line (not to EOF) avoids waiting on it.
    child = subprocess.Popen([sys.executable, '-c', _CHILD, mode, ending], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    pids = [int(pid) for pid in child.stdout.readline().split()]
    self.assertNotEmpty(pids, 'the child ran a computation, so TFF must have started a worker')
    return child, pids

  def _kill(self, pids):
    for pid in pids:
      try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
      except (ProcessLookupError, ChildProcessError):
        pass

  def test_worker_outlives_python_without_install(self):
    # The control: shows the problem is real, so the tests below can fail.
    child, pids = self._start_child('plain', 'exit')
    child.wait(timeout=60)
    try:
      self.assertFalse(_wait_until_gone(pids, timeout_seconds=2.0))
    finally:
      self._kill(pids)
      child.stdout.close()
      child.stderr.close()

  def test_no_worker_remains_after_normal_exit(self):
    child, pids = self._start_child('install', 'exit')
    self.assertEqual(child.wait(timeout=60), 0)
    try:
      self.assertTrue(_wait_until_gone(pids))
      self.assertEqual(child.stdout.read(), '')  # EOF: no process holds the pipe any more.
      self.assertNotIn('Traceback', child.stderr.read())
    finally:
      self._kill(pids)
      child.stdout.close()
      child.stderr.close()

  def _signal_and_check(self, mode: str, signum: int, status: int, workers_end: bool):
    child, pids = self._start_child(mode, 'wait')
    child.send_signal(signum)
    self.assertEqual(child.wait(timeout=60), status)
    try:
      self.assertEqual(_wait_until_gone(pids, timeout_seconds=10.0 if workers_end else 2.0), workers_end)
    finally:
      self._kill(pids)
      child.stdout.close()
      child.stderr.close()

  def test_no_worker_remains_after_sigterm(self):
    self._signal_and_check('install', signal.SIGTERM, 128 + signal.SIGTERM, workers_end=True)

  def test_no_worker_remains_after_sigkill(self):
    # SIGKILL runs no cleanup in the child: the worker's parent-death signal ends it.
    self._signal_and_check('install', signal.SIGKILL, -signal.SIGKILL, workers_end=True)

  def test_sigterm_swallowed_by_a_gc_callback_still_ends_the_run(self):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), TF_CPP_MIN_LOG_LEVEL='3')
    child = subprocess.run([sys.executable, '-c', _SWALLOWING_CHILD], env=env, capture_output=True, text=True,
                           timeout=120)
    self.assertEqual(child.returncode, 128 + signal.SIGTERM, child.stderr[-2000:])
    self.assertEqual(child.stdout, 'went on after the signal\n')  # The handler's own exit was lost...
    self.assertIn('Exception ignored', child.stderr)  # ... because it was raised in the callback.

  def test_sigterm_exit_replaced_by_another_exception_still_ends_with_the_signal_status(self):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), TF_CPP_MIN_LOG_LEVEL='3')
    child = subprocess.run([sys.executable, '-c', _REPLACING_CHILD], env=env, capture_output=True, text=True,
                           timeout=120)
    self.assertEqual(child.returncode, 128 + signal.SIGTERM, child.stderr[-2000:])
    self.assertNotIn('cleanup failed', child.stderr)
    unwrapped = subprocess.run([sys.executable, '-c', _REPLACING_CHILD.replace('@execution_context', '#')],
                               env=env, capture_output=True, text=True, timeout=120)
    self.assertEqual(unwrapped.returncode, 1)  # The control: without the wrapper the replacement wins.
    self.assertIn('RuntimeError: cleanup failed', unwrapped.stderr)

  def test_released_eager_kernels_keep_memory_flat_over_many_client_datasets(self):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), TF_CPP_MIN_LOG_LEVEL='3')
    output = subprocess.run([sys.executable, '-c', _DATASETS_CHILD], env=env, capture_output=True, text=True,
                            check=True).stdout
    released, kept = (float(value) for value in output.split())
    self.assertGreater(kept, 60.0)  # TensorFlow's cache: about 0.1 MB a dataset without the release (130 MB).
    self.assertLess(released, 10.0)

  def test_released_scalar_cache_lets_go_of_converted_numbers(self):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), TF_CPP_MIN_LOG_LEVEL='3')
    output = subprocess.run([sys.executable, '-c', _SCALAR_CACHE_CHILD], env=env, capture_output=True, text=True,
                            check=True).stdout
    before, converted, released = (int(value) for value in output.split())
    self.assertEqual(converted, before + 3)  # The cache holds each number converted.
    self.assertEqual(released, before)

  def test_worker_memory_stays_flat_over_calls_with_large_client_datasets(self):
    # The worker holds a call's values until they are disposed; batched, 7 calls' datasets stay (46 MB each here).
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), TF_CPP_MIN_LOG_LEVEL='3')
    ours, batched = (float(subprocess.run([sys.executable, '-c', _DISPOSAL_CHILD, mode], env=env, capture_output=True,
                                          text=True, check=True).stdout.split()[-1])
                     for mode in ('install', 'batched'))
    self.assertGreater(batched, 150.0)
    self.assertLess(ours, 40.0)

  def test_only_the_first_freeze_of_a_process_freezes(self):
    self.assertLess(_restart_child_output()[0], 1000)  # The 1,000 objects made between the two calls stay unfrozen.

  def test_a_restarted_worker_replaces_the_old_one_and_computes(self):
    old, new, old_alive, memory, result = _restart_child_output()[1:]
    self.assertNotEqual(old, new)
    self.assertEqual(old_alive, 'False')  # The old worker is stopped, not left behind.
    self.assertGreater(memory, 10 << 20)  # The new worker's resident memory, read from /proc.
    self.assertEqual(result, '2.0')

  def test_worker_outlives_a_sigkilled_python_without_install(self):
    # The control of the test above.
    self._signal_and_check('plain', signal.SIGKILL, -signal.SIGKILL, workers_end=False)


if __name__ == '__main__':
  absltest.main()
