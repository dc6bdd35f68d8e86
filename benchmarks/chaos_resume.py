"""Chaos test of resuming: kill -9 a run at random moments, resume it each time, compare with an uninterrupted run.

    bazel run //benchmarks:chaos_resume -- --kills=20 --algorithms=vanilla,fedtem,fedtkm
    bazel run //benchmarks:chaos_resume -- --kills=20 \
        --algorithms=fedgmm,fedem_client_state,pfedem,shiftex,feddrift,fedrep,fedevp

Per method: one uninterrupted run of `run_experiment.py` on the synthetic task, on the scenario the method targets
(`_TARGETS`: the methods with per-client state or a server-side pool each where that state matters: FedGMM's
pi_c on dirichlet_mixture, FedEM with its clients' weights kept, pFedEM on mixture_drift, ShiftEx's experts and
stored samples and FedDrift's models on windowed, FedRep's heads and FedEvp on evolving_domains), then the same
command started,
SIGKILLed and restarted `--kills` times before it may finish. The kill moments are drawn from the run's seed:
half at a uniform random time after the restarted run's first progress line, a quarter as soon as a checkpoint
is being written (its staging directory appears), a quarter as soon as metrics.csv grows (a row being appended).
At each kill the script records what was in flight (a checkpoint staged, a metrics row without its newline).

Passes when, for every method, the final metrics.csv equals the uninterrupted run's cell for cell except
`round_seconds`, and no TFF worker process of a killed run is alive a second after the kill. Prints one line per
method and exits 1 on a failure. Not part of the test suite (minutes per method).
"""

import csv
import os
import random
import signal
import subprocess
import sys
import tempfile
import time

from absl import app
from absl import flags

from experiment.core import run_directory
from utils import execution_context

_KILLS = flags.DEFINE_integer('kills', 20, 'SIGKILLs per method before the run may finish.')
_ALGORITHMS = flags.DEFINE_list('algorithms', ['vanilla', 'fedtem', 'fedtkm'], 'Methods to test.')
_TOTAL_ROUNDS = flags.DEFINE_integer('total_rounds', 96, 'Rounds of each run.')
_SEED = flags.DEFINE_integer('seed', 0, 'Seeds the kill moments.')
_OUTPUT_DIR = flags.DEFINE_string('output_dir', None, 'Where the runs go (default: a temporary directory).')

_BINARY = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'run_experiment.py')
# Checkpoint every 4 rounds and evaluate every 4, so kills meet checkpoint saves and evaluation rows often.
_RUN_FLAGS = ['--task=synthetic', '--clients_per_round=5', '--period=16', '--rounds_per_eval=4',
              '--rounds_per_checkpoint=4', '--eval_batch_size=500']


# Each method on the scenario where its state matters; a name may stand for a method with settings.
_TARGETS = {
    'fedgmm': ['--algorithm=fedgmm', '--scenario=dirichlet_mixture', '--num_clients=40', '--unseen_fraction=0.2'],
    'fedem_client_state': ['--algorithm=fedem', '--fedem_client_state'],
    'pfedem': ['--algorithm=pfedem', '--scenario=mixture_drift', '--num_clients=20'],
    'shiftex': ['--algorithm=shiftex', '--scenario=windowed', '--window_rounds=16', '--num_branches=4',
                '--num_clients=200'],
    'feddrift': ['--algorithm=feddrift', '--scenario=windowed', '--window_rounds=16', '--num_branches=4'],
    'fedrep': ['--algorithm=fedrep', '--scenario=evolving_domains', '--num_domains=4', '--num_clients=10'],
    'fedevp': ['--algorithm=fedevp', '--scenario=evolving_domains', '--num_domains=4', '--num_clients=10'],
}


def _command(algorithm: str, root: str, name: str) -> list[str]:
  method = _TARGETS.get(algorithm, [f'--algorithm={algorithm}'])
  return [sys.executable, _BINARY, *_RUN_FLAGS, *method, f'--total_rounds={_TOTAL_ROUNDS.value}',
          f'--root_output_dir={root}', f'--experiment_name={name}']


def _environment() -> dict:
  return dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), TF_CPP_MIN_LOG_LEVEL='3')


def _rows(path: str) -> list[dict]:
  with open(path) as f:
    return list(csv.DictReader(f))


def _alive(pid: int) -> bool:
  try:
    with open(f'/proc/{pid}/stat') as f:
      return f.read().rsplit(')', 1)[1].split()[0] != 'Z'
  except OSError:
    return False


def _staged(staging: str) -> set[str]:
  """The entries of the checkpoint staging directory (a killed save leaves its part there until the next save)."""
  return set(os.listdir(staging)) if os.path.isdir(staging) else set()


def _in_flight(run_dir: str, staged_before: set[str]) -> list[str]:
  """What was being written when the run was killed: a checkpoint this run began (a staging entry that was not
  there when it started), a metrics row without its newline."""
  found = []
  if _staged(os.path.join(run_dir, run_directory.CHECKPOINTS, '.staging')) - staged_before:
    found.append('checkpoint')
  metrics = os.path.join(run_dir, run_directory.METRICS)
  if os.path.exists(metrics):
    with open(metrics, 'rb') as f:
      f.seek(max(os.path.getsize(metrics) - 1, 0))
      if f.read(1) not in (b'\n', b''):
        found.append('partial row')
  return found


def _wait_for(predicate, child: subprocess.Popen, timeout: float) -> bool:
  deadline = time.monotonic() + timeout
  while time.monotonic() < deadline and child.poll() is None:
    if predicate():
      return True
    time.sleep(0.002)
  return False


def _kill_once(algorithm: str, root: str, name: str, moment: str,
               rng: random.Random) -> tuple[bool, list[str], set[int]]:
  """Starts the run, kills it at `moment`; returns (killed before it finished, what was in flight, the killed
  run's TFF workers still alive a second later)."""
  run_dir = os.path.join(root, name)
  metrics = os.path.join(run_dir, run_directory.METRICS)
  staging = os.path.join(run_dir, run_directory.CHECKPOINTS, '.staging')
  staged_before = _staged(staging)  # What an earlier kill's save left: not this run's save.
  child = subprocess.Popen(_command(algorithm, root, name), env=_environment(), stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, text=True)
  # Training has started once the first progress line is printed.
  for line in child.stdout:
    if line.startswith('round '):
      break
  if moment == 'checkpoint':
    _wait_for(lambda: bool(_staged(staging) - staged_before), child, timeout=120)
  elif moment == 'row':
    size = os.path.getsize(metrics)
    _wait_for(lambda: os.path.getsize(metrics) != size, child, timeout=120)
  else:
    time.sleep(rng.uniform(0.0, 3.0))
  killed = child.poll() is None
  workers = execution_context.worker_pids(child.pid)
  child.kill()
  child.wait()
  child.stdout.close()
  time.sleep(1.0)
  return killed, _in_flight(run_dir, staged_before) if killed else [], {pid for pid in workers if _alive(pid)}


def _check(algorithm: str, root: str, rng: random.Random) -> tuple[bool, str]:
  reference = subprocess.run(_command(algorithm, root, 'uninterrupted'), env=_environment(), capture_output=True,
                             text=True)
  if reference.returncode != 0:
    return False, f'the uninterrupted run failed: {reference.stderr.strip().splitlines()[-1:]}'
  moments = ['random'] * (_KILLS.value // 2) + ['checkpoint'] * (_KILLS.value // 4)
  moments += ['row'] * (_KILLS.value - len(moments))
  rng.shuffle(moments)
  kills, in_flight, orphans = 0, {'checkpoint': 0, 'partial row': 0}, set()
  for moment in moments:
    killed, found, survivors = _kill_once(algorithm, root, 'chaos', moment, rng)
    kills += killed
    orphans |= survivors
    for item in found:
      in_flight[item] += 1
  for pid in orphans:
    os.kill(pid, signal.SIGKILL)
  final = subprocess.run(_command(algorithm, root, 'chaos'), env=_environment(), capture_output=True, text=True)
  if final.returncode != 0:
    return False, f'the resumed run failed: {final.stderr.strip().splitlines()[-1:]}'
  expected = _rows(os.path.join(root, 'uninterrupted', run_directory.METRICS))
  actual = _rows(os.path.join(root, 'chaos', run_directory.METRICS))
  differences = [(e['round'], column) for e, a in zip(expected, actual) for column in e
                 if column != 'round_seconds' and e[column] != a.get(column)]
  identical = len(expected) == len(actual) and not differences
  summary = (f'{kills}/{len(moments)} kills landed before the end (in flight: {in_flight["checkpoint"]} checkpoint '
             f'saves, {in_flight["partial row"]} partial metrics rows); final metrics.csv '
             f'{"identical" if identical else "DIFFERENT"} to the uninterrupted run ({len(actual)} vs '
             f'{len(expected)} rows{", first differences " + str(differences[:3]) if differences else ""}); '
             f'{len(orphans)} TFF workers outlived their killed run')
  return identical and kills == len(moments) and not orphans, summary


def main(argv):
  del argv  # Unused.
  root = _OUTPUT_DIR.value or tempfile.mkdtemp(prefix='chaos_resume_')
  passed = True
  for index, algorithm in enumerate(_ALGORITHMS.value):
    started = time.monotonic()
    ok, summary = _check(algorithm, os.path.join(root, algorithm), random.Random(_SEED.value * 1000 + index))
    passed &= ok
    print(f'{algorithm}: {"PASS" if ok else "FAIL"} - {summary} ({time.monotonic() - started:.0f} s)', flush=True)
  print(f'Runs in {root}')
  sys.exit(0 if passed else 1)


if __name__ == '__main__':
  app.run(main)
