"""Seconds and bytes per round of each method on this process's own TFF worker and on 1, 2 and 4 local workers.

On the synthetic task (10 clients per round, its defaults) or, with `--benchmark_task`, a paper task at its defaults
(Table 2) on files of the real layouts and shapes (`benchmarks.task_files`). Each cell is a run of `run_experiment`
in this process (`--total_rounds=R`, one evaluation at the end), on workers started here on 127.0.0.1
(`utils.remote_workers.start_local_worker`):
  seconds  the median `round_seconds` of metrics.csv over the rounds after the first 3 (warm-up: tracing and the
           workers' first compilation);
  sent     bytes of the requests this process sends to TFF workers (its own or remote: every gRPC request of
           `RemoteExecutorGrpcStub`, serialized, `timing.WorkerTraffic`), per round, over the whole run
           (initialization included); on its own worker the state stays there between rounds (`--state_on_worker`);
  received bytes of the workers' answers, per round.
Local workers share this machine's cores, so more workers cannot be faster here; the table shows what splitting a
round costs, and the bytes give the time a network adds: `--bandwidth_gbit` projects seconds per round as
measured seconds + (sent + received) / bandwidth for each worker count (each worker's share travels in parallel,
so this is a pessimistic bound).

    bazel run //benchmarks:workers_round_time -- --methods=vanilla,fedtem --rounds=10
    bazel run //benchmarks:workers_round_time -- --benchmark_task=cifar --methods=vanilla --rounds=6
"""

import collections
import os
import shutil
import statistics
import subprocess
import tempfile

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

from absl import app
from absl import flags
import numpy as np
import portpicker

from benchmarks import task_files
from benchmarks import timing
from tests import in_process_run
from utils import remote_workers

_METHODS = flags.DEFINE_list('methods', ['vanilla', 'fedtem', 'fedtkm', 'fedem', 'pfedem', 'fedgmm'],
                             'Methods to time (any of run_experiment\'s --algorithm values).')
_WORKER_COUNTS = flags.DEFINE_list('worker_counts', ['0', '1', '2', '4'], 'Worker counts; 0 = this process\'s own.')
_TASK = flags.DEFINE_enum('benchmark_task', 'synthetic', ['synthetic', 'emnist', 'cifar', 'stackoverflow'],
                          'Task to run (not --task: this process holds run_experiment\'s flags too).')
_ROUNDS = flags.DEFINE_integer('rounds', 10, 'Rounds per run (the first 3 are not timed).')
_BANDWIDTH = flags.DEFINE_float('bandwidth_gbit', 1.0, 'Network bandwidth for the projection, Gbit/s.')
_RUN_FLAGS = flags.DEFINE_list('run_flags', [], 'More run_experiment flags for every run, e.g. '
                                '--run_flags=--num_domains=3,--num_clients=13 for `evolving_domains` on the '
                                'EMNIST-shaped files.')


def _cell(method: str, count: int, task_flags: list[str], scratch: str) -> dict:
  workers = []
  try:
    ports = [portpicker.pick_unused_port() for _ in range(count)]
    workers = [remote_workers.start_local_worker(port, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
               for port in ports]
    addresses = [f'127.0.0.1:{port}' for port in ports]
    if addresses:
      remote_workers.wait_until_ready(addresses, timeout_seconds=60)
    root = tempfile.mkdtemp(dir=scratch)
    with timing.WorkerTraffic() as traffic:
      status, stderr = in_process_run.run([f'--algorithm={method}', f'--total_rounds={_ROUNDS.value}',
                                           f'--rounds_per_eval={_ROUNDS.value}', f'--root_output_dir={root}',
                                           '--experiment_name=run', *task_flags, *timing.METHOD_FLAGS.get(method, []),
                                           *_RUN_FLAGS.value,
                                           *([f'--workers={",".join(addresses)}'] if addresses else [])])
    if status != 0:
      raise RuntimeError(f'{method} on {count} workers: {stderr.strip()}')
    rows = in_process_run.metrics_rows(os.path.join(root, 'run'))
    seconds = statistics.median(float(row['round_seconds']) for row in rows[timing.WARMUP_ROUNDS:])
    return dict(seconds=seconds, sent=traffic.sent / _ROUNDS.value, received=traffic.received / _ROUNDS.value)
  finally:
    for worker in workers:
      worker.kill()
      worker.wait()


def main(argv):
  del argv  # Unused.
  in_process_run.start_worker()
  counts = [int(count) for count in _WORKER_COUNTS.value]
  bytes_per_second = _BANDWIDTH.value * 1e9 / 8
  scratch = tempfile.mkdtemp()
  task_flags = [f'--task={_TASK.value}']
  if _TASK.value != 'synthetic':
    task_files.write(_TASK.value, scratch, np.random.default_rng(0))
    task_flags.append(f'--cache_dir={scratch}')
  print(f'{_TASK.value} task, {_ROUNDS.value} rounds per run; seconds per round (ratio to the same method on this '
        f'process\'s worker), MB sent / received per round, projected seconds at {_BANDWIDTH.value:g} Gbit/s')
  for method in _METHODS.value:
    cells = collections.OrderedDict((count, _cell(method, count, task_flags, scratch)) for count in counts)
    base = cells[counts[0]]['seconds']
    print(method + ''.join(
        f'  | {count or "own"} worker{"s" if count > 1 else ""}: {cell["seconds"]:.3f} s '
        f'({cell["seconds"] / base:.2f}x) {cell["sent"] / 1e6:.2f}/{cell["received"] / 1e6:.2f} MB '
        f'-> {cell["seconds"] + (cell["sent"] + cell["received"]) / bytes_per_second:.3f} s'
        for count, cell in cells.items()), flush=True)
  shutil.rmtree(scratch)


if __name__ == '__main__':
  app.run(main)
