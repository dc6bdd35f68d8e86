"""run_series.py: runs in one long-lived process train exactly as in processes of their own, a refused run leaves the
process to the next one, and SIGTERM stops the running run with its checkpoint as it stops run_experiment."""

import csv
import json
import os
import signal
import subprocess
import sys
import time

from absl.testing import absltest

_REPOSITORY = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_RUN = ['--task=synthetic', '--algorithm=fedtem', '--total_rounds=2', '--rounds_per_eval=2', '--clients_per_round=3']
_ENV = dict(os.environ, PYTHONPATH=_REPOSITORY, TF_CPP_MIN_LOG_LEVEL='3')


def _rows(output_dir: str) -> list[dict]:
  """metrics.csv's rows without the wall time of each round."""
  with open(os.path.join(output_dir, 'metrics.csv')) as f:
    return [{key: value for key, value in row.items() if key != 'round_seconds'} for row in csv.DictReader(f)]


class RunSeriesTest(absltest.TestCase):

  def _series(self, root: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, os.path.join(_REPOSITORY, 'run_series.py')], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=_ENV, cwd=root)

  def _send(self, series: subprocess.Popen, root: str, name: str, arguments: list[str]) -> None:
    request = {'arguments': arguments + [f'--root_output_dir={root}', f'--experiment_name={name}'],
               'log': os.path.join(root, f'{name}.log')}
    series.stdin.write(json.dumps(request) + '\n')
    series.stdin.flush()

  def test_runs_in_one_process_match_runs_in_their_own(self):
    root = self.create_tempdir().full_path
    series = self._series(root)
    runs = {'first': _RUN, 'refused': _RUN + ['--algorithm=fedevolve'], 'bad_flag': _RUN + ['--no_such_flag=1'],
            'after_others': _RUN + ['--scenario=concept_drift', '--seed=1']}
    for name, arguments in runs.items():
      self._send(series, root, name, arguments)
    series.stdin.close()
    replies = [json.loads(line) for line in series.stdout]
    series.stdout.close()
    self.assertEqual(series.wait(timeout=600), 0)
    self.assertEqual(replies, [{'status': status, 'exits': False} for status in (0, 2, 2, 0)])
    with open(os.path.join(root, 'refused.log')) as f:
      self.assertIn("run_experiment: error: fedevolve learns from the order of a client's domains", f.read())
    with open(os.path.join(root, 'bad_flag.log')) as f:
      self.assertEqual(f.read(), "run_experiment: error: Unknown command line flag 'no_such_flag'\n")
    # The run after three others in the process, against the same run in a process of its own.
    alone = os.path.join(root, 'alone')
    subprocess.run([sys.executable, os.path.join(_REPOSITORY, 'run_experiment.py'), *runs['after_others'],
                    f'--root_output_dir={alone}', '--experiment_name=after_others'], env=_ENV, check=True,
                   capture_output=True)
    self.assertEqual(_rows(os.path.join(root, 'after_others')), _rows(os.path.join(alone, 'after_others')))
    self.assertNotEqual(_rows(os.path.join(root, 'first')), _rows(os.path.join(root, 'after_others')))

  def test_sigterm_stops_the_run_at_a_checkpoint_and_ends_the_process(self):
    root = self.create_tempdir().full_path
    series = self._series(root)
    self._send(series, root, 'long', _RUN + ['--total_rounds=400', '--rounds_per_checkpoint=1'])
    metrics = os.path.join(root, 'long', 'metrics.csv')
    deadline = time.monotonic() + 300
    while not (os.path.exists(metrics) and len(_rows(os.path.join(root, 'long'))) >= 2):
      self.assertLess(time.monotonic(), deadline)
      time.sleep(0.2)
    series.send_signal(signal.SIGTERM)
    self.assertEqual(json.loads(series.stdout.readline()), {'status': 128 + signal.SIGTERM, 'exits': True})
    series.stdout.close()
    self.assertEqual(series.wait(timeout=120), 128 + signal.SIGTERM)
    self.assertNotEmpty(os.listdir(os.path.join(root, 'long', 'checkpoints')))


if __name__ == '__main__':
  absltest.main()
