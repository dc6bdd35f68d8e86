"""The one way every entry point sets up TFF's execution context and tears it down.

TFF 0.87 executes computations in a C++ `worker_binary` that its Python side starts as a child process on first
use. TFF never stops that child reliably: without help it outlives the Python process, keeps the parent's stdout
and stderr open (so `python x.py | tail` never returns) and holds a port. The object that owns it (a
`ServiceManager` in TFF's executor factory) tries to stop it in `__del__` with SIGINT and an unbounded `wait()`,
which hangs when the worker has served a long run, and which raises a traceback when it runs during interpreter
teardown.

Importing this module registers one exit handler that, while the interpreter is still whole:
  1. stops every worker that TFF's service managers own (SIGTERM, then SIGKILL after a grace period) and marks
     the managers as owning no process, so their `__del__` has nothing left to do;
  2. drops TFF's execution contexts, so the managers are collected now rather than during teardown;
  3. ends any other `worker_binary` child of this process.
`install()` sets TFF's synchronous local C++ context and turns SIGTERM and SIGHUP (what Bazel and CI send on a
timeout) into a normal exit, so the handler runs then too; Ctrl-C already exits normally. The signal handler raises
`SystemExit` wherever the main thread is; when that is a garbage-collector callback or a `__del__` (jax registers a
gc callback), Python prints "Exception ignored" and carries on (2 of 28 CFL runs sent SIGTERM mid-run exited 0 and 1
instead of 143), and code that the exit unwinds through may raise an exception of its own in its place (a pFedEM run
in CI exited 1). So the handler also records the signal, loops call `exit_if_signalled()` at safe points, and a
binary's main wrapped in `exits_with_signal_status` ends with 128 + signal whatever its way out was.

Every worker this module starts listens on loopback only (`utils.loopback`: a preloaded library turns the
worker's wildcard bind into a loopback bind, and the worker's listening sockets are checked before it is used; a
worker that listens wider is stopped with `loopback.NotLoopbackError`). TFF's worker has no authentication, so a
port reachable from the network would let anyone there run code as this user.

A process killed with SIGKILL runs no cleanup. For that case `install()` makes TFF start its worker with the
kernel's parent-death signal (Linux `prctl(PR_SET_PDEATHSIG, SIGKILL)`), so the worker ends with the thread that
started it: TFF's execution-context thread, which lives as long as the process (tested with kill -9).

The worker also runs with `MALLOC_ARENA_MAX=2` (unless the environment sets it): with glibc's default of up to
8 malloc arenas per core, the worker's many threads fragment memory and its resident size grew by 24.5% between
rounds 100 and 2,000 of the synthetic Vanilla run (`benchmarks/soak_memory`), which two arenas avoid
(docs/reliability.md). `install()` caps this process's own arenas at two as well (glibc's `mallopt`,
for the arenas its threads create from then on; unless the environment sets `MALLOC_ARENA_MAX`): with the state
kept on the worker and evaluations on a thread, the driver grew by 12.0% between rounds 100 and 600 of that run
with the default arenas and by 1.1% with two.

TensorFlow 2.14 keeps a kernel in its eager context's cache for every dataset op built in Python with a function of
its own (`Dataset.filter` and `map` trace a new, uniquely named one each time) and never evicts it: 60-250 KB per
client dataset (native memory), so a run whose clients' datasets carry such functions (label thinning,
`tasks.task.Task._thinned`) grew with every round: ShiftEx on `windowed` by about 83 MB at each census round (330 of
its 660 parties thinned). It also keeps, in a scalar cache, the tensor of every distinct Python number converted
to one (`tf.constant(7)`, a metric value written to TensorBoard, a client dataset's shuffle seed), so that the same
number converts faster the next time: about 780 bytes of native memory for each new value (16 bytes for a value
seen before), never evicted; a long run's driver converts new numbers every round. `release_eager_caches()` clears
both (TF's own `clear_kernel_cache` and `TFE_ClearScalarCache`); the training loop calls it after writing a round's
row when no evaluation is in flight (`training_loop._RowRelease`). The caches hold nothing but kernels and
immutable tensors; clearing the kernels also restarts stateful kernels (an op-seeded random op run eagerly in this
process would repeat its sequence), and the driver runs none: metrics and checkpoint variables are unchanged
(compared on short runs of ShiftEx, FedTEM, FedGMM, FedEvp, FedDrift and pFedEM, and again with the scalar cache).

TFF's `RemoteExecutor` asks the worker to dispose of the values Python has dropped in batches of 20, and the worker
keeps a value (a call's argument with its clients' datasets, its result) until then: with a few values dropped per
call, the datasets of the last 7 calls stayed in the worker (100 client datasets of 160 KB a call: +46 MB a call, to
+284 MB after 8 calls). Each executor keeps its own batch: ShiftEx's census rounds, the only calls on its executor
for 660 parties, left their values in the worker until later censuses had dropped 20. `install()` makes TFF create
its executors with `remote_executor` (a batch of one: each value is disposed of when Python drops it; +19 MB after
the same 8 calls), as does `utils.remote_workers` for remote workers.

Computations are compiled by `compile_for_simulation`: TFF's native compilation, after replacing TFF's secure-sum
intrinsics (`tff.federated_secure_sum_bitwidth` and its kin, which `tff.learning.secure_aggregator` uses) with their
plain bodies, as TFF's test backend does (`tff.backends.test`): TFF's C++ runtime has no secure-aggregation protocol,
so a simulation computes what the protocol would output, the sum of the clients' bounded, quantized values, without
the cryptography that hides the summands. Computations without those intrinsics compile as before (the check reads
the computation's serialized proto, under 10 ms).

Binaries call `install()` at the start of `main`; tests call it before `tf.test.main()`, and benchmarks do the
same.
"""

import atexit
import ctypes
import functools
import gc
import os
import signal
import subprocess
import sys
import time
import types
from typing import Callable, Optional

import tensorflow_federated as tff
from tensorflow.python import pywrap_tfe  # pylint: disable=g-direct-tensorflow-import
from tensorflow.python.eager import context as tf_context  # pylint: disable=g-direct-tensorflow-import
from tensorflow_federated.python.core.backends.test import compiler as test_compiler
from tensorflow_federated.python.core.impl.executor_stacks import executor_factory
# TFF exports `set_default_context` but not the no-default variant, which holds no executor.
from tensorflow_federated.python.core.impl.context_stack import set_default_context as tff_default_context

from utils import fast_serialization
from utils import loopback

_WORKER_NAME = 'worker_binary'
_installed = False


def _child_pids(parent_pid: int) -> list[int]:
  """Pids of the live processes whose parent is `parent_pid`, read from /proc."""
  children = []
  for entry in os.listdir('/proc'):
    if not entry.isdigit():
      continue
    try:
      with open(f'/proc/{entry}/stat', 'rb') as stat_file:
        stat = stat_file.read().decode(errors='replace')
    except OSError:
      continue
    # The command name is in parentheses and may contain spaces; the ppid is the second field after it.
    fields = stat[stat.rfind(')') + 2:].split()
    if int(fields[1]) == parent_pid:
      children.append(int(entry))
  return children


def _is_worker(pid: int) -> bool:
  try:
    with open(f'/proc/{pid}/cmdline', 'rb') as cmdline_file:
      return _WORKER_NAME.encode() in cmdline_file.read()
  except OSError:
    return False


def worker_pids(parent_pid: Optional[int] = None) -> list[int]:
  """Pids of the TFF worker processes started by `parent_pid` (default: this process)."""
  parent_pid = os.getpid() if parent_pid is None else parent_pid
  return [pid for pid in _child_pids(parent_pid) if _is_worker(pid)]


def _wait_for_exit(pid: int, timeout_seconds: float) -> bool:
  deadline = time.monotonic() + timeout_seconds
  while time.monotonic() < deadline:
    try:
      finished, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
      return True  # Already reaped.
    if finished == pid:
      return True
    time.sleep(0.02)
  return False


def _stop(pid: int) -> None:
  """SIGTERM, then SIGKILL if `pid` has not exited within 2 seconds; reaps it."""
  try:
    os.kill(pid, signal.SIGTERM)
    if not _wait_for_exit(pid, timeout_seconds=2.0):
      os.kill(pid, signal.SIGKILL)
      _wait_for_exit(pid, timeout_seconds=5.0)
  except ProcessLookupError:
    pass


def _disarm_service_managers() -> None:
  """Stops the workers of TFF's `ServiceManager`s and leaves the managers with no process to stop."""
  gc.unfreeze()  # `gc.get_objects` lists no frozen object (`freeze_startup_objects`), and the first manager is one.
  for manager in gc.get_objects():
    if type(manager).__name__ == 'ServiceManager' and type(manager).__module__.endswith('executor_factory'):
      process = getattr(manager, '_process', None)
      if process is not None and process.returncode is None:
        _stop(process.pid)
        process.returncode = -signal.SIGTERM  # Reaped by `_stop`; tells `Popen` not to wait for it.
      manager._process = None  # pylint: disable=protected-access
      manager._stub = None  # pylint: disable=protected-access


def shutdown() -> None:
  """Ends every TFF worker process started by this process."""
  for pid in worker_pids():
    _stop(pid)


def _release_and_shutdown() -> None:
  """The exit handler: steps 1-3 of the module docstring."""
  _disarm_service_managers()
  tff_default_context.set_no_default_context()
  gc.collect()
  shutdown()


atexit.register(_release_and_shutdown)


_PR_SET_PDEATHSIG = 1
_M_ARENA_MAX = -8  # glibc's mallopt parameter (malloc.h).


def remote_executor(stub, **kwargs) -> tff.framework.RemoteExecutor:
  """TFF's `RemoteExecutor` on `stub` that disposes of each value on the worker as soon as this process drops it
  (module docstring), instead of in batches of 20."""
  return tff.framework.RemoteExecutor(stub, dispose_batch_size=1, **kwargs)


def _die_with_parent() -> None:
  """Runs in the forked worker before exec: the kernel sends it SIGKILL when its parent thread ends."""
  ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


class _WorkerPopen(subprocess.Popen):
  """`subprocess.Popen` for TFF's worker, with the parent-death signal set, two malloc arenas and the loopback
  preload (`utils.loopback`), returning once the worker listens, and only on loopback (a subclass, so TFF's
  isinstance checks hold)."""

  def __init__(self, args, **kwargs):
    kwargs.setdefault('preexec_fn', _die_with_parent)
    kwargs['env'] = loopback.preload_environment(kwargs.get('env'))
    kwargs['env'].setdefault('MALLOC_ARENA_MAX', '2')
    super().__init__(args, **kwargs)
    try:
      loopback.check_worker(self.pid, exited=lambda: self.poll() is not None)
    except loopback.NotLoopbackError:
      _stop(self.pid)
      self.returncode = -signal.SIGTERM
      raise


def start_worker_process(args, **popen_kwargs) -> subprocess.Popen:
  """A `worker_binary` process with `args` that ends with this process's starting thread, runs with two malloc
  arenas and listens on loopback only, as TFF's own worker does here (for the remote workers that tests and
  benchmarks start on this host)."""
  return _WorkerPopen(args, **popen_kwargs)


_received_signal: Optional[int] = None


def _exit_on_signal(signum, frame):
  del frame  # Unused.
  global _received_signal
  _received_signal = signum
  raise SystemExit(128 + signum)  # Runs `finally` blocks and the exit handler; the status names the signal.


def signalled() -> bool:
  """Whether SIGTERM or SIGHUP arrived (after `install()`)."""
  return _received_signal is not None


def exit_if_signalled() -> None:
  """Raises `SystemExit(128 + signum)` if SIGTERM or SIGHUP arrived, also when its handler's exit was swallowed."""
  if _received_signal is not None:
    raise SystemExit(128 + _received_signal)


def exits_with_signal_status(main: Callable) -> Callable:
  """`main` ending with `SystemExit(128 + signum)` whenever SIGTERM or SIGHUP arrived while it ran, whether it
  returned, raised that exit or raised another exception in its place (a binary's `main`, for `app.run`)."""

  @functools.wraps(main)
  def wrapped(*args, **kwargs):
    try:
      return main(*args, **kwargs)
    finally:
      exit_if_signalled()

  return wrapped


def compile_for_simulation(computation: tff.Computation):
  """TFF's native compilation of `computation`, its secure-sum intrinsics first replaced by their plain bodies (see
  the module docstring)."""
  if b'federated_secure' in tff.framework.ConcreteComputation.get_proto(computation).SerializeToString():
    computation = test_compiler.replace_secure_intrinsics_with_bodies(computation)
  return tff.backends.native.desugar_and_transform_to_native(computation)


def release_eager_caches() -> None:
  """Clears what TensorFlow's eager context keeps for good (module docstring): its kernel cache, one kernel per
  dataset function built in this process, and its scalar cache, one tensor for every distinct Python number ever
  converted to one. Call it where no TF op runs on another thread."""
  tf_context.context().clear_kernel_cache()
  pywrap_tfe.TFE_ClearScalarCache()


def _set_local_context() -> None:
  """A new synchronous local C++ context; its worker starts at its first computation."""
  tff_default_context.set_default_context(tff.framework.SyncExecutionContext(
      executor_fn=executor_factory.local_cpp_executor_factory(), compiler_fn=compile_for_simulation,
      transform_args=tff.tensorflow.transform_args, transform_result=tff.tensorflow.transform_result))


@functools.cache
def freeze_startup_objects() -> None:
  """Puts every object alive now out of the garbage collector's sight (Python's `gc.freeze`): what the imports and
  the worker's start made (modules, TensorFlow's and TFF's registries: half a million objects) lives as long as the
  process, and a process that makes many runs (`run_series.py`, the tests' in-process runs) collects fully after each
  run and many times while tracing, each time walking all of them again. A frozen object in a reference cycle is never
  freed, so only a process's first call freezes, after start-up and before the first run: a later call would freeze a
  run's objects (its kept build), which must stay collectable. `restart_worker` unfreezes them (TFF's worker manager
  is one), and they stay unfrozen after it."""
  gc.collect()
  gc.freeze()


def restart_worker() -> None:
  """Stops this process's TFF worker and sets a new context, whose worker starts at its next computation (after
  `install()`). The worker keeps what it built for every computation it has run, which only a new worker frees."""
  _disarm_service_managers()
  tff_default_context.set_no_default_context()
  gc.collect()
  _set_local_context()


def worker_resident_bytes() -> int:
  """The resident memory of this process's TFF workers, bytes (0 when none runs)."""
  total = 0
  for pid in worker_pids():
    try:
      with open(f'/proc/{pid}/status') as f:
        total += next(int(line.split()[1]) for line in f if line.startswith('VmRSS:')) * 1024
    except (OSError, StopIteration):
      pass
  return total


def install() -> None:
  """Sets TFF's sync local C++ execution context and guarantees its worker ends with this process.

  Idempotent. Computations run in a single worker that this process owns. Values are sent to it with the in-place
  serializers of `fast_serialization` (identical protos, without TFF's per-nesting-level copies).
  """
  global _installed
  if _installed:
    return
  if sys.platform.startswith('linux'):
    executor_factory.subprocess = types.SimpleNamespace(Popen=_WorkerPopen)
    if 'MALLOC_ARENA_MAX' not in os.environ:
      ctypes.CDLL(None).mallopt(_M_ARENA_MAX, 2)
  executor_factory.remote_executor = types.SimpleNamespace(RemoteExecutor=remote_executor)
  _set_local_context()
  fast_serialization.install()
  for signum in (signal.SIGTERM, signal.SIGHUP):
    if signal.getsignal(signum) == signal.SIG_DFL:
      signal.signal(signum, _exit_on_signal)
  _installed = True
