"""Several TFF workers: the start-up checks and the argument-order guard; a worker lost during a call stops it
within the timeout; a run that loses one resumes on the others; the device a worker runs client work on. That every
method's rounds on two workers equal its local rounds is checked beside its local run in
method_scenario_matrix_test.

Two `worker_binary` processes are started on 127.0.0.1 by the test and killed at its end.
"""

import os
import subprocess
import sys
import tempfile
import threading
import time

from absl.testing import absltest
import numpy as np
import portpicker
import tensorflow as tf
import tensorflow_federated as tff

from tests import in_process_run
from utils import remote_workers

_WORKER_DEVICES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'experiment',
                               'worker_devices.py')

def _worker_devices(*args) -> subprocess.CompletedProcess:
  return subprocess.run([sys.executable, _WORKER_DEVICES, *args], capture_output=True, text=True, timeout=120,
                        env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))


def _split_sums(addresses):
  """federated_sum of 1..4 with the clients' values as the last argument and as the first."""
  clients = tff.FederatedType(np.int32, tff.CLIENTS)
  server = tff.FederatedType(np.int32, tff.SERVER)

  @tff.federated_computation(server, clients)
  def clients_last(offset, values):
    del offset  # Unused.
    return tff.federated_sum(values)

  @tff.federated_computation(clients, server)
  def clients_first(values, offset):
    del offset  # Unused.
    return tff.federated_sum(values)

  with tff.framework.get_context_stack().install(remote_workers.round_context(addresses)):
    return clients_last(0, [1, 2, 3, 4]), clients_first([1, 2, 3, 4], 0)


class RemoteWorkersTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    in_process_run.start_worker()
    cls._workers, cls._addresses = in_process_run.start_local_workers(2)

  @classmethod
  def tearDownClass(cls):
    in_process_run.stop_workers(cls._workers)
    super().tearDownClass()

  def test_a_round_with_dependent_aggregations_is_refused(self):
    clients = tff.FederatedType(np.float32, tff.CLIENTS)

    @tff.federated_computation(clients)
    def above_mean(values):  # The mean decides the second sum, as FedTEM's threshold does in `process.next`.
      mean = tff.federated_mean(values)
      above = tff.federated_map(tff.tensorflow.computation(lambda x, m: tf.cast(x > m, tf.float32)),
                                (values, tff.federated_broadcast(mean)))
      return tff.federated_sum(above)

    with self.assertRaisesRegex(ValueError, '^above_mean cannot run on several workers: one of its aggregations '
                                            'depends on another.$'):
      remote_workers.check_splittable(above_mean, 'above_mean')

  def test_tff_splits_clients_by_the_last_argument_and_the_guard_refuses_the_other_order(self):
    # The pitfall itself (the control): with the clients' values first, both subrounds get the first half.
    self.assertEqual(_split_sums(self._addresses), (10, 6))
    clients = tff.FederatedType(np.int32, tff.CLIENTS)

    @tff.federated_computation(clients, tff.FederatedType(np.int32, tff.SERVER))
    def clients_first(values, offset):
      return tff.federated_sum(values), offset

    with self.assertRaisesRegex(ValueError, 'cannot run on several workers: TFF splits the clients by the last '
                                            'argument, which is not a value per client'):
      remote_workers.check_splittable(clients_first, 'clients_first')

  def test_a_worker_that_does_not_answer_fails_start_up_in_one_line(self):
    silent = f'127.0.0.1:{portpicker.pick_unused_port()}'
    root = tempfile.mkdtemp()
    started = time.monotonic()
    status, stderr = in_process_run.run([f'--root_output_dir={root}', f'--workers={self._addresses[0]},{silent}',
                                         '--worker_timeout=2'])
    self.assertLess(time.monotonic() - started, 20)
    self.assertEqual(status, 2)
    self.assertEqual(stderr.strip(), f'run_experiment: error: TFF worker {silent} did not answer within 2 s (start '
                                     'one with tools/start_worker.sh --port=P).')

  def test_a_worker_without_the_runs_data_directory_fails_start_up_in_one_line(self):
    present, absent = tempfile.mkdtemp(), os.path.join(tempfile.mkdtemp(), 'absent')
    remote_workers.check_paths(self._addresses, [present, None])
    root = tempfile.mkdtemp()
    status, stderr = in_process_run.run([f'--root_output_dir={root}', f'--workers={self._addresses[0]}',
                                         f'--cache_dir={present}', f'--tfds_data_dir={absent}'])
    self.assertEqual(status, 2)
    self.assertEqual(stderr.strip(), 'run_experiment: error: every worker needs the run\'s data at the same path: '
                                     f'{self._addresses[0]} lacks {absent}.')
    self.assertEmpty(os.listdir(root))

  def test_worker_devices_prints_where_client_work_runs(self):
    # The wheel's worker_binary is TensorFlow without CUDA (docs/operations.md, "Several machines"): CPU on any host.
    self.assertEqual(remote_workers.device_types(self._addresses), dict.fromkeys(self._addresses, 'CPU'))
    result = _worker_devices(f'--workers={",".join(self._addresses)}')
    self.assertEqual((result.returncode, result.stdout.splitlines()),
                     (0, [f'{address}: client work runs on CPU' for address in self._addresses]), result.stderr)
    silent = f'127.0.0.1:{portpicker.pick_unused_port()}'
    result = _worker_devices(f'--workers={silent}', '--worker_timeout=1')
    self.assertEqual((result.returncode, result.stderr.strip().splitlines()[-1]),
                     (2, f'worker_devices: TFF worker {silent} did not answer within 1 s (start one with '
                         'tools/start_worker.sh --port=P).'))

  def test_bad_worker_flags_are_one_line(self):
    for flags_, message in ((['--workers=localhost'], "host:port addresses separated by commas; got 'localhost'"),
                            (['--workers=a:1,a:1'], 'lists an address twice'),
                            (['--subrounds=2'], '--subrounds needs --workers')):
      status, stderr = in_process_run.run([f'--root_output_dir={tempfile.mkdtemp()}', *flags_])
      self.assertEqual(status, 2)
      self.assertIn(message, stderr)
      self.assertLen(stderr.strip().splitlines(), 1)

  def test_a_run_that_loses_a_worker_stops_in_one_line_and_resumes_on_the_others(self):
    workers, addresses = in_process_run.start_local_workers(2)
    root = tempfile.mkdtemp()
    run_flags = [f'--root_output_dir={root}', '--total_rounds=6', '--rounds_per_eval=6', '--rounds_per_checkpoint=1']
    metrics = os.path.join(root, 'lost', 'metrics.csv')

    def kill_after_two_rounds():
      while not (os.path.exists(metrics) and len(in_process_run.metrics_rows(os.path.dirname(metrics))) >= 2):
        time.sleep(0.05)
      in_process_run.stop_workers(workers[1:])

    killer = threading.Thread(target=kill_after_two_rounds, daemon=True)
    killer.start()
    status, stderr = in_process_run.run([*run_flags, '--experiment_name=lost', f'--workers={",".join(addresses)}',
                                         '--worker_timeout=2'])
    killer.join()
    self.assertEqual(status, 4, stderr)
    self.assertRegex(stderr.strip().splitlines()[-1], f'^run_experiment: error: TFF worker {addresses[1]} stopped answering '
                                     r'\(waited 2 s\)\. The run stopped; its checkpoints are kept in .*: rerun')
    stopped_at = len(in_process_run.metrics_rows(os.path.join(root, 'lost')))
    self.assertLess(stopped_at, 6)
    status, stderr = in_process_run.run([*run_flags, '--experiment_name=lost', f'--workers={addresses[0]}'])
    self.assertEqual(status, 0, stderr)
    status, stderr = in_process_run.run([*run_flags, '--experiment_name=local'])
    self.assertEqual(status, 0, stderr)
    in_process_run.stop_workers(workers[:1])
    resumed, local = (in_process_run.metrics_rows(os.path.join(root, name)) for name in ('lost', 'local'))
    self.assertLen(resumed, 6)
    for row, expected in zip(resumed, local):
      for key in ('train_accuracy', 'train_examples', 'test_accuracy'):
        self.assertEqual(row.get(key), expected.get(key), f'round {row["round"]}: {key}')
      np.testing.assert_allclose(float(row['train_loss']), float(expected['train_loss']), rtol=1e-6)

  def test_a_worker_lost_during_a_call_stops_it_within_the_timeout(self):
    workers, addresses = in_process_run.start_local_workers(2)
    context = remote_workers.round_context(addresses, timeout_seconds=2)

    @tff.federated_computation(tff.FederatedType(np.float32, tff.CLIENTS))
    def total(values):
      return tff.federated_sum(values)

    with tff.framework.get_context_stack().install(context):
      self.assertEqual(total([1.0, 2.0, 3.0]), 6.0)
      in_process_run.stop_workers(workers[1:])
      started = time.monotonic()
      with self.assertRaisesRegex(remote_workers.WorkerUnavailableError,
                                  f'TFF worker {addresses[1]} stopped answering'):
        total([1.0, 2.0, 3.0])
    self.assertLess(time.monotonic() - started, 30)
    in_process_run.stop_workers(workers[:1])


if __name__ == '__main__':
  tf.test.main()
