"""The simulation loop: sample a round's clients, run the learning process, evaluate, release, checkpoint.

Outputs in `output_dir` (all through `tff.program`):
  metrics.csv    `tff.program.CSVFileReleaseManager`, one row per round (key `round`): `q` (true q(t)),
                 `day_fraction`, the client work's measurements (`train_loss`, `train_accuracy`, ...),
                 `round_seconds`, and on evaluation rounds the test metrics;
  tensorboard/   `tff.program.TensorBoardReleaseManager`, the same values;
  checkpoints/   `tff.program.FileProgramStateManager`, the learning-process state after each checkpointed round.

Resuming: on start the latest loadable checkpoint is restored and training continues with the next round. Client
sampling and client shuffling depend only on (seed, round), and a re-released round replaces its CSV row, so an
interrupted and resumed run produces the same metrics as an uninterrupted one.
"""

import asyncio
import csv
import dataclasses
import os
import time
from typing import Optional

from absl import logging
import numpy as np
import tensorflow_federated as tff

from algorithms import registry as algorithms
from periodic_shift import client_sampler
from tasks import task as task_lib


@dataclasses.dataclass(frozen=True)
class LoopConfig:
  total_rounds: int
  rounds_per_eval: int
  client_spec: tff.simulation.baselines.ClientSpec
  seed: int
  rounds_per_checkpoint: int = 1


class _Outputs:
  """Release and state managers of one experiment directory."""

  def __init__(self, output_dir: str):
    self.loop = asyncio.new_event_loop()
    self.metrics = tff.program.GroupingReleaseManager([
        tff.program.CSVFileReleaseManager(os.path.join(output_dir, 'metrics.csv'), key_fieldname='round'),
        tff.program.TensorBoardReleaseManager(os.path.join(output_dir, 'tensorboard')),
    ])
    self.checkpoints = tff.program.FileProgramStateManager(os.path.join(output_dir, 'checkpoints'), keep_total=3)

  def release(self, values: dict, round_num: int) -> None:
    self.loop.run_until_complete(self.metrics.release(values, key=round_num))

  def save(self, state, round_num: int) -> None:
    self.loop.run_until_complete(self.checkpoints.save(state, round_num))

  def load_latest(self, structure) -> tuple[Optional[object], int]:
    """The newest checkpoint that loads (an unreadable newest one is skipped), with its round; else (None, 0)."""
    versions = self.loop.run_until_complete(self.checkpoints.get_versions()) or []
    for version in sorted(versions, reverse=True):
      try:
        return self.loop.run_until_complete(self.checkpoints.load(version, structure)), version
      except Exception as error:  # pylint: disable=broad-except
        logging.warning('Skipping unreadable checkpoint of round %d: %s', version, error)
    return None, 0


def _progress_line(round_num: int, total_rounds: int, row: dict, rounds_per_second: float) -> str:
  left = (total_rounds - round_num) / max(rounds_per_second, 1e-9)
  line = (f'round {round_num}/{total_rounds}  q={row["q"]:.2f} day={row["day_fraction"]:.2f}  '
          f'train_loss={row["train_loss"]:.3f} train_acc={row["train_accuracy"]:.3f}')
  if 'test_accuracy' in row:
    line += f'  test_acc={row["test_accuracy"]:.3f}'
  return line + f'  {rounds_per_second:.2f} rounds/s  left {int(left) // 60}m{int(left) % 60:02d}s'


def read_metrics(output_dir: str) -> list[dict[str, float]]:
  """The rows of metrics.csv as dicts of floats (empty cells left out)."""
  with open(os.path.join(output_dir, 'metrics.csv')) as f:
    return [{key: float(value) for key, value in row.items() if value != ''} for row in csv.DictReader(f)]


def final_metrics(rows: list[dict[str, float]], window_rounds: int) -> dict[str, float]:
  """The last evaluated row, and the mean of each test metric over the evaluations of the last `window_rounds`.

  Under a periodic shift the test accuracy oscillates within a period, so the mean over the last period
  (`<metric>_last_period_mean`) is the figure to compare methods by.
  """
  evaluated = [row for row in rows if 'test_accuracy' in row]
  if not evaluated:
    return {}
  last = evaluated[-1]
  window = [row for row in evaluated if row['round'] > last['round'] - window_rounds]
  result = dict(last)
  for key in (k for k in last if k.startswith('test_') or k == 'routing_accuracy'):
    result[f'{key}_last_period_mean'] = sum(row[key] for row in window) / len(window)
  return result


def run(algorithm: algorithms.Algorithm, task: task_lib.Task, sampler: client_sampler.RoundSampler,
        initial_weights: tff.learning.models.ModelWeights, config: LoopConfig, output_dir: str) -> None:
  """Trains rounds 1..total_rounds, resuming after the last checkpoint."""
  outputs = _Outputs(output_dir)
  state = algorithm.process.set_model_weights(algorithm.process.initialize(), initial_weights)
  restored, last_round = outputs.load_latest(state)
  if restored is not None:
    state = restored
    print(f'Resuming after round {last_round} from {os.path.join(output_dir, "checkpoints")}', flush=True)
  started, rounds_done = time.monotonic(), 0
  for round_num in range(last_round + 1, config.total_rounds + 1):
    round_started = time.monotonic()
    sample = sampler.sample(round_num)
    datasets = [
        task.client_dataset(mode, client_id, config.client_spec,
                            client_sampler.derived_seed(config.seed, round_num, index))
        for index, (client_id, mode) in enumerate(zip(sample.client_ids, sample.modes))
    ]
    output = algorithm.process.next(state, datasets)
    state = output.state
    row = {'q': float(sampler.mode_probabilities(round_num)[client_sampler.DAY]),
           'day_fraction': sample.mode_fraction(client_sampler.DAY)}
    row.update({key: float(np.asarray(value)) for key, value in output.metrics['client_work'].items()})
    if round_num % config.rounds_per_eval == 0 or round_num == config.total_rounds:
      row.update(algorithm.evaluate(state))
    row['round_seconds'] = time.monotonic() - round_started
    outputs.release(row, round_num)
    if round_num % config.rounds_per_checkpoint == 0 or round_num == config.total_rounds:
      outputs.save(state, round_num)
    rounds_done += 1
    print(_progress_line(round_num, config.total_rounds, row, rounds_done / (time.monotonic() - started)),
          flush=True)
