"""Runs a grid's runs (`experiment.core.grid`) N at a time, resumably, on N long-lived `run_series.py` processes.

Each of the N jobs runs its runs one after another in one process (`run_series.py`: one run per line of its
stdin, `run_experiment`'s run in process), so a grid pays for starting Python, TensorFlow, TFF and TFF's worker once
per job rather than once per run. A run that ends unexpectedly (a lost worker, an exception, a crash) ends its
process too; the job's next run starts in a fresh one. A process's own output is in `<root>/.matrix/job-<i>.log`.

Each run writes to `<root>/<run name>/` as `run_experiment` does by itself, so a rerun of the matrix
- skips finished runs (those with a `summary.json`),
- resumes interrupted ones from their checkpoints (`run_experiment` resumes a directory of the same configuration
  and refuses one of another, so a changed grid never mixes results into an old run),
- reruns failed ones.
A run's output goes to `<root>/.matrix/<run name>.log`, and a finished run's provenance (the grid's command and the
repository's commit it ran from, `provenance`) to `<root>/.matrix/<run name>.provenance.json`: a root resumed from
another commit holds runs of both, each with its own. A run that fails is reported with its one-line error and
the others go on: exit status 2 is a configuration `run_experiment` refuses before any compute (a method that does
not support a scenario, a bad flag), any other status a failure. After every run a line names it with its duration
and headline metric (`headline`), and a progress line says how many are done, running, left and failed, with the
time left estimated from the runs finished in this invocation (never less than a minute while runs are going); the
last line gives the matrix's elapsed time.

Stopping: SIGINT, SIGTERM or SIGHUP stop the jobs' processes with SIGTERM (each running run checkpoints what it has
and its process exits) and end the matrix; each process also gets SIGTERM from the kernel if the matrix process dies
without cleanup (SIGKILL), so no orphan keeps writing to a directory a rerun resumes, and a killed job loses only
the run it was running.

Several matrices may share a root (a grid split by seeds, a second terminal, a scheduler's retry): a matrix claims
each run before sending it to a job (`<root>/.matrix/<run name>.lock`, `utils.directory_lock`, held until the run
ends), and a run another matrix has claimed, or whose directory another process holds (a run started by hand), is
skipped as `in use`, neither run nor counted as failed; a later rerun finds it finished.
"""

import ctypes
import dataclasses
import datetime
import json
import os
import select
import signal
import subprocess
import sys
import time
from typing import Callable, Optional, Sequence

from experiment.core import grid as grid_lib
from utils import directory_lock
from utils import strict_json

LOG_DIR = '.matrix'
SUMMARY = 'summary.json'
REFUSED_STATUS = 2
_PR_SET_PDEATHSIG = 1


class MatrixError(RuntimeError):
  """A matrix that cannot start (its root cannot be written); its message is one line."""


@dataclasses.dataclass
class Outcome:
  """How one run ended in this invocation: `finished`, `refused` (exit status 2), `failed`, `stopped`, or `in use`
  (another matrix or process runs it: not started here)."""
  name: str
  status: str
  seconds: float
  message: str = ''


def is_finished(root: str, name: str) -> bool:
  return os.path.exists(os.path.join(root, name, SUMMARY))


def _die_with_parent() -> None:
  """Runs in the forked child before exec: the kernel sends it SIGTERM when the matrix process ends."""
  ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def error_line(log_path: str) -> str:
  """The run's one-line error: the last `... error: ...` line of its log, else its last non-empty line."""
  try:
    with open(log_path, errors='replace') as f:
      lines = [line.strip() for line in f if line.strip()]
  except OSError:
    return 'no log'
  errors = [line for line in lines if 'error: ' in line]
  return (errors or lines or ['no output'])[-1]


# The metrics a finished run's line may show after its scenario's headline metric (summary.json's
# `headline_metric`), the first its summary has.
HEADLINE_METRICS = ('test_accuracy_last_period_mean', 'test_accuracy', 'personalized_accuracy',
                    'target_server_accuracy', 'test_mixture_accuracy')


def headline(root: str, name: str) -> str:
  """`<metric> <value>` of a finished run's summary.json: its scenario's headline metric, else the first of
  `HEADLINE_METRICS` it has; '' when it has none."""
  try:
    with open(os.path.join(root, name, SUMMARY)) as f:
      summary = strict_json.load(f)
  except (OSError, ValueError):
    return ''
  final = summary.get('final_metrics', {})
  candidates = (summary.get('headline_metric'),) + HEADLINE_METRICS
  metric = next((metric for metric in candidates if isinstance(final.get(metric), (int, float))), None)
  return f'{metric} {final[metric]:.4f}' if metric else ''


def _duration(seconds: float) -> str:
  """`1h05m`, `12m03s` or `45s`."""
  seconds = int(round(seconds))
  if seconds >= 3600:
    return f'{seconds // 3600}h{seconds % 3600 // 60:02d}m'
  return f'{seconds // 60}m{seconds % 60:02d}s' if seconds >= 60 else f'{seconds}s'


class _Stop(Exception):

  def __init__(self, signum: int):
    super().__init__(signum)
    self.signum = signum


def _raise_stop(signum, frame):
  del frame  # Unused.
  raise _Stop(signum)


def _claim(root: str, name: str) -> Optional[directory_lock.DirectoryLock]:
  """This matrix's claim on run `name` (held until the run ends), or None when another matrix has claimed it or
  another process holds its directory."""
  if directory_lock.holder(os.path.join(root, name)) is not None:
    return None
  try:
    return directory_lock.DirectoryLock(os.path.join(root, LOG_DIR), name=f'{name}.lock').acquire()
  except directory_lock.DirectoryInUse:
    return None


class _Job:
  """One of the matrix's N jobs: a `run_series.py` process (started when a run needs one, again after it ended)
  and the run it is running."""

  def __init__(self, command: Sequence[str], log_path: str, env: Optional[dict]):
    self._command, self._log_path, self._env = list(command), log_path, env
    self.process: Optional[subprocess.Popen] = None
    self.run: Optional[grid_lib.Run] = None
    self.claim: Optional[directory_lock.DirectoryLock] = None
    self.run_log = ''
    self.started = 0.0
    self._received = b''

  def start(self, run: grid_lib.Run, root: str, claim: directory_lock.DirectoryLock) -> None:
    """Sends `run` (claimed by `claim`, released when the run ends) to this job's process, starting one if it has
    none running."""
    if self.process is None or self.process.poll() is not None:
      with open(self._log_path, 'a') as log:  # The process's own output, outside its runs' logs.
        self.process = subprocess.Popen(self._command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                                        env=self._env, preexec_fn=_die_with_parent)
      self._received = b''
    self.run, self.claim, self.started = run, claim, time.monotonic()
    self.run_log = os.path.join(root, LOG_DIR, f'{run.name}.log')
    arguments = run.arguments() + [f'--root_output_dir={root}', f'--experiment_name={run.name}']
    try:
      self.process.stdin.write((json.dumps({'arguments': arguments, 'log': self.run_log}) + '\n').encode())
      self.process.stdin.flush()
    except BrokenPipeError:  # The process ended as the run was sent; `ended_status` reports its exit status.
      pass

  def ended_status(self) -> Optional[int]:
    """The status of the job's run if it has ended (its status line, else its process's exit status), else None.
    Call when the process's stdout is readable."""
    chunk = os.read(self.process.stdout.fileno(), 4096)
    self._received += chunk
    if b'\n' in self._received:
      line, self._received = self._received.split(b'\n', 1)
      reply = json.loads(line)
      if reply['exits']:  # Gone before the next run is sent.
        self.process.wait()
      return int(reply['status'])
    if chunk:
      return None
    return self.process.wait()  # End of output with no status line: the process died during the run.

  def stop(self) -> None:
    if self.process is not None and self.process.poll() is None:
      self.process.send_signal(signal.SIGTERM)

  def wait(self) -> None:
    if self.process is None:
      return
    try:
      self.process.wait(timeout=120)
    except subprocess.TimeoutExpired:
      self.process.kill()
      self.process.wait()
    for stream in (self.process.stdin, self.process.stdout):
      try:
        stream.close()
      except BrokenPipeError:
        pass


def provenance_path(root: str, name: str) -> str:
  return os.path.join(root, LOG_DIR, f'{name}.provenance.json')


def _write_provenance(root: str, name: str, provenance: dict) -> None:
  finished = datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')
  with open(provenance_path(root, name), 'w') as f:
    json.dump(dict(provenance, finished=finished), f, indent=2)


def run_matrix(runs: Sequence[grid_lib.Run], root: str, jobs: int, command: Sequence[str],
               print_line: Callable[[str], None] = print, env: Optional[dict] = None,
               poll_seconds: float = 0.2, on_start: Callable[[], None] = lambda: None,
               provenance: Optional[dict] = None) -> list[Outcome]:
  """Runs every unfinished run of `runs` on `jobs` processes of `command` (a `run_series.py`: one run per line of
  its stdin), each run with its `run.arguments() + [--root_output_dir, --experiment_name]`; returns the outcomes of
  the runs started (a run another matrix or process holds is `in use`, not started). `on_start` runs once the
  root's log directory is made. Raises `MatrixError` when the root cannot be written; each finished run's
  `provenance` (with the time it finished) is written beside its log. On a stop signal, stops the running runs and
  exits with status 128 + signal (`SystemExit`)."""
  try:
    os.makedirs(os.path.join(root, LOG_DIR), exist_ok=True)
  except OSError as error:
    raise MatrixError(f'cannot write to {root}: {error.strerror}.') from None
  on_start()
  skipped = sum(is_finished(root, run.name) for run in runs)
  pending = [run for run in runs if not is_finished(root, run.name)]
  total = len(runs)
  print_line(f'matrix: {total} runs in {root}, {skipped} already finished, {len(pending)} to run, {jobs} at a time')
  slots = [_Job(command, os.path.join(root, LOG_DIR, f'job-{index}.log'), env) for index in range(jobs)]
  outcomes: list[Outcome] = []
  handlers = {s: signal.signal(s, _raise_stop) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}

  def busy() -> list[_Job]:
    return [job for job in slots if job.run is not None]

  def progress() -> str:
    done = sum(is_finished(root, run.name) for run in runs)  # Runs another matrix finished meanwhile too.
    failed = sum(o.status in ('failed', 'refused') for o in outcomes)
    in_use = sum(o.status == 'in use' for o in outcomes)
    finished = [o.seconds for o in outcomes if o.status == 'finished']
    left = len(pending) + len(busy())
    estimate = ''
    if finished and left:  # Not below a minute while a run is going: it is a rough mean, not a countdown.
      estimate = f', ~{_duration(max(60.0, sum(finished) / len(finished) * left / jobs))} left'
    return (f'matrix: {done}/{total} done, {len(busy())} running, {len(pending)} waiting, {failed} failed'
            f'{f", {in_use} in use elsewhere" if in_use else ""}{estimate}')

  def record(job: _Job, status: int) -> None:
    name, seconds = job.run.name, time.monotonic() - job.started
    job.run = None
    job.claim.release()
    job.claim = None
    if status == REFUSED_STATUS and (held_by := directory_lock.holder(os.path.join(root, name))) is not None:
      outcomes.append(Outcome(name, 'in use', seconds, f'its directory is held by {held_by}'))
      print_line(f'matrix: {name} skipped: in use ({outcomes[-1].message})')
    elif status == 0:
      outcomes.append(Outcome(name, 'finished', seconds))
      if provenance is not None:
        _write_provenance(root, name, provenance)
      metric = headline(root, name)
      print_line(f'matrix: {name} finished in {_duration(seconds)}' + (f', {metric}' if metric else ''))
    else:
      kind = 'refused' if status == REFUSED_STATUS else 'failed'
      outcomes.append(Outcome(name, kind, seconds, error_line(job.run_log)))
      print_line(f'matrix: {name} {kind} (exit status {status}): {outcomes[-1].message}')

  matrix_started = time.monotonic()
  try:
    ended = False
    while pending or busy():
      for job in slots:
        while job.run is None and pending:
          run = pending.pop(0)
          claim = None if is_finished(root, run.name) else _claim(root, run.name)
          if claim is not None:
            job.start(run, root, claim)
          elif not is_finished(root, run.name):  # Another matrix or process runs it now.
            outcomes.append(Outcome(run.name, 'in use', 0.0, 'another matrix or process runs it'))
            print_line(f'matrix: {run.name} skipped: in use by another matrix or process')
            ended = True
      if ended:  # After the freed jobs have their next runs.
        print_line(progress())
        ended = False
      readable, _, _ = select.select([job.process.stdout for job in busy()], [], [], poll_seconds)
      for job in busy():
        if job.process.stdout in readable and (status := job.ended_status()) is not None:
          record(job, status)
          ended = True
    if ended:
      print_line(progress())
    print_line(f'matrix: {len(outcomes)} runs in {_duration(time.monotonic() - matrix_started)}')
  except _Stop as stop:
    running = busy()
    for job in slots:
      job.stop()
    for job in slots:
      job.wait()
    outcomes.extend(Outcome(job.run.name, 'stopped', time.monotonic() - job.started) for job in running)
    print_line(f'matrix: stopped by signal {stop.signum}; {len(running) + len(pending)} runs left, rerun the same '
               'command to finish them.')
    raise SystemExit(128 + stop.signum) from None
  finally:
    for job in slots:
      if job.process is not None and job.process.poll() is None and job.run is None:
        job.process.stdin.close()  # End of input: the process exits.
    for job in slots:
      job.wait()
    for signum, handler in handlers.items():
      signal.signal(signum, handler)
    for job in slots:
      if job.claim is not None:
        job.claim.release()
  return outcomes


def default_command() -> list[str]:
  """This Python running the repository's `run_series.py`."""
  repository = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  return [sys.executable, os.path.join(repository, 'run_series.py')]
