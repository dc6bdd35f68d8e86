"""The matrix: grids expand to the runs a researcher means, and the runner runs them resumably, N at a time.

The runner's tests drive a stand-in for run_experiment (a few lines of Python below) that finishes, fails, refuses
or waits as its flags say, so they check the runner's bookkeeping in seconds; one test runs the real binary.
"""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

from absl.testing import absltest

from experiment.core import grid as grid_lib
from experiment.core import matrix_runner
from utils import directory_lock

# A stand-in for run_series.py: for each run line, writes <root>/<name>/summary.json after --sleep seconds, or ends
# as --exit says; logs start and end times, its process id and, when SIGTERM stops it, `stopped`.
_REPOSITORY = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_FAKE_SERIES = textwrap.dedent('''
    import json, os, signal, sys, time
    out = None
    def stopped(signum, frame):
      if out:
        open(os.path.join(out, 'stopped'), 'w').close()
      sys.exit(128 + signum)
    signal.signal(signal.SIGTERM, stopped)
    for line in sys.stdin:
      request = json.loads(line)
      args = dict(a[2:].split('=', 1) for a in request['arguments'])
      out = os.path.join(args['root_output_dir'], args['experiment_name'])
      os.makedirs(out, exist_ok=True)
      with open(os.path.join(out, 'times'), 'a') as f:
        f.write(f'{time.time()} {os.getpid()} ')
      time.sleep(float(args.get('sleep', '0')))
      with open(os.path.join(out, 'times'), 'a') as f:
        f.write(f'{time.time()}\\n')
      status = int(args.get('exit', '0'))
      with open(request['log'], 'w') as log:
        if status == 2:
          print('run_experiment: error: --x must be positive; got 0.', file=log)
        elif status:
          print('Traceback (most recent call last):\\nRuntimeError: the run broke', file=log)
        else:
          final = {'test_accuracy': float(args['accuracy'])} if 'accuracy' in args else {}
          json.dump({'final_metrics': final}, open(os.path.join(out, 'summary.json'), 'w'))
      out = None
      print(json.dumps({'status': status, 'exits': status not in (0, 2, 3)}), flush=True)
      if status not in (0, 2, 3):
        sys.exit(status)
''')


def _grid(spec: str, **kwargs) -> grid_lib.Grid:
  import tomllib  # pylint: disable=g-import-not-at-top
  return grid_lib.from_spec(tomllib.loads(textwrap.dedent(spec)), **kwargs)


class GridTest(absltest.TestCase):

  def test_sweep_is_the_product_with_when_tables_and_exclusions(self):
    grid = _grid('''
        name = "{algorithm}_p{shift_p}_s{seed}"
        [sweep]
        algorithm = ["vanilla", "nds"]
        shift_p = [0.25, 1.0]
        seed = [0, 1]
        [flags]
        total_rounds = 8
        fedem_client_state = true
        [when.algorithm.nds]
        total_rounds = 4
        [[exclude]]
        algorithm = "nds"
        shift_p = 0.25
    ''')
    runs = grid.runs()
    self.assertEqual([run.name for run in runs], [
        'vanilla_p0.25_s0', 'vanilla_p0.25_s1', 'vanilla_p1_s0', 'vanilla_p1_s1', 'nds_p1_s0', 'nds_p1_s1'])
    self.assertEqual(runs[0].arguments(), ['--algorithm=vanilla', '--shift_p=0.25', '--seed=0', '--total_rounds=8',
                                           '--fedem_client_state=true'])
    self.assertIn('--total_rounds=4', runs[-1].arguments())
    self.assertNotIn('--total_rounds=8', runs[-1].arguments())
    # The command line's --set wins over [flags] and [when] tables.
    overridden = grid_lib.from_spec({'sweep': {'algorithm': ['nds']}, 'when': {'algorithm': {'nds': {'seed': 4}}}},
                                    overrides=[('seed', '5')]).runs()
    self.assertEqual(overridden[0].arguments(), ['--algorithm=nds', '--seed=5'])

  def test_cases_cross_the_sweep_one_set_of_flags_each(self):
    grid = _grid('''
        name = "{case}_s{seed}"
        [sweep]
        seed = [0, 1]
        [flags]
        algorithm = "shiftex"
        num_branches = 7
        [cases]
        default = {}
        pool_4 = { num_branches = 5 }
        w0 = { shiftex_detection = "w0_threshold", shiftex_alpha = 0.1 }
    ''', sweeps=[('case', ['default', 'pool_4'])])
    runs = grid.runs()
    self.assertEqual([run.name for run in runs], ['default_s0', 'default_s1', 'pool_4_s0', 'pool_4_s1'])
    self.assertEqual(runs[0].settings, (('case', 'default'), ('seed', '0')))
    self.assertEqual(runs[0].arguments(), ['--seed=0', '--algorithm=shiftex', '--num_branches=7'])
    self.assertEqual(runs[2].arguments(), ['--seed=0', '--algorithm=shiftex', '--num_branches=5'])  # The case wins.
    w0 = _grid('''
        [sweep]
        seed = [0]
        [cases]
        w0 = { shiftex_detection = "w0_threshold" }
    ''').runs()
    self.assertEqual(w0[0].arguments(), ['--seed=0', '--shiftex_detection=w0_threshold'])
    for spec, sweeps, message in (
        ({'sweep': {'seed': [0]}, 'cases': {'a': {'seed': 1}}}, (), r"\[cases.a\] sets 'seed', which the grid sweeps"),
        ({'sweep': {'seed': [0], 'case': ['a']}, 'cases': {'a': {}}}, (), "cannot have 'case' too"),
        ({'sweep': {'seed': [0]}, 'cases': {'a': {}}}, [('case', ['b'])], "the grid's cases are a; got b")):
      with self.assertRaisesRegex(grid_lib.GridError, message):
        grid_lib.from_spec(spec, sweeps=sweeps).runs()

  def test_default_names_and_command_line_sweeps_and_overrides(self):
    grid = grid_lib.from_spec({'sweep': {'seed': [0]}, 'flags': {'total_rounds': 8}},
                              overrides=[('total_rounds', '2')], sweeps=[('algorithm', ['a', 'b']), ('seed', ['3'])])
    self.assertEqual([(run.name, run.arguments()) for run in grid.runs()], [
        ('seed=3,algorithm=a', ['--seed=3', '--algorithm=a', '--total_rounds=2']),
        ('seed=3,algorithm=b', ['--seed=3', '--algorithm=b', '--total_rounds=2'])])

  def test_flag_values_are_written_as_the_binary_reads_them(self):
    self.assertEqual([grid_lib.flag_value(v) for v in (True, False, 1.0, 0.25, float('inf'), 3, 'inf', 10**-2.5,
                                                        1e-5, 6.2069)],
                     ['true', 'false', '1', '0.25', 'inf', '3', 'inf', '0.0031622776601683794', '1e-05', '6.2069'])
    self.assertEqual(float(grid_lib.flag_value(10**-2.5)), 10**-2.5)  # The binary reads the very float.

  def test_bad_grids_are_one_line(self):
    cases = [
        ({'sweep': {}}, 'the grid sweeps no flag'),
        ({'sweep': {'seed': []}}, "sweep 'seed' has no values"),
        ({'sweep': {'seed': [0]}, 'flag': {}}, 'unknown grid keys flag'),
        ({'sweep': {'seed': [0]}, 'when': {'task': {'x': {}}}}, "depends on 'task', which is not swept"),
        ({'sweep': {'seed': [0]}, 'exclude': [{'task': 'x'}]}, "names 'task', which is not swept"),
        ({'sweep': {'seed': [0]}, 'flags': {'--seed': 1}}, 'is not a flag name'),
        ({'sweep': {'seed': [0]}, 'flags': {'root_output_dir': '/x'}}, "root_output_dir is the matrix's to set"),
        ({'sweep': {'seed': [0, 1]}, 'name': 'run'}, "two runs of the grid are named 'run'"),
        ({'sweep': {'seed': [0]}, 'name': '{task}'}, "uses 'task', which is not a swept flag"),
        ({'sweep': {'seed': [0]}, 'report': {'metrics': []}}, r'\[report\] takes columns and percent'),
        ({'sweep': {'seed': [0]}, 'report': {'columns': 'test_accuracy'}}, 'columns is a list of metric names'),
    ]
    for spec, message in cases:
      with self.assertRaisesRegex(grid_lib.GridError, message):
        grid_lib.from_spec(spec).runs()
    with self.assertRaisesRegex(grid_lib.GridError, 'fixes a swept flag'):
      grid_lib.from_spec({'sweep': {'seed': [0]}}, overrides=[('seed', '1')])
    with self.assertRaisesRegex(grid_lib.GridError, r'^--sweep total_rounds: the grid fixes it in \[flags\]; use '
                                                    r'--set=total_rounds=\.\.\. to change it for every run\.$'):
      grid_lib.from_spec({'sweep': {'seed': [0]}, 'flags': {'total_rounds': 60}}, sweeps=[('total_rounds', ['240'])])

  def test_report_table(self):
    grid = _grid('''
        [sweep]
        seed = [0]
        [report]
        columns = ["target_server_accuracy", "target_accuracy"]
        percent = true
    ''')
    self.assertEqual((grid.report_columns, grid.report_percent), (('target_server_accuracy', 'target_accuracy'), True))
    self.assertEqual((_grid('[sweep]\nseed = [0]').report_columns, _grid('[sweep]\nseed = [0]').report_percent),
                     ((), False))

  def test_the_repository_grids_load(self):
    grids = os.path.join(_REPOSITORY, 'experiment', 'grids')
    counts = {name: len(grid_lib.load(os.path.join(grids, name)).runs()) for name in sorted(os.listdir(grids))}
    # every_method: 6 scenarios x 21 methods x 3 seeds less Local on 4 and FedEvolve on 5 scenarios; pfedem: 5
    # methods x 2 schedules x 5 seeds; fedevolve: 3 alphas x 5 methods x (2 tasks x 5 seeds + real digits x 10);
    # pfedem_separation: 4 methods x 2 schedules x 5 seeds; pfedem_frozen_encoder: (2 steps x 2 pseudo-counts +
    # Algorithm 1 at the far scale) x 2 schedules x 3 seeds; pfedem_gaussian: (pFedEM's 2 predictions + 2 methods) x
    # 3 seeds; fedevolve_rotation: 2 tasks x 3 methods x 5 seeds x (3 steps + 2 x 2 at step 15); fedevolve_towers: 2
    # distances x 2 initializations x 3 seeds; fedevp_circle: 2 rates x 3 seeds; fedevolve_emnist: 3 methods x 3
    # seeds under their defaults, FedAvg's other server step x 3 seeds, FedEvp's and FedEvolve's on seed 0;
    # fedevolve_emnist_packed: 3 seeds of the default and 4 ablations on seed 0; diurnal_synthetic: (7 methods x 3 p
    # + No-Dist-Shift) x 5 seeds and FedTKM's leak at 3 p x 5; diurnal_digits: (6 methods and FedTKM's leak) x 10
    # seeds; fedtkm_orientation: 2 orientations x (3 p x 3 seeds on synthetic, 10 seeds on digits and on emnist);
    # shiftex: 4 methods x 2 windowings x 10 seeds; fedgmm: 6 methods x 5 seeds; fedgmm_toy: 5 methods x 5 seeds;
    # server_step: 10 methods x 2 server steps x 3 seeds; shiftex_emnist_footing: (FedAvg with and without the
    # setup + ShiftEx under it) x 3 seeds; shiftex_emnist_tuning: 4 rates x 3 epochs x 2 seeds;
    # shiftex_fashion_mnist_tuning: 4 rates x 3 epochs x 2 seeds; shiftex_fashion_mnist: 4 methods x 10 seeds;
    # shiftex_fashion_mnist_ablation: (ShiftEx's default, FedAvg and 8 readings) x 5 seeds.
    self.assertEqual(counts, {'every_method.toml': 6 * 21 * 3 - (4 + 5) * 3, 'pfedem.toml': 5 * 2 * 5,
                              'pfedem_pretrained.toml': 2 * 2 * 6, 'pfedem_separation.toml': 4 * 2 * 5,
                              'pfedem_frozen_encoder.toml': (2 * 2 + 1) * 2 * 3, 'pfedem_gaussian.toml': (2 + 2) * 3,
                              'fedevolve.toml': 3 * 5 * (2 * 5 + 10), 'fedevolve_rotation.toml': 2 * 3 * 5 * (3 + 2 * 2),
                              'fedevolve_towers.toml': 2 * 2 * 3, 'fedevp_circle.toml': 2 * 3,
                              'fedevolve_emnist.toml': 3 * 3 + 3 + 2, 'fedevolve_emnist_packed.toml': 3 + 4,
                              'server_step.toml': 10 * 2 * 3,
                              'diurnal_synthetic.toml': (7 * 3 + 1) * 5 + 3 * 5,
                              'diurnal_digits.toml': (6 + 1) * 10, 'fedtkm_orientation.toml': 2 * (3 * 3 + 10 + 10),
                              'shiftex.toml': 4 * 2 * 10, 'shiftex_emnist_footing.toml': (2 + 1) * 3,
                              'shiftex_emnist_tuning.toml': 4 * 3 * 2, 'shiftex_fashion_mnist_tuning.toml': 4 * 3 * 2,
                              'shiftex_fashion_mnist.toml': 4 * 10, 'shiftex_fashion_mnist_ablation.toml': 10 * 5,
                              'shiftex_severity.toml': 2 * 5 * 3, 'fedgmm.toml': 6 * 5, 'fedgmm_toy.toml': 5 * 5,
                              'privacy.toml': 3 * (1 + 3 + 1) * 3})  # Mean, DP at 3 noises, secure.


class RunnerTest(absltest.TestCase):

  def setUp(self):
    super().setUp()
    self.root = self.create_tempdir().full_path
    self.command = [sys.executable, self.create_tempfile('fake_series.py', _FAKE_SERIES).full_path]
    self.lines = []

  def _run(self, sweeps, overrides=(), jobs=2):
    runs = grid_lib.from_spec({}, overrides=list(overrides), sweeps=sweeps).runs()
    return matrix_runner.run_matrix(runs, self.root, jobs, self.command, print_line=self.lines.append,
                                    poll_seconds=0.02)

  def test_runs_n_at_a_time_and_reports_failures_while_the_rest_go_on(self):
    outcomes = self._run([('exit', ['0', '1', '2'])], [('sleep', '0.3')], jobs=2)
    self.assertEqual(sorted((o.name, o.status) for o in outcomes), [
        ('exit=0', 'finished'), ('exit=1', 'failed'), ('exit=2', 'refused')])
    self.assertEqual(next(o.message for o in outcomes if o.status == 'refused'),
                     'run_experiment: error: --x must be positive; got 0.')
    self.assertEqual(next(o.message for o in outcomes if o.status == 'failed'), 'RuntimeError: the run broke')
    # Never more than 2 at once: each run's [start, end] overlaps at most one other.
    spans = []
    for name in ('exit=0', 'exit=1', 'exit=2'):
      spans += [(start, end) for start, _, end in self._times(name)]
    for start, _ in spans:
      self.assertLessEqual(sum(s <= start < e for s, e in spans), 2)
    self.assertEqual(self.lines[-2].split(',')[0], 'matrix: 1/3 done')
    self.assertIn('2 failed', self.lines[-2])
    self.assertRegex(self.lines[-1], r'^matrix: 3 runs in \d+s$')
    self.assertTrue(os.path.exists(os.path.join(self.root, matrix_runner.LOG_DIR, 'exit=1.log')))

  def _times(self, name: str) -> list[tuple[float, int, float]]:
    """(start, process id, end) of each time the stand-in ran `name`."""
    with open(os.path.join(self.root, name, 'times')) as f:
      return [(float(start), int(pid), float(end)) for start, pid, end in (line.split() for line in f)]

  def test_a_job_runs_its_runs_in_one_process_until_one_fails(self):
    outcomes = self._run([('exit', ['0', '2', '00', '1', '000'])], jobs=1)
    self.assertEqual([o.status for o in outcomes], ['finished', 'refused', 'finished', 'failed', 'finished'])
    names = [o.name for o in outcomes]
    pids = [self._times(name)[0][1] for name in names]
    self.assertLen(set(pids[:4]), 1)  # Finished and refused runs leave the process to the next run.
    self.assertNotEqual(pids[4], pids[3])  # A failed run's process ends; the next run has a fresh one.

  def test_each_finished_run_is_named_with_its_duration_and_headline_metric(self):
    self._run([('seed', ['0', '1', '2'])], [('accuracy', '0.8125')], jobs=1)
    finished = [line for line in self.lines if ' finished in ' in line]
    self.assertLen(finished, 3)
    for seed, line in zip(range(3), finished):
      self.assertRegex(line, rf'^matrix: seed={seed} finished in \d+s, test_accuracy 0\.8125$')
    # While runs are left, the estimate is at least a minute (these runs take a fraction of a second).
    progress = [line for line in self.lines if ' done, ' in line]
    self.assertEqual(progress[0], 'matrix: 1/3 done, 1 running, 1 waiting, 0 failed, ~1m00s left')
    self.assertEqual(progress[-1], 'matrix: 3/3 done, 0 running, 0 waiting, 0 failed')

  def test_headline_prefers_the_last_period_mean_and_skips_absent_metrics(self):
    os.makedirs(os.path.join(self.root, 'run'))
    with open(os.path.join(self.root, 'run', 'summary.json'), 'w') as f:
      json.dump({'final_metrics': {'test_accuracy': 0.9, 'test_accuracy_last_period_mean': 0.75}}, f)
    self.assertEqual(matrix_runner.headline(self.root, 'run'), 'test_accuracy_last_period_mean 0.7500')
    with open(os.path.join(self.root, 'run', 'summary.json'), 'w') as f:  # The headline its scenario declares.
      json.dump({'final_metrics': {'test_accuracy_last_period_mean': 0.75, 'test_mixture_accuracy': 0.5},
                 'headline_metric': 'test_mixture_accuracy'}, f)
    self.assertEqual(matrix_runner.headline(self.root, 'run'), 'test_mixture_accuracy 0.5000')
    self.assertEqual(matrix_runner.headline(self.root, 'absent'), '')

  def test_a_rerun_skips_finished_runs_and_retries_the_others(self):
    self._run([('exit', ['0', '1'])])
    self.lines.clear()
    outcomes = self._run([('exit', ['0', '1'])])
    self.assertEqual([(o.name, o.status) for o in outcomes], [('exit=1', 'failed')])
    self.assertEqual(self.lines[0], f'matrix: 2 runs in {self.root}, 1 already finished, 1 to run, 2 at a time')

  def test_each_finished_run_records_its_provenance_and_only_a_finished_one(self):
    runs = grid_lib.from_spec({}, overrides=[('sleep', '0')], sweeps=[('exit', ['0', '1'])]).runs()
    matrix_runner.run_matrix(runs, self.root, 1, self.command, print_line=self.lines.append, poll_seconds=0.02,
                             provenance={'commit': 'abc', 'command': 'python -m experiment.matrix --grid=g'})
    with open(matrix_runner.provenance_path(self.root, 'exit=0')) as f:
      recorded = json.load(f)
    self.assertEqual({key: recorded[key] for key in ('commit', 'command')},
                     {'commit': 'abc', 'command': 'python -m experiment.matrix --grid=g'})
    self.assertRegex(recorded['finished'], r'^\d{4}-\d\d-\d\d \d\d:\d\d UTC$')
    self.assertFalse(os.path.exists(matrix_runner.provenance_path(self.root, 'exit=1')))

  def test_a_second_matrix_over_the_root_skips_the_runs_the_first_runs(self):
    matrix = self._start_matrix()
    self.addCleanup(lambda: (matrix.kill(), matrix.communicate(timeout=60)))
    started = {name: self._started(name) for name in ('seed=0', 'seed=1')}
    outcomes = self._run([('seed', ['0', '1', '2'])], [('sleep', '0')])
    self.assertEqual(sorted((o.name, o.status) for o in outcomes),
                     [('seed=0', 'in use'), ('seed=1', 'in use'), ('seed=2', 'finished')])
    self.assertEqual({name: self._started(name) for name in started}, started)  # Neither started a second time.
    self.assertIn('matrix: 1/3 done, 0 running, 0 waiting, 0 failed, 2 in use elsewhere', self.lines)

  def _started(self, name: str) -> str:
    with open(os.path.join(self.root, name, 'times')) as f:
      return f.read()

  def test_a_run_whose_directory_another_process_holds_is_skipped(self):
    directory = os.path.join(self.root, 'exit=0')
    script = (f'from utils import directory_lock; lock = directory_lock.DirectoryLock({directory!r}).acquire(); '
              'print("held", flush=True); input()')
    holder = subprocess.Popen([sys.executable, '-c', script], env=dict(os.environ, PYTHONPATH=_REPOSITORY),
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    self.addCleanup(lambda: (holder.kill(), holder.communicate(timeout=60)))
    self.assertEqual(holder.stdout.readline(), 'held\n')
    with self.assertRaisesRegex(directory_lock.DirectoryInUse, rf'in use by another run \(pid {holder.pid} on host '):
      directory_lock.check_free(directory)
    outcomes = self._run([('exit', ['0'])])
    self.assertEqual([(o.name, o.status) for o in outcomes], [('exit=0', 'in use')])
    self.assertFalse(os.path.exists(os.path.join(directory, 'times')))

  def _start_matrix(self):
    """A matrix of two long runs in another process; returns it once both runs have started."""
    script = textwrap.dedent(f'''
        from experiment.core import grid, matrix_runner
        runs = grid.from_spec({{}}, overrides=[('sleep', '60')], sweeps=[('seed', ['0', '1'])]).runs()
        matrix_runner.run_matrix(runs, {self.root!r}, 2, {self.command!r}, poll_seconds=0.02)
    ''')
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    matrix = subprocess.Popen([sys.executable, '-c', script], env=env, stdout=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not all(os.path.exists(os.path.join(self.root, f'seed={s}', 'times')) for s in (0, 1)):
      self.assertLess(time.monotonic(), deadline)
      time.sleep(0.05)
    return matrix

  def _wait_for_stopped_runs(self):
    deadline = time.monotonic() + 60
    while not all(os.path.exists(os.path.join(self.root, f'seed={s}', 'stopped')) for s in (0, 1)):
      self.assertLess(time.monotonic(), deadline, 'a run outlived the matrix')
      time.sleep(0.05)

  def test_sigterm_stops_the_runs_and_says_how_to_finish(self):
    matrix = self._start_matrix()
    matrix.send_signal(signal.SIGTERM)
    output, _ = matrix.communicate(timeout=60)
    self.assertEqual(matrix.returncode, 128 + signal.SIGTERM)
    self.assertIn('matrix: stopped by signal 15; 2 runs left, rerun the same command to finish them.', output)
    self._wait_for_stopped_runs()

  def test_a_killed_matrix_leaves_no_run_behind(self):
    matrix = self._start_matrix()
    matrix.kill()
    matrix.communicate(timeout=60)
    self._wait_for_stopped_runs()  # The kernel's parent-death signal reached both runs.


class EndToEndTest(absltest.TestCase):

  def test_the_binary_runs_a_small_grid_and_refuses_an_unsupported_pair(self):
    root = self.create_tempdir().full_path
    repository = _REPOSITORY
    env = dict(os.environ, PYTHONPATH=repository, TF_CPP_MIN_LOG_LEVEL='3')
    args = [sys.executable, '-m', 'experiment.matrix', f'--root={root}', '--jobs=2',
            '--sweep=algorithm=vanilla_single,fedevolve', '--set=task=synthetic', '--set=total_rounds=2',
            '--set=rounds_per_eval=2', '--set=clients_per_round=3']
    result = subprocess.run(args, env=env, cwd=repository, capture_output=True, text=True, timeout=600)
    self.assertEqual(result.returncode, 1, result.stderr[-3000:])
    self.assertIn("matrix: refused: algorithm=fedevolve: run_experiment: error: fedevolve learns from the order of "
                  "a client's domains", result.stdout)
    with open(os.path.join(root, 'algorithm=vanilla_single', 'summary.json')) as f:
      self.assertIn('final_metrics', json.load(f))
    self.assertIn('matrix: 1/2 done, 0 running, 0 waiting, 1 failed', result.stdout)
    # The report of the root: its main table printed, the page written.
    self.assertRegex(result.stdout, r'\| algorithm \| seeds \| test accuracy, mean over the last period \(fraction\) '
                                    r'\|.*\n.*\n\| vanilla_single \| 1 \| 0\.\d{3} \|')
    self.assertRegex(result.stdout, rf'matrix: report: \d+ files in {root}/report; open {root}/report/index.html')
    self.assertTrue(os.path.exists(os.path.join(root, 'report', 'index.html')))
    with open(os.path.join(root, '.matrix', 'grid.json')) as f:
      record = json.load(f)
    self.assertIn('--sweep=algorithm=vanilla_single,fedevolve', record['command'])
    self.assertRegex(record['commit'], r'^([0-9a-f]{40}(\+changes)?)?$')  # Empty outside a git checkout.
    with open(os.path.join(root, 'report', 'index.html')) as f:
      page = f.read()
    self.assertIn('<h2>What was run</h2>', page)
    self.assertIn('--sweep=algorithm=vanilla_single,fedevolve', page)
    self.assertRegex(result.stdout, r'matrix: 2 runs in \d+(m\d\ds|s)\n')  # The elapsed time at the end.
    bad = subprocess.run(args[:3] + ['--sweep=seed'], env=env, cwd=repository, capture_output=True, text=True)
    self.assertEqual((bad.returncode, bad.stderr.strip()), (2, "matrix: error: --sweep takes flag=value; got 'seed'."))


if __name__ == '__main__':
  absltest.main()
