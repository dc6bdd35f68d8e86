"""End-to-end tests of run_experiment.py as users run it: bad input, learning, outputs, interruption and resume."""

import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import time

from absl.testing import absltest
from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from experiment.core import run_directory
from tests import in_process_run
from utils import execution_context

_BINARY = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'run_experiment.py')
_SMALL_RUN = ['--task=synthetic', '--clients_per_round=5', '--period=8', '--rounds_per_eval=4',
              '--eval_batch_size=500']
# Two rounds of FedTEM (test batches routed as one client) on clients with held-out test and personalization data.
_HELD_OUT_RUN = ['--task=synthetic', '--algorithm=fedtem', '--scenario=dirichlet_mixture', '--num_clients=12',
                 '--unseen_fraction=0.25', '--clients_per_round=3', '--total_rounds=2', '--rounds_per_eval=2',
                 '--eval_batch_size=16']


def _run_binary(args):
  """run_experiment.py as a process, as users run it."""
  env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), TF_CPP_MIN_LOG_LEVEL='3')
  return subprocess.run([sys.executable, _BINARY, *args], env=env, capture_output=True, text=True, timeout=600)


def _run(args) -> subprocess.CompletedProcess:
  """run_experiment's main in this process (`tests.in_process_run`: the same exit status, stdout and stderr, without
  a Python and TensorFlow start-up per run); `_run_binary` where the process itself is what a test checks."""
  in_process_run.start_worker()
  status, stdout, stderr = in_process_run.run_with_stdout(args)
  return subprocess.CompletedProcess(args, status, stdout, stderr)


def _rows(output_dir):
  with open(os.path.join(output_dir, 'metrics.csv')) as f:
    return list(csv.DictReader(f))


def _assert_same_rows(test, expected, actual):
  """Every cell of metrics rows `actual` equals `expected`'s, timings aside."""
  test.assertEqual(len(actual), len(expected))
  for expected_row, actual_row in zip(expected, actual):
    test.assertEqual(actual_row.keys(), expected_row.keys())
    for column, value in expected_row.items():
      if column != 'round_seconds':
        test.assertEqual(actual_row[column], value, f'round {expected_row["round"]}, {column}')


class BadInputTest(parameterized.TestCase):

  @parameterized.named_parameters(
      ('shift_p_zero', ['--shift_p=0'], 'shift_p must be > 0'),
      ('period_one', ['--period=1'], 'period must be at least 2'),
      ('no_clients', ['--clients_per_round=0'], 'clients_per_round must be >= 1'),
      ('too_many_clients', ['--clients_per_round=301'], 'smallest mode population \\(300\\)'),
      ('unknown_task', ['--task=rotated_mnist'], 'task must be one of synthetic'),
      ('task_refuses_scenario', ['--task=circle'], 'task circle cannot run scenario periodic'),
      ('component_alpha', ['--scenario=dirichlet_mixture', '--component_alpha=0'], 'component_alpha must be > 0'),
      ('dirichlet_alpha', ['--scenario=evolving_domains', '--dirichlet_alpha=-1'], 'dirichlet_alpha must be > 0'),
      ('missing_tfds_dataset', ['--task=mnist', '--tfds_data_dir=/nonexistent'],
       'mnist prepared by tensorflow-datasets in /nonexistent/mnist/3.0.1'),
      ('unknown_algorithm', ['--algorithm=fedfoo'], 'algorithm must be one of'),
      ('style_scale_of_another_task', ['--task=digits', '--synthetic_style_scale=0.3'],
       '--synthetic_style_scale is a setting of task synthetic; the task is digits'),
      ('setting_of_another_method', ['--algorithm=vanilla_single', '--fedevp_batching=packed'],
       '--fedevp_batching is a setting of fedevp; the method is vanilla_single'),
      ('style_scale_zero', ['--synthetic_style_scale=0'], 'synthetic_style_scale must be > 0'),
      ('unknown_shift', ['--shift_fn=sine'], 'shift_fn must be one of'),
      ('client_lr', ['--client_learning_rate=0'], 'client_learning_rate must be > 0'),
      ('server_lr', ['--server_learning_rate=-1'], 'server_learning_rate must be > 0'),
      ('server_optimizer', ['--server_optimizer=rmsprop'],
       '--server_optimizer must be one of adam, sgd, sgdm, adagrad, yogi; got'),
      ('momentum_without_sgdm', ['--server_momentum=0.5'],
       '--server_momentum must be in \\[0, 1\\) and is the momentum of --server_optimizer=sgdm; got 0.5 with '
       '--server_optimizer=adam'),
      ('momentum_one', ['--server_optimizer=sgdm', '--server_momentum=1'], '--server_momentum must be in \\[0, 1\\)'),
      ('smoothing_above_one', ['--algorithm=min_loss', '--label_smooth_w=1.5'], '--label_smooth_w must be in'),
      ('unknown_prior', ['--algorithm=fedtem', '--prior=quadratic'], 'prior must be one of'),
      ('prior_with_three_branches', ['--algorithm=fedtem', '--num_branches=3'], 'defined for 2 modes'),
      ('fedtkm_eta', ['--algorithm=fedtkm', '--eta_max=-1'], 'eta_max must be >= 0'),
      ('fedtkm_rule', ['--algorithm=fedtkm', '--client_rule=vote'], 'client_rule must be one of'),
      ('fedtkm_leak', ['--algorithm=fedtkm', '--alpha_leak=1'], 'alpha_leak must be in \\[0, 1\\)'),
      ('mixed_share', ['--mixed_test_q=0.5,1.5'], "mixed_test_q takes shares in \\[0, 1\\]; got '1.5'"),
      ('mixed_share_text', ['--mixed_test_q=half'], "mixed_test_q takes shares in \\[0, 1\\]; got 'half'"),
      ('mixed_without_two_modes', ['--scenario=evolving_domains', '--mixed_test_q=0.5'],
       'mixed_test_q mixes the two modes of a two-mode task; this scenario gives 12 domains'),
      ('tshot_on_stackoverflow', ['--algorithm=tshot_kmeans', '--task=stackoverflow'], 'not defined for stackoverflow'),
      ('scsgd_halves', ['--algorithm=scsgd', '--scsgd_halves=thirds'], 'scsgd_halves must be one of'),
      ('fedem_iterations', ['--algorithm=fedem', '--fedem_em_iterations=0'], 'fedem_em_iterations must be >= 1'),
      ('fedevolve_clip', ['--algorithm=fedevolve', '--scenario=evolving_domains', '--fedevolve_max_gradient_norm=-1'],
       'fedevolve_max_gradient_norm must be >= 0; got -1'),
      ('fedgmm_gaussians', ['--algorithm=fedgmm', '--fedgmm_gaussians=0'], 'fedgmm_gaussians must be >= 1'),
      ('pfedem_pretrain_epochs', ['--algorithm=pfedem', '--pfedem_features=pretrained', '--pfedem_pretrain_epochs=0'],
       'pfedem_pretrain_epochs must be >= 1'),
      ('pfedem_pi_pseudocount', ['--algorithm=pfedem', '--pfedem_pi_pseudocount=-1'],
       'pfedem_pi_pseudocount must be >= 0'),
      ('pfedem_data_init_of_moving_features', ['--algorithm=pfedem', '--pfedem_gmm_init=data'],
       'pfedem_gmm_init=data needs features that do not train'),
      ('fedprox_mu', ['--algorithm=fedprox', '--fedprox_mu=0'], 'fedprox_mu must be > 0'),
      ('local_without_clients_test_data', ['--algorithm=local'], 'needs a scenario with per-client test data'),
      ('fedevolve_without_time_stages', ['--algorithm=fedevolve'], 'needs a scenario whose domains are time stages'),
      ('fedevp_momentum', ['--algorithm=fedevp', '--fedevp_momentum=2'], 'fedevp_momentum must be in'),
      ('fedevp_stage_reduction', ['--algorithm=fedevp', '--fedevp_stage_reduction=max'],
       'fedevp_stage_reduction must be one of sum, mean'),
      ('routing_with_one_branch', ['--algorithm=min_loss', '--num_branches=1'], 'needs --num_branches >= 2'),
      # Count flags of every scenario (0 is a count, not "unset").
      ('evolving_no_clients', ['--scenario=evolving_domains', '--num_clients=0'], 'num_clients must be >= 1; got 0'),
      ('mixture_no_clients', ['--scenario=mixture_drift', '--num_clients=0'], 'num_clients must be >= 1; got 0'),
      ('dirichlet_no_clients', ['--scenario=dirichlet_mixture', '--num_clients=0'],
       'num_clients must be >= 1; got 0'),
      ('one_domain', ['--scenario=evolving_domains', '--num_domains=1'], 'num_domains must be >= 2'),
      ('no_window', ['--scenario=windowed', '--window_rounds=0'], '--window_rounds must be > 0'),
      ('one_concept', ['--scenario=concept_drift', '--num_concepts=1'], 'num_concepts must be >= 2'),
      ('no_drift_length', ['--scenario=concept_drift', '--drift_length=0'], '--drift_length and --concept_period'),
      ('no_cycles', ['--scenario=mixture_drift', '--num_cycles=0'], 'num_cycles must be > 0'),
      ('no_period', ['--period=0'], 'period'),
      ('no_clients_per_round', ['--clients_per_round=0'], 'clients_per_round must be >= 1'),
      ('missing_dataset', ['--task=cifar', '--cache_dir=/nonexistent'], '/nonexistent/cifar100.sqlite'),
      ('inference_batch', ['--eval_batch_size=16', '--eval_inference_batch_size=40'],
       'eval_inference_batch_size must be a positive multiple of --eval_batch_size \\(16\\); got 40'),
  )
  def test_one_line_and_exit_status_2(self, args, message):
    # run_experiment's main in this process: the checks run before any data or TFF computation, and sparing each
    # case a Python and TensorFlow start-up keeps the whole list cheap; test_as_a_process checks the binary itself.
    output_dir = self.create_tempdir().full_path
    status, stderr = in_process_run.run(args + [f'--root_output_dir={output_dir}', '--experiment_name=bad'])
    self.assertEqual(status, 2, stderr)
    lines = stderr.strip().splitlines()
    self.assertLen(lines, 1, stderr)
    self.assertStartsWith(lines[0], 'run_experiment: error: ')
    self.assertRegex(lines[0], message)
    self.assertFalse(os.path.exists(os.path.join(output_dir, 'bad')))

  def test_as_a_process(self):
    """The binary's stderr holds the one line and nothing else (no TensorFlow or absl logging), exit status 2."""
    output_dir = self.create_tempdir().full_path
    result = _run_binary(['--task=cifar', '--cache_dir=/nonexistent', f'--root_output_dir={output_dir}',
                          '--experiment_name=bad'])
    self.assertEqual(result.returncode, 2, result.stderr)
    self.assertRegex(result.stderr, r'^run_experiment: error: [^\n]*/nonexistent/cifar100.sqlite[^\n]*\n$')
    self.assertFalse(os.path.exists(os.path.join(output_dir, 'bad')))


class EndToEndTest(parameterized.TestCase):

  def test_learns_and_writes_outputs(self):
    root = self.create_tempdir().full_path
    result = _run(_SMALL_RUN + ['--total_rounds=24', f'--root_output_dir={root}', '--experiment_name=e2e'])
    self.assertEqual(result.returncode, 0, result.stderr)
    output_dir = os.path.join(root, 'e2e')
    rows = _rows(output_dir)
    self.assertEqual([int(row['round']) for row in rows], list(range(1, 25)))
    for column in ('q', 'day_fraction', 'train_loss', 'train_accuracy'):
      self.assertNotEqual(rows[0][column], '')
    evaluated = [row for row in rows if row['test_accuracy']]
    self.assertEqual([int(row['round']) for row in evaluated], [4, 8, 12, 16, 20, 24])
    self.assertNotEqual(evaluated[-1]['test_day_accuracy'], '')
    self.assertNotEqual(evaluated[-1]['test_night_accuracy'], '')
    # q(t) is the linear shift with T = 8: q(4) = 0, q(8) = 1.
    self.assertEqual(float(rows[3]['q']), 0.0)
    self.assertEqual(float(rows[7]['q']), 1.0)
    with open(os.path.join(output_dir, 'summary.json')) as f:
      summary = json.load(f)
    # 20 classes: chance is 0.05. Six times chance after 24 rounds of 5 clients.
    self.assertGreater(summary['final_metrics']['test_accuracy'], 0.3)
    self.assertEqual(summary['population']['day']['clients'], 300)
    self.assertEqual(summary['parameters']['branch'], 32 * 20 + 20)
    self.assertEqual(summary['flags']['clients_per_round'], 5)
    self.assertNotEmpty(os.listdir(os.path.join(output_dir, 'tensorboard')))
    self.assertIn('rounds/s', result.stdout)
    self.assertIn(output_dir, result.stdout)

  def test_learns_on_fedgmm_dirichlet_mixtures(self):
    root = self.create_tempdir().full_path
    result = _run(['--task=gaussian_mixture', '--scenario=dirichlet_mixture', '--num_clients=60',
                   '--clients_per_round=10', '--total_rounds=15', '--rounds_per_eval=15',
                   f'--root_output_dir={root}', '--experiment_name=gm'])
    self.assertEqual(result.returncode, 0, result.stderr[-3000:])
    last = _rows(os.path.join(root, 'gm'))[-1]
    # The task's default components are its three Gaussians; binary labels, chance 0.5. One linear model cannot
    # fit the three hyperplanes at once (about 0.72 here), which is what the FedGMM paper's mixtures are for.
    self.assertAlmostEqual(sum(float(last[f'domain_share_{m}']) for m in range(3)), 1.0)
    self.assertBetween(float(last['personalized_accuracy']), 0.65, 0.85)
    self.assertBetween(float(last['test_component3_accuracy']), 0.6, 0.85)

  def test_fedtem_reports_routing_and_prior(self):
    root = self.create_tempdir().full_path
    result = _run(_SMALL_RUN + ['--algorithm=fedtem', '--prior=soft', '--total_rounds=4',
                                f'--root_output_dir={root}', '--experiment_name=tem'])
    self.assertEqual(result.returncode, 0, result.stderr)
    rows = _rows(os.path.join(root, 'tem'))
    self.assertLen(rows, 4)
    self.assertEqual(float(rows[0]['prior']), 1.0)  # The soft prior resets to 1 at t mod T = 1 (Eq. 26).
    self.assertEqual(float(rows[3]['prior']), 0.0)  # ... and to 0 at t mod T = T/2 = 4.
    for column in ('train_routing_accuracy', 'routing_accuracy'):
      self.assertBetween(float(rows[3][column]), 0.0, 1.0)
    # The test examples' counts by domain and branch at each evaluation (round 4 here):
    # routing_accuracy is the prior's orientation, branch k for mode k; the run-wide view matches once, by count.
    evaluated = [row for row in rows if row['routing_accuracy']]
    counts = np.array([[[float(row[f'routing_count_{d}_{b}']) for b in range(2)] for d in range(2)]
                       for row in evaluated])
    for row, count in zip(evaluated, counts):
      self.assertAlmostEqual(float(row['routing_accuracy']), np.trace(count) / count.sum(), places=6)
      self.assertAlmostEqual(float(row['routing_accuracy_matched']),  # This evaluation's better orientation.
                             max(np.trace(count), count[0, 1] + count[1, 0]) / count.sum(), places=6)
    total = counts.sum(0)
    with open(os.path.join(root, 'tem', 'summary.json')) as f:
      final = json.load(f)['final_metrics']
    self.assertAlmostEqual(final['routing_accuracy_run_matched'],
                           max(np.trace(total), total[0, 1] + total[1, 0]) / total.sum(), places=6)

  def test_fedtem_variants_run(self):
    # Three branches without a prior (EM only), the Bayesian client estimate of Eq. 22, sampled training branches
    # and per-sample test routing.
    root = self.create_tempdir().full_path
    result = _run(_SMALL_RUN + ['--algorithm=fedtem', '--prior=none', '--num_branches=3', '--total_rounds=4',
                                '--client_estimate=bayesian', '--branch_selection=sample', '--eval_routing=sample',
                                f'--root_output_dir={root}', '--experiment_name=variants'])
    self.assertEqual(result.returncode, 0, result.stderr)
    last = _rows(os.path.join(root, 'variants'))[-1]
    self.assertBetween(float(last['routing_accuracy']), 0.0, 1.0)
    self.assertBetween(float(last['train_routing_accuracy']), 0.0, 1.0)

  def test_fedtem_learns_to_route_clients_to_their_mode(self):
    root = self.create_tempdir().full_path
    result = _run(['--algorithm=fedtem', '--prior=linear', '--period=32', '--total_rounds=64',
                   '--rounds_per_eval=32', f'--root_output_dir={root}', '--experiment_name=routing'])
    self.assertEqual(result.returncode, 0, result.stderr)
    rows = _rows(os.path.join(root, 'routing'))
    # After warm-up (the second period), nearly every client trains on its own mode's branch and test batches are
    # routed to their mode's branch.
    late = [float(row['train_routing_accuracy']) for row in rows[40:]]
    self.assertGreater(np.mean(late), 0.9)
    self.assertGreater(float(rows[-1]['routing_accuracy']), 0.9)

  def test_fedtkm_learns_to_route_clients_to_their_mode(self):
    root = self.create_tempdir().full_path
    # FedTKM settles more slowly than FedTEM (measured, seeds 0-2: training routing 0.59-0.77 in rounds 41-64,
    # 0.81-1.0 in rounds 65-128): its third and fourth periods are checked.
    result = _run(['--algorithm=fedtkm', '--prior=linear', '--period=32', '--total_rounds=128',
                   '--rounds_per_eval=64', f'--root_output_dir={root}', '--experiment_name=routing'])
    self.assertEqual(result.returncode, 0, result.stderr)
    rows = _rows(os.path.join(root, 'routing'))
    late = [float(row['train_routing_accuracy']) for row in rows[64:]]
    self.assertGreater(np.mean(late), 0.9)
    self.assertGreater(float(rows[-1]['routing_accuracy']), 0.9)
    self.assertNotEqual(float(rows[-1]['alpha_2']), 1.0)  # Eq. 13 moved the distance scalar.

  def _straight_run_and_a_binary_past_round_5(self, args: list[str], root: str, name: str):
    """Runs `args` to the end in this process (experiment `straight`, sparing a start-up of Python and TensorFlow),
    then starts them as the binary, a user's process (experiment `name`), and returns (that child, its stderr
    file) once it has written 5 rows."""
    in_process_run.start_worker()
    status, stderr = in_process_run.run(args + ['--experiment_name=straight'])
    self.assertEqual(status, 0, stderr)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), TF_CPP_MIN_LOG_LEVEL='3')
    stderr = open(os.path.join(root, f'{name}_stderr.txt'), 'w+')
    self.addCleanup(stderr.close)
    child = subprocess.Popen([sys.executable, _BINARY, *args, f'--experiment_name={name}'], env=env,
                             stdout=subprocess.DEVNULL, stderr=stderr)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and child.poll() is None:
      if os.path.exists(os.path.join(root, name, 'metrics.csv')) and len(_rows(os.path.join(root, name))) >= 5:
        break
      time.sleep(0.05)
    return child, stderr

  def test_a_run_stopped_by_sigterm_resumes_to_the_same_metrics(self):
    """The binary as a user runs it, stopped by a signal after round 5 and rerun: the same metrics as a run that was
    never stopped. Vanilla's rounds take 0.1 s, so it runs 80: the signal must land well before the run would end by
    itself, also when the machine is loaded and this process waits seconds for the CPU (40 rounds, 3.5 s after the
    fifth, once were not enough)."""
    root = self.create_tempdir().full_path
    args = _SMALL_RUN + ['--total_rounds=80', '--rounds_per_checkpoint=3', f'--root_output_dir={root}']
    child, stderr = self._straight_run_and_a_binary_past_round_5(args, root, 'resumed')
    child.send_signal(signal.SIGTERM)
    status = child.wait(timeout=60)
    stderr.seek(0)
    self.assertEqual(status, 128 + signal.SIGTERM, stderr.read()[-3000:])
    self.assertLess(len(_rows(os.path.join(root, 'resumed'))), 80)
    self._assert_resumes_to_the_straight_runs_metrics(args, root)

  def test_a_lost_worker_is_replaced_and_the_run_ends_with_the_same_metrics(self):
    """The binary's TFF worker, which holds the state between rounds, killed after round 5: the run resumes from its
    newest checkpoint with a new worker, says so in one line and ends with the metrics of a run never disturbed."""
    root = self.create_tempdir().full_path
    args = _SMALL_RUN + ['--total_rounds=80', '--rounds_per_checkpoint=3', f'--root_output_dir={root}']
    child, stderr = self._straight_run_and_a_binary_past_round_5(args, root, 'lost')
    os.kill(execution_context.worker_pids(child.pid)[0], signal.SIGKILL)
    status = child.wait(timeout=300)
    stderr.seek(0)
    messages = stderr.read()
    self.assertEqual(status, 0, messages[-3000:])
    self.assertRegex(messages, r"TFF's worker stopped answering \(UNAVAILABLE\) in round \d+ or later; resuming "
                     r'from the checkpoint of round \d+ with a new worker\.')
    _assert_same_rows(self, _rows(os.path.join(root, 'straight')), _rows(os.path.join(root, 'lost')))

  # Methods whose state goes beyond the global model. Each runs to the end once; a copy of its directory whose two
  # newest checkpoints are deleted is what a run killed after the third newest leaves (rows past it are dropped on
  # resume, as test_a_run_stopped_by_sigterm checks with the binary), so the resumed run restores the state of round
  # 6/8 of the run, with everything it has accumulated, and replays the last quarter: checkpoints every total/8
  # rounds, of which the newest three are kept.
  @parameterized.named_parameters(
      # FedEM keeping every client's mixture weights in the client-state store, which the checkpoints hold.
      ('fedem_with_client_state', 40, ['--algorithm=fedem', '--fedem_client_state']),
      # CFL's clusters (server state) and every client's cluster (client state); splits from round 3 on.
      ('cfl', 40, ['--algorithm=cfl', '--cfl_eps1=10', '--cfl_eps2=0', '--cfl_warmup_rounds=2']),
      ('pfedem_with_client_pi', 40, ['--algorithm=pfedem', '--pfedem_client_pi']),
      # FedGMM's GMM (server state) and every client's pi_c (client state).
      ('fedgmm', 40, ['--algorithm=fedgmm', '--fedgmm_gaussians=2', '--fedgmm_learners=2']),
      # FedRep's representation (server state) and every client's head (client state).
      ('fedrep', 40, ['--algorithm=fedrep', '--fedrep_head_epochs=2']),
      # ShiftEx's expert pool, memories and assignment (server state), every party's expert and previous window
      # (client state), 20 parties, all reporting in each census; windows of 3 rounds, with spawns, reuses and
      # merges (measured: 6, 4 and 4 in 24 rounds), and the replayed rounds 19-24 hold all three on the restored
      # pool (spawns in rounds 19 and 22, a reuse in 19, a merge in 21). Evaluated twice, as its 16 domains' test
      # sets take most of a round's time.
      ('shiftex', 24, ['--algorithm=shiftex', '--scenario=windowed', '--window_rounds=3', '--num_branches=4',
                       '--num_clients=20', '--rounds_per_eval=12']),
      # FedDrift's models, ids and window scores (server state), every client's model and reference (client state);
      # windows of 4 rounds under recurring concept drift, so models are created, evicted and merged (80 rounds: in
      # 40 none is merged); rounds 61-80 are replayed.
      ('feddrift', 80, ['--algorithm=feddrift', '--scenario=concept_drift', '--drift_type=recurring',
                        '--window_rounds=4', '--num_branches=4', '--feddrift_delta=0.02']))
  def test_a_run_resumed_from_a_checkpoint_gives_the_same_metrics(self, total_rounds, method_args):
    root = self.create_tempdir().full_path
    args = _SMALL_RUN + method_args + [f'--total_rounds={total_rounds}',
                                       f'--rounds_per_checkpoint={total_rounds // 8}', f'--root_output_dir={root}']
    in_process_run.start_worker()
    status, stderr = in_process_run.run(args + ['--experiment_name=straight'])
    self.assertEqual(status, 0, stderr)
    shutil.copytree(os.path.join(root, 'straight'), os.path.join(root, 'resumed'))
    checkpoints = run_directory.Checkpoints(os.path.join(root, 'resumed'))
    for round_num in checkpoints.rounds()[-2:]:
      checkpoints.discard(round_num)
    self.assertEqual(checkpoints.rounds()[-1], total_rounds * 6 // 8)
    self._assert_resumes_to_the_straight_runs_metrics(args, root)

  def _assert_resumes_to_the_straight_runs_metrics(self, args, root):
    """Reruns the run in root/resumed (in this process) and compares every row with root/straight's."""
    status, stdout, stderr = in_process_run.run_with_stdout(args + ['--experiment_name=resumed'])
    self.assertEqual(status, 0, stderr)
    self.assertIn('Resuming after round', stdout)
    _assert_same_rows(self, _rows(os.path.join(root, 'straight')), _rows(os.path.join(root, 'resumed')))


class OverlappedEvaluationTest(parameterized.TestCase):
  """Round t evaluated while round t + 1 trains gives the rows and checkpoints of evaluating in turn."""

  @parameterized.named_parameters(
      ('vanilla', 16, ['--algorithm=vanilla']),
      # FedRep evaluates every client's head from the client-state store, which the next rounds update.
      ('fedrep', 8, ['--algorithm=fedrep', '--scenario=evolving_domains', '--num_domains=4', '--num_clients=8',
                     '--fedrep_head_epochs=1']),
      # FedTEM's split round and its routed test batches.
      ('fedtem', 16, ['--algorithm=fedtem']))
  def test_same_rows_and_checkpoints_as_sequential_evaluation(self, total_rounds, method_args):
    root = self.create_tempdir().full_path
    # Evaluations every 4 rounds, checkpoints every total_rounds / 2: an evaluation overlaps up to 3 rounds (to the
    # next evaluation or checkpoint round), and some evaluation rounds hold their checkpoint until it is in.
    args = _SMALL_RUN + method_args + [f'--total_rounds={total_rounds}',
                                       f'--rounds_per_checkpoint={total_rounds // 2}', f'--root_output_dir={root}']
    in_process_run.start_worker()
    for name, overlap in (('in_turn', False), ('overlapped', True)):
      status, stderr = in_process_run.run(args + [f'--experiment_name={name}', f'--overlap_evaluation={overlap}'])
      self.assertEqual(status, 0, stderr)
    expected, actual = _rows(os.path.join(root, 'in_turn')), _rows(os.path.join(root, 'overlapped'))
    self.assertLen(actual, total_rounds)
    self.assertGreaterEqual(sum('test_accuracy' in row and row['test_accuracy'] != '' for row in actual), 2)
    _assert_same_rows(self, expected, actual)
    rounds = lambda name: run_directory.Checkpoints(os.path.join(root, name)).rounds()
    self.assertEqual(rounds('overlapped'), rounds('in_turn'))


class StateOnWorkerTest(parameterized.TestCase):
  """Rounds with the state kept on TFF's worker give the rows and checkpoints of sending it there and back."""

  @parameterized.named_parameters(
      # Census rounds (all 20 parties report, in rounds 3, 4 and 7) have more clients: the state moves to the worker's
      # executor for them and back. Evaluated once, as its test sets (one per window's domain) are most of its time.
      ('shiftex', ['--algorithm=shiftex', '--scenario=windowed', '--window_rounds=3', '--num_branches=3',
                   '--num_clients=20', '--rounds_per_eval=8']),
      # Client states stored by the loop, read and updated around every round.
      ('fedrep', ['--algorithm=fedrep', '--scenario=evolving_domains', '--num_domains=4', '--num_clients=8',
                  '--fedrep_head_epochs=1']))
  def test_same_rows_and_checkpoints_as_the_state_round_trip(self, method_args):
    root = self.create_tempdir().full_path
    args = _SMALL_RUN + method_args + ['--total_rounds=8', '--rounds_per_checkpoint=3', f'--root_output_dir={root}']
    in_process_run.start_worker()
    for name, on_worker in (('round_trip', False), ('on_worker', True)):
      status, stderr = in_process_run.run(args + [f'--experiment_name={name}', f'--state_on_worker={on_worker}'])
      self.assertEqual(status, 0, stderr)
    expected, actual = _rows(os.path.join(root, 'round_trip')), _rows(os.path.join(root, 'on_worker'))
    self.assertLen(actual, 8)
    _assert_same_rows(self, expected, actual)
    rounds = lambda name: run_directory.Checkpoints(os.path.join(root, name)).rounds()
    self.assertEqual(rounds('on_worker'), rounds('round_trip'))
    self.assertNotEmpty(rounds('on_worker'))


class ReliabilityTest(absltest.TestCase):
  """The reproductions of the reliability issue: each ends with one line and an untouched or resumed directory."""

  def _assert_one_line_error(self, result, status, pattern):
    self.assertEqual(result.returncode, status, result.stderr[-3000:])
    lines = result.stderr.strip().splitlines()
    self.assertLen(lines, 1, result.stderr[-3000:])
    self.assertRegex(lines[0], '^run_experiment: error: ' + pattern)

  def test_another_configuration_is_refused_and_overwrite_starts_afresh(self):
    root = self.create_tempdir().full_path
    args = _SMALL_RUN + ['--total_rounds=4', f'--root_output_dir={root}', '--experiment_name=x']
    self.assertEqual(_run(args).returncode, 0)
    metrics = os.path.join(root, 'x', 'metrics.csv')
    with open(metrics, 'rb') as f:
      before = f.read()
    refused = _run(args + ['--algorithm=fedtem', '--client_learning_rate=0.5'])
    self._assert_one_line_error(refused, 2, ".*another configuration.*algorithm: 'vanilla' -> 'fedtem'.*"
                                "client_learning_rate: 0.05 -> 0.5")
    with open(metrics, 'rb') as f:
      self.assertEqual(f.read(), before)
    # Output cadence may differ: the finished run is found complete and left as it was.
    resumed = _run(args + ['--rounds_per_eval=2', '--rounds_per_checkpoint=1'])
    self.assertEqual(resumed.returncode, 0, resumed.stderr[-3000:])
    self.assertIn('Resuming after round 4', resumed.stdout)
    with open(metrics, 'rb') as f:
      self.assertEqual(f.read(), before)
    replaced = _run(args + ['--algorithm=fedtem', '--overwrite'])
    self.assertEqual(replaced.returncode, 0, replaced.stderr[-3000:])
    self.assertNotIn('Resuming', replaced.stdout)
    rows = _rows(os.path.join(root, 'x'))
    self.assertEqual([int(row['round']) for row in rows], [1, 2, 3, 4])
    self.assertIn('prior', rows[0])

  def test_a_larger_total_rounds_extends_the_run_to_an_uninterrupted_runs_metrics(self):
    root = self.create_tempdir().full_path
    # Round 6 of the short run is evaluated and checkpointed because it is last; a 10-round run does neither there.
    args = _SMALL_RUN + ['--rounds_per_checkpoint=4', f'--root_output_dir={root}']
    in_process_run.start_worker()
    for name, rounds in (('straight', 10), ('extended', 6)):
      status, stderr = in_process_run.run(args + [f'--total_rounds={rounds}', f'--experiment_name={name}'])
      self.assertEqual(status, 0, stderr)
    status, stdout, stderr = in_process_run.run_with_stdout(args + ['--total_rounds=10', '--experiment_name=extended'])
    self.assertEqual(status, 0, stderr)
    self.assertIn('Extending the run of 6 rounds', stdout)
    self.assertIn('Resuming after round 4', stdout)
    expected, actual = _rows(os.path.join(root, 'straight')), _rows(os.path.join(root, 'extended'))
    self.assertEqual(len(actual), 10)
    for expected_row, actual_row in zip(expected, actual):
      self.assertEqual({k: v for k, v in actual_row.items() if k != 'round_seconds'},
                       {k: v for k, v in expected_row.items() if k != 'round_seconds'})
    with open(os.path.join(root, 'extended', 'config.json')) as f:
      recorded = json.load(f)
    self.assertEqual((recorded['total_rounds'], recorded['total_rounds_history']), (10, [6, 10]))
    status, stderr = in_process_run.run(args + ['--total_rounds=8', '--experiment_name=extended'])
    self.assertEqual(status, 2)
    self.assertRegex(stderr, 'holds a run of 10 rounds; --total_rounds=8 would shorten it')

  def test_a_run_whose_schedule_spans_its_length_is_not_extended(self):
    root = self.create_tempdir().full_path
    args = _SMALL_RUN + ['--scenario=mixture_drift', '--num_clients=10', f'--root_output_dir={root}',
                         '--experiment_name=x']
    self.assertEqual(_run(args + ['--total_rounds=6']).returncode, 0)
    self._assert_one_line_error(_run(args + ['--total_rounds=12']), 2,
                                '.* holds a run of 6 rounds that cannot be extended to 12: its cycles are laid over')

  def test_diverging_training_stops_with_one_line_and_exit_status_3(self):
    root = self.create_tempdir().full_path
    result = _run(_SMALL_RUN + ['--client_learning_rate=1e37', '--total_rounds=8', f'--root_output_dir={root}',
                                '--experiment_name=nan'])
    self._assert_one_line_error(result, 3, 'round 1: the training loss is not finite on any of the 5 clients')
    self.assertEqual(_rows(os.path.join(root, 'nan')), [])

  def test_run_directory_outside_the_root_or_unwritable_is_one_line(self):
    root = self.create_tempdir().full_path
    result = _run(_SMALL_RUN + [f'--root_output_dir={root}/a/b', '--experiment_name=../../escaped'])
    self._assert_one_line_error(result, 2, '--experiment_name must be a single directory name')
    self.assertEqual(os.listdir(root), [])
    blocker = self.create_tempfile().full_path
    result = _run(_SMALL_RUN + [f'--root_output_dir={blocker}/runs', '--experiment_name=x'])
    self._assert_one_line_error(result, 2, 'cannot write the run directory .*Not a directory')


class ScenarioTest(parameterized.TestCase):

  def test_default_command_metrics_are_unchanged(self):
    # The periodic scenario reproduces the landed day/night sampler exactly: the default command's first 32
    # rounds, recorded before the scenario layer existed, cell for cell (timings aside).
    root = self.create_tempdir().full_path
    result = _run_binary(['--total_rounds=32', f'--root_output_dir={root}', '--experiment_name=default'])
    self.assertEqual(result.returncode, 0, result.stderr[-3000:])
    golden_path = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'testdata',
                               'default_metrics_32_rounds.csv')
    with open(golden_path) as f:
      expected = list(csv.DictReader(f))
    actual = _rows(os.path.join(root, 'default'))
    self.assertLen(actual, len(expected))
    for expected_row, actual_row in zip(expected, actual):
      for column, value in expected_row.items():
        message = f'round {expected_row["round"]}, {column}'
        if column.endswith('_loss') and value:
          # A loss is a float32 sum whose last bit depends on the CPU's vector instructions: on two machines 8 of
          # the 128 loss cells differed by one float32 ulp (2.0499128 / 2.0499126) while every other cell was equal.
          np.testing.assert_allclose(float(actual_row[column]), float(value), rtol=2e-7, err_msg=message)
        else:
          self.assertEqual(actual_row[column], value, message)

  def _held_out_run(self, root: str, name: str, extra=()) -> dict:
    in_process_run.start_worker()
    status, stderr = in_process_run.run(_HELD_OUT_RUN + [f'--root_output_dir={root}', f'--experiment_name={name}',
                                                         *extra])
    self.assertEqual(status, 0, stderr[-3000:])
    row = _rows(os.path.join(root, name))[-1]
    self.assertIn('personalized_accuracy', row)
    return {key: float(value) for key, value in row.items() if value and key != 'round_seconds'}

  def test_evaluation_data_do_not_depend_on_the_global_seed_left_in_the_process(self):
    # Held-out splits are seeded shuffles built before the run sets TF's global seed; an earlier run in the same
    # process (tests, benchmarks) once changed them.
    root = self.create_tempdir().full_path
    tf.random.set_seed(None)
    fresh = self._held_out_run(root, 'fresh')
    tf.random.set_seed(7)
    self.assertEqual(self._held_out_run(root, 'after_seed'), fresh)

  def test_larger_inference_batches_give_the_same_metrics(self):
    root = self.create_tempdir().full_path
    one_batch = self._held_out_run(root, 'one_batch')
    grouped = self._held_out_run(root, 'grouped', ['--eval_inference_batch_size=64'])
    self.assertEqual(grouped.keys(), one_batch.keys())
    for key, value in one_batch.items():
      np.testing.assert_allclose(grouped[key], value, rtol=1e-5, atol=1e-6, err_msg=key)


if __name__ == '__main__':
  absltest.main()
