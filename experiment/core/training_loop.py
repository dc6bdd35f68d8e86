"""The simulation loop: sample a round's clients, run the learning process, evaluate, release, checkpoint.

Outputs in `output_dir` (all through `tff.program`):
  metrics.csv    one row per round (key `round`; `tff.program.CSVFileReleaseManager`, appending:
                 `run_directory.MetricsReleaseManager`): the scenario's true shift (`q` and `day_fraction` for the
                 periodic shift, domain shares for mixtures), the client work's measurements (`train_loss`,
                 `train_accuracy`, ...), `round_seconds`, and on evaluation rounds the test metrics (with
                 `test_mixture_accuracy` where the scenario weighs its domains' test sets);
  tensorboard/   `run_directory.TensorBoardReleaseManager` (TFF's, writing a row's scalars in one call), the same
                 values under grouped tags (`train/`, `test/`, `held_out/`, `routing/`, `shift/`, `run/`, `method/`:
                 `metric_names.tensorboard_tag`), and the run's configuration (config.json) through TensorBoard's
                 HParams plugin, so that runs can be compared there (`tensorboard --logdir ROOT`);
  checkpoints/   the learning-process state after each checkpointed round (`experiment.core.run_directory.Checkpoints`,
                 written atomically).

Resuming: on start the newest checkpoint that loads is restored (a damaged newer one is moved aside, saying so in
one line; none loading stops the run), metrics.csv is cut back to the rows up to its round, and training continues
with the next round. The scenario's plans and client shuffling depend only on (seed, round), so an interrupted and
resumed run produces the same metrics as an uninterrupted one, wherever it was killed. A SIGTERM or SIGHUP ends the
run at once, or at the latest after the round it arrived in (`execution_context.exit_if_signalled`), with status
128 + signal.

Evaluation overlaps training (`LoopConfig.overlap_evaluation`, on by default): the driver evaluates round t's weights
(in plain TensorFlow, `algorithms.core.evaluation`) on a thread while TFF's worker trains rounds t + 1, t + 2, ...
up to the next evaluation or checkpoint round, and writes the rows from round t on, and their checkpoints, once
that evaluation is in (`_RowRelease`), so rows, checkpoints, resumes and metrics are those of evaluating in turn;
an evaluation round's `round_seconds` is its training and the time the loop waited for its evaluation.

The state stays on TFF's worker between rounds (`LoopConfig.state_on_worker`, on by default without several
workers; `utils.resident_state`): a round sends its clients' data and reads back its metrics, and the state is read
only for evaluation and checkpoint rounds and a numeric fault, with the same values as sending it there and back.

Numeric faults: after every round the loop checks that some client trained finitely (clients that did not are left
out of the round's aggregates by the client work and counted in `nonfinite_clients`), and that the model weights and
every float of the method's and the server optimizer's state are finite (on the worker, when the state stays there).
If not, it saves the last good state (the previous round's) as a checkpoint, writes no row for the failed round, and
raises `NumericFault`, whose message names the round and the quantity.
"""

import asyncio
import collections
import concurrent.futures
import csv
import dataclasses
import functools
import os
import sys
import time
from typing import Callable, Optional

import numpy as np
from tensorboard.plugins.hparams import api as hparams_api
import tensorflow as tf
import tensorflow_federated as tff
import tree

from algorithms import registry as algorithms
from algorithms.core import client_state
from algorithms.core import learning_process
from algorithms.core import metric_names
from experiment.core import client_states
from experiment.core import routing_summary
from experiment.core import run_directory
from periodic_shift import client_sampler
from periodic_shift import scenario as scenario_lib
from tasks import task as task_lib
from utils import execution_context
from utils import resident_state


@dataclasses.dataclass(frozen=True)
class LoopConfig:
  total_rounds: int
  rounds_per_eval: int
  client_spec: tff.simulation.baselines.ClientSpec
  seed: int
  rounds_per_checkpoint: int = 1
  overlap_evaluation: bool = True
  state_on_worker: bool = True


class NumericFault(RuntimeError):
  """A round produced non-finite values; the message names the round and the quantity."""


def hparams(config: dict) -> dict:
  """config.json's values as TensorBoard's HParams plugin takes them (bool, int, float or str: None as 'none', a
  list joined by commas)."""
  def value(v):
    if v is None:
      return 'none'
    return ','.join(str(item) for item in v) if isinstance(v, list) else v
  return {name: value(v) for name, v in sorted(config.items())}


def grouped(row: dict, shift_columns=frozenset()) -> dict:
  """A metrics row as TensorBoard's nested structure: group -> column -> value (`metric_names.tensorboard_tag`;
  `shift_columns` are the scenario's own)."""
  groups = collections.defaultdict(dict)
  for column, value in row.items():
    group, _ = metric_names.tensorboard_tag(column, shift_columns).split('/', 1)
    groups[group][column] = value
  return dict(groups)


class _MetricsRelease:
  """metrics.csv and tensorboard/ of one run directory (`tff.program` release managers); on a fresh start the run's
  configuration is written once for TensorBoard's HParams plugin."""

  def __init__(self, output_dir: str, fresh: bool, shift_columns: frozenset):
    self._shift_columns = shift_columns
    self._csv = run_directory.MetricsReleaseManager(os.path.join(output_dir, run_directory.METRICS),
                                                    key_fieldname='round')
    tensorboard_dir = os.path.join(output_dir, 'tensorboard')
    self._tensorboard = run_directory.TensorBoardReleaseManager(tensorboard_dir)
    config = run_directory.read_config(output_dir)
    if fresh and config is not None:
      with tf.summary.create_file_writer(tensorboard_dir).as_default():
        hparams_api.hparams(hparams(config))

  def release(self, values: dict, round_num: int) -> None:
    asyncio.run(self._csv.release(values, key=round_num))
    asyncio.run(self._tensorboard.release(grouped(values, self._shift_columns), key=round_num))


def _first_nonfinite(structure) -> Optional[str]:
  """The path of the first float value of `structure` that is not finite, or None."""
  for path, value in tree.flatten_with_path(structure):
    value = np.asarray(value)
    if value.dtype.kind == 'f' and not np.all(np.isfinite(value)):
      return '/'.join(str(part) for part in path)
  return None


def numeric_fault(metrics: dict, num_clients: int, state: Callable[[], object], state_finite: bool = False
                  ) -> Optional[str]:
  """What a round has that is not finite (one phrase), or None when the round is sound: from its `metrics` and the
  new `state()` (read only when `state_finite` does not already vouch for every float of it)."""
  left_out = int(np.asarray(metrics['client_work'].get('nonfinite_clients', 0)))
  if left_out >= num_clients:
    return f'the training loss is not finite on any of the {num_clients} clients (local training diverged)'
  if state_finite:
    return None
  state = state()
  weights = learning_process.global_model_weights(state)
  for name, part in (('model weights', weights), ('method state', state.client_work),
                     ('server optimizer state', state.finalizer)):
    path = _first_nonfinite(part)
    if path is not None:
      left_out_note = f', {left_out} of {num_clients} clients left out as non-finite' if left_out else ''
      return f'{name} not finite (at {path or "the top level"}){left_out_note}'
  return None


def _progress_line(round_num: int, total_rounds: int, row: dict, rounds_per_second: float) -> str:
  left = (total_rounds - round_num) / max(rounds_per_second, 1e-9)
  shares = [f'{row[key]:.2f}' for key in sorted(row) if key.startswith('domain_share_')]
  if 'q' in row:
    shift = f'q={row["q"]:.2f} day={row["day_fraction"]:.2f}  '
  else:
    shift = f'shares={"/".join(shares)}  ' if shares else ''
  line = (f'round {round_num}/{total_rounds}  {shift}'
          f'train_loss={row["train_loss"]:.3f} train_acc={row["train_accuracy"]:.3f}')
  if row.get('nonfinite_clients'):
    line += f'  left_out={int(row["nonfinite_clients"])} (non-finite)'
  if 'test_accuracy' in row:
    line += f'  test_acc={row["test_accuracy"]:.3f}'
  return line + f'  {rounds_per_second:.2f} rounds/s  left {int(left) // 60}m{int(left) % 60:02d}s'


def read_metrics(output_dir: str) -> list[dict[str, float]]:
  """The rows of metrics.csv as dicts of floats (empty cells left out)."""
  with open(os.path.join(output_dir, 'metrics.csv')) as f:
    return [{key: float(value) for key, value in row.items() if value != ''} for row in csv.DictReader(f)]


def is_evaluation(row: dict) -> bool:
  """True for a metrics row holding an evaluation: the centralized test accuracy or, for methods without a global
  model (Local), the held-out clients' own (`personalized_accuracy`, `target_accuracy`, ...)."""
  return 'test_accuracy' in row or any(f'{name}_accuracy' in row for name in scenario_lib.HELD_OUT_NAMES)


def final_metrics(rows: list[dict[str, float]], window_rounds: int) -> dict[str, float]:
  """The last evaluated row, and the mean of each test metric over the evaluations of the last `window_rounds`.

  Under a periodic shift the test accuracy oscillates within a period, so the mean over the last period
  (`<metric>_last_period_mean`) is the figure to compare methods by.
  """
  evaluated = [row for row in rows if is_evaluation(row)]
  if not evaluated:
    return {}
  last = evaluated[-1]
  window = [row for row in evaluated if row['round'] > last['round'] - window_rounds]
  result = dict(last)
  for key in (k for k in last
              if k.startswith(('test_', metric_names.MIXED_PREFIX)) or k in metric_names.TEST_ROUTING_SCORES):
    result[f'{key}_last_period_mean'] = sum(row[key] for row in window) / len(window)
  result.update(routing_summary.run_matched_accuracy(rows, window_rounds))
  return result


def check_resumable(algorithm, output_dir: str) -> None:
  """Raises RunDirectoryError, editing nothing, when `output_dir` holds checkpoints of which none loads into
  `algorithm`'s state (a run of another version of the method's state)."""
  if not os.path.isdir(os.path.join(output_dir, run_directory.CHECKPOINTS)):
    return
  store = None
  if algorithm.initial_client_state is not None:
    store = client_states.ClientStateStore(algorithm.initial_client_state)
  run_directory.Checkpoints(output_dir).check_loadable(_checkpointed(algorithm.process.initialize(), store))


def _checkpointed(state, store: Optional[client_states.ClientStateStore]):
  """What a checkpoint holds: the learning-process state, with the client-state store when there is one."""
  if store is None:
    return state
  return collections.OrderedDict(process=state, client_states=store.snapshot())


def mixture_accuracy(metrics: dict, domain_names, weights: np.ndarray) -> float:
  """sum_k w_k acc_k over the per-domain test accuracies `test_<name>_accuracy`."""
  return float(sum(w * metrics[f'test_{name}_accuracy'] for w, name in zip(weights, domain_names)))


def round_datasets(task: task_lib.Task, clients, client_spec, seed: int, round_num: int) -> list:
  """The datasets of round `round_num`'s `clients` (their `scenario.ClientPlan`s), each shuffled by (seed, the
  client's derived seed of the round and its position)."""
  return [task.plan_dataset(client, client_spec, (seed, client_sampler.derived_seed(seed, round_num, index)))
          for index, client in enumerate(clients)]


class _ContextRounds:
  """Rounds through TFF's context: the whole state goes to the worker (or `round_context`'s several workers) and
  back every round; `resident_state.ResidentRounds`' interface."""

  def __init__(self, algorithm: algorithms.Algorithm, state, round_context: Optional[tff.framework.SyncContext]):
    self._algorithm, self._round_context = algorithm, round_context
    self._state, self._previous = state, None
    self.finite = False  # Not known: `numeric_fault` reads the state.

  def next(self, datasets) -> dict:
    """`process.next(state, datasets)`; in `round_context` when one is given (several workers), as the method's
    split round when it has one (`algorithm.split_round`, the same round in two computations TFF can split)."""
    if self._round_context is None:
      output = self._algorithm.process.next(self._state, datasets)
    else:
      with tff.framework.get_context_stack().install(self._round_context):
        output = (self._algorithm.split_round or self._algorithm.process.next)(self._state, datasets)
    self._previous, self._state = self._state, output.state
    return output.metrics

  def state(self):
    return self._state

  def previous_state(self):
    return self._previous


def _rounds(algorithm: algorithms.Algorithm, state, config: LoopConfig,
            round_context: Optional[tff.framework.SyncContext]):
  """How rounds run: with the state kept on this process's TFF worker (`config.state_on_worker`, without several
  workers), else through TFF's context."""
  if config.state_on_worker and round_context is None:
    return resident_state.ResidentRounds(algorithm.process.next, state)
  return _ContextRounds(algorithm, state, round_context)


def _round_clients(algorithm: algorithms.Algorithm, scenario: scenario_lib.Scenario, plan: scenario_lib.RoundPlan,
                   round_num: int) -> tuple[list[scenario_lib.ClientPlan], bool]:
  """(The round's clients: its participants, then, in a census round of a method that asks for one, every other
  party of the population, which only reports; whether the round is a census round)."""
  census = scenario.census_plan(round_num) if algorithm.census else None
  if census is None:
    return list(plan.clients), False
  sampled = {client.client_id for client in plan.clients}
  return list(plan.clients) + [client for client in census.clients if client.client_id not in sampled], True


def _checkpoint_due(round_num: int, config: LoopConfig) -> bool:
  return round_num % config.rounds_per_checkpoint == 0 or round_num == config.total_rounds


class _RowRelease:
  """Writes each round's metrics row, in round order, and after it the round's checkpoint when one is due.

  With `overlap`, an evaluation runs on a thread of this process while TFF's worker trains the next rounds: its
  round's row and every later one wait until it is in (rows are written in order; a waiting row is written as soon
  as the evaluation ahead of it is done), and at most one evaluation is in flight, as the next evaluation round, a
  checkpoint round and the end first wait for it (`flush`). It evaluates its round's own state (TFF returns new
  arrays every round, which later rounds do not change) with the client states as they were then
  (`ClientStateStore.frozen_get`). A checkpoint is written only after the rows up to its round, so a run stopped
  in between resumes from an earlier checkpoint, as without overlap, and memory holds at most one state more: the
  evaluated round's.
  """

  def __init__(self, outputs: _MetricsRelease, checkpoints: run_directory.Checkpoints, config: LoopConfig,
               store: Optional[client_states.ClientStateStore], overlap: bool, saved_round: int):
    self._outputs, self._checkpoints, self._config, self._store = outputs, checkpoints, config, store
    self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=1) if overlap else None
    self._evaluation: Optional[concurrent.futures.Future] = None  # The evaluation in flight.
    self._waiting = collections.deque()  # [round, row, seconds, checkpoint or None], from the evaluated round on.
    self.saved_round = saved_round  # The newest round whose checkpoint is on disk.
    self._started, self._rounds_done = time.monotonic(), 0

  def release(self, round_num: int, row: dict, state, seconds: float, evaluate: Optional[Callable] = None) -> None:
    """Writes round `round_num`'s `row`, with `evaluate()`'s metrics when given, and its checkpoint if due (`state`
    with the client states; `state` may be None in other rounds); `seconds` is the round's training time, to which
    its evaluation's adds."""
    checkpoint_due = _checkpoint_due(round_num, self._config)
    if evaluate is not None or checkpoint_due:
      self.flush()
    elif self._evaluation is not None and self._evaluation.done():
      self.flush()
    if evaluate is not None and self._executor is not None:
      self._evaluation = self._executor.submit(evaluate)
      self._waiting.append([round_num, row, seconds, _checkpointed(state, self._store) if checkpoint_due else None])
      return
    if evaluate is not None:
      started = time.monotonic()
      row.update(evaluate())
      seconds += time.monotonic() - started
    if self._evaluation is not None:
      self._waiting.append([round_num, row, seconds, None])
      return
    self._write(round_num, row, seconds, _checkpointed(state, self._store) if checkpoint_due else None)

  def flush(self) -> None:
    """Waits for the evaluation in flight and writes the rows behind it; the time waited counts in the evaluated
    round's `round_seconds`."""
    if self._evaluation is not None:
      waited_from = time.monotonic()
      metrics = self._evaluation.result()
      self._evaluation = None
      self._waiting[0][1].update(metrics)
      self._waiting[0][2] += time.monotonic() - waited_from
    while self._waiting:
      self._write(*self._waiting.popleft())

  def save_now(self, state, round_num: int) -> None:
    """Checkpoints `state` as round `round_num`'s (the last good state before a numeric fault)."""
    self._checkpoints.save(_checkpointed(state, self._store), round_num)
    self.saved_round = round_num

  def close(self) -> None:
    if self._executor is not None:
      self._executor.shutdown(wait=True, cancel_futures=True)

  def _write(self, round_num: int, row: dict, seconds: float, checkpoint) -> None:
    row['round_seconds'] = seconds
    self._outputs.release(row, round_num)
    if checkpoint is not None:
      self._checkpoints.save(checkpoint, round_num)
      self.saved_round = round_num
    self._rounds_done += 1
    execution_context.release_eager_caches()  # Rows are written with no evaluation in flight: the caches can go.
    print(_progress_line(round_num, self._config.total_rounds, row,
                         self._rounds_done / (time.monotonic() - self._started)), flush=True)


def run(algorithm: algorithms.Algorithm, task: task_lib.Task, scenario: scenario_lib.Scenario,
        initial_weights: tff.learning.models.ModelWeights, config: LoopConfig, output_dir: str,
        round_context: Optional[tff.framework.SyncContext] = None) -> None:
  """Trains rounds 1..total_rounds, resuming after the last checkpoint.

  Each round's `next` runs in `round_context` when given (`utils.remote_workers.round_context`: its clients on
  several TFF workers), else in the default context. With `config.overlap_evaluation`, round t's evaluation runs
  while the next rounds train (`_RowRelease`).

  When this process's worker is lost with the state it held (`resident_state.WorkerLost`: killed, out of memory),
  the run resumes from its newest checkpoint with a new worker, saying so in one line, as a rerun would; it stops
  when the worker is lost again before a newer checkpoint.

  Raises `NumericFault` (after checkpointing the last good state), `run_directory.RunDirectoryError` (no
  checkpoint loads), `resident_state.WorkerLost` (lost twice without progress) and
  `remote_workers.WorkerUnavailableError` (a worker of `round_context` stopped answering); the checkpoints written
  so far are kept.
  """
  newest_at_loss = None
  while True:
    try:
      return _run_from_newest_checkpoint(algorithm, task, scenario, initial_weights, config, output_dir,
                                         round_context)
    except resident_state.WorkerLost as lost:
      newest = max(run_directory.Checkpoints(output_dir).rounds(), default=0)
      if newest == newest_at_loss:
        raise
      newest_at_loss = newest
      print(f'{lost} in round {newest + 1} or later; resuming from the checkpoint of round {newest} with a new '
            'worker.', file=sys.stderr, flush=True)


def _run_from_newest_checkpoint(algorithm: algorithms.Algorithm, task: task_lib.Task,
                                scenario: scenario_lib.Scenario, initial_weights: tff.learning.models.ModelWeights,
                                config: LoopConfig, output_dir: str,
                                round_context: Optional[tff.framework.SyncContext]) -> None:
  """`run`, once: resumes after the newest checkpoint that loads and trains to the end."""
  checkpoints = run_directory.Checkpoints(output_dir)
  state = algorithm.process.set_model_weights(algorithm.process.initialize(), initial_weights)
  store = None
  if algorithm.initial_client_state is not None:
    store = client_states.ClientStateStore(algorithm.initial_client_state)
  restored, last_round, unloadable = checkpoints.load_latest(_checkpointed(state, store))
  for round_num, reason in unloadable:
    print(f'The checkpoint of round {round_num} does not load ({reason}); moved aside from '
          f'{checkpoints.path(round_num)}, resuming from round {last_round}.', file=sys.stderr, flush=True)
  if restored is not None:
    state = restored if store is None else restored['process']
    if store is not None:
      store.restore(restored['client_states'])
    print(f'Resuming after round {last_round} from {os.path.join(output_dir, run_directory.CHECKPOINTS)}',
          flush=True)
  run_directory.truncate_metrics(output_dir, last_round)
  shift_columns = frozenset(scenario.round_metrics(1, scenario.round_plan(1)))  # The same columns every round.
  rows = _RowRelease(_MetricsRelease(output_dir, last_round == 0, shift_columns), checkpoints, config, store,
                     config.overlap_evaluation, saved_round=last_round)
  try:
    _train(algorithm, task, scenario, state, store, config, round_context, rows, last_round, output_dir)
  except Exception:
    rows.flush()  # A round finished before the error keeps its row and checkpoint, as without overlap.
    raise
  finally:
    rows.close()


def _evaluate(algorithm: algorithms.Algorithm, task: task_lib.Task, scenario: scenario_lib.Scenario, state,
              client_states_of: Optional[Callable], round_num: int) -> dict:
  """The evaluation metrics of round `round_num`'s `state` (with every client's state for methods that evaluate
  them), and the scenario's `test_mixture_accuracy` where it weighs its domains."""
  metrics = (algorithm.evaluate(state) if client_states_of is None else
             algorithm.evaluate(state, client_states_of))
  weights = scenario.test_weights(round_num)
  if weights is not None and f'test_{task.domain_names[0]}_accuracy' in metrics:  # Methods with a global model.
    metrics['test_mixture_accuracy'] = mixture_accuracy(metrics, task.domain_names, weights)
  return metrics


def _train(algorithm, task, scenario, state, store, config, round_context, rows: _RowRelease, last_round: int,
           output_dir: str) -> None:
  """Rounds last_round + 1 .. total_rounds of `run`, their rows and checkpoints through `rows`."""
  rounds = _rounds(algorithm, state, config, round_context)
  for round_num in range(last_round + 1, config.total_rounds + 1):
    round_started = time.monotonic()
    plan = scenario.round_plan(round_num)
    clients, census = _round_clients(algorithm, scenario, plan, round_num)
    datasets = round_datasets(task, clients, config.client_spec, config.seed, round_num)
    client_ids = [client.client_id for client in clients]
    if store is not None:
      datasets = [collections.OrderedDict(dataset=dataset, client_state=state_dataset) for dataset, state_dataset
                  in zip(datasets, store.datasets(client_ids, len(plan.clients), census))]
    metrics = rounds.next(datasets)
    fault = numeric_fault(metrics, len(datasets), rounds.state, rounds.finite)
    if fault is not None:
      rows.flush()
      if rows.saved_round < round_num - 1:
        rows.save_now(rounds.previous_state(), round_num - 1)
      kept = (f'its checkpoint and metrics.csv rows up to round {round_num - 1} are kept' if round_num > 1 else
              'no round had completed')
      raise NumericFault(f'round {round_num}: {fault}; the run stopped and {kept} in {output_dir}.')
    measurements = dict(metrics['client_work'])
    collected = measurements.pop(client_state.CLIENT_STATES, None)
    if store is not None:
      store.update(client_ids, collected)
    row = scenario.round_metrics(round_num, plan)
    row.update({key: float(np.asarray(value)) for key, value in measurements.items()})
    evaluate, state = None, None
    if round_num % config.rounds_per_eval == 0 or round_num == config.total_rounds:
      state = rounds.state()
      evaluate = functools.partial(_evaluate, algorithm, task, scenario, state,
                                   store.frozen_get() if algorithm.evaluates_client_states else None, round_num)
    if _checkpoint_due(round_num, config):
      state = rounds.state()
    rows.release(round_num, row, state, time.monotonic() - round_started, evaluate)
    execution_context.exit_if_signalled()  # A SIGTERM whose exit a gc callback swallowed ends the run here.
  rows.flush()
