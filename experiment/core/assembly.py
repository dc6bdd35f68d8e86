"""One experiment from one `ExperimentConfig`: the place a run is put together.

    config = assembly.ExperimentConfig(
        task=assembly.TaskChoice(task='synthetic'),
        method=assembly.MethodChoice(algorithm='fedtkm'),
        training=assembly.TrainingConfig(total_rounds=64), outputs=assembly.OutputConfig(root_output_dir='/tmp/r'))
    summary = assembly.run(config)

`run` validates everything and the run directory before anything is built (`resolve`, a bad value is one
`ExperimentError` line with exit status 2), then builds the task, the scenario over the task's populations, the
evaluator over the test sets and held-out splits, the method's learning process, and runs the training loop
(`experiment.core.training_loop`) into `<root_output_dir>/<experiment_name>/`: config.json (the configuration,
`experiment.core.run_directory`), metrics.csv, tensorboard/, checkpoints/ and summary.json (the configuration, population
sizes, parameter counts, final metrics). Rerunning the same configuration after an interruption resumes after the
last checkpoint; another configuration in the directory is refused (only `CADENCE`, which cannot change results, may
differ) unless `overwrite`. A round with non-finite values ends the run with exit status 3 (`NUMERIC_FAULT_STATUS`),
a lost worker with 4 (`WORKER_LOST_STATUS`), a full disk or an exceeded quota with 5 (`STORAGE_FAULT_STATUS`), keeping
the last good checkpoint. A run owns its directory while it lives (`utils.directory_lock`): a second run of the same
directory, `overwrite` included, is refused in one line naming the holder, having written nothing.

Every field of the groups below declared with `utils.settings.setting` is a flag of `run_experiment.py` of the same
name, as are the chosen scenario's Settings (`periodic_shift.scenario`) and the method's Config settings
(`algorithms.core.method`). A training setting left None takes the method's default (its module's `DEFAULTS`, its
paper's), else the task's (Table 2 of "Diurnal or Nocturnal?" for its tasks).
config.json records every setting that can change results, by flag name, with the task's defaults resolved.
"""

import dataclasses
import os
import time
from typing import Optional

from absl import logging
import tensorflow as tf
import tensorflow_federated as tff

from algorithms import registry as algorithms
from algorithms.core import certainty
from algorithms.core import evaluation
from algorithms.core import learning_process
from algorithms.core import method
from algorithms.core import privacy_accounting
from experiment.core import built_methods
from experiment.core import run_directory
from experiment.core import shift_metrics
from experiment.core import training_loop
from experiment.setups import setup as setup_lib
from models import multi_branch
from periodic_shift import scenario as scenario_lib
from periodic_shift import scenarios
from tasks import registry as tasks
from tasks import task as task_lib
from utils import directory_lock
from utils import execution_context
from utils import loopback
from utils import remote_workers
from utils import resident_state
from utils import settings as settings_lib
from utils import ssh_tunnels

setting = settings_lib.setting
NUMERIC_FAULT_STATUS = 3
WORKER_LOST_STATUS = 4
STORAGE_FAULT_STATUS = 5


class ExperimentError(Exception):
  """A run that cannot start or go on: one line, and the exit status a binary ends with."""

  def __init__(self, message: str, status: int = 2):
    super().__init__(message)
    self.status = status


@dataclasses.dataclass(frozen=True)
class TaskChoice:
  """The task, its Settings (None: the task's defaults) and where its files are."""
  task: str = setting('synthetic', f'One of {", ".join(tasks.TASKS)}.')
  cache_dir: Optional[str] = setting(None, 'Directory holding the dataset files of emnist, cifar and stackoverflow '
                                     '(TFF\'s cache layout, see tasks/); default ~/.tff.')
  tfds_data_dir: Optional[str] = setting(
      None, 'Directory of datasets prepared by tensorflow-datasets (task mnist; task cifar reads CIFAR-10 from it when '
      'set), see tasks/tfds_files.py. Recorded with the run: CIFAR-10 read from it is split into other clients.')
  settings: object = None


@dataclasses.dataclass(frozen=True)
class ScenarioChoice:
  """The scenario, its Settings (None: the scenario's defaults) and whether its shift is removed."""
  scenario: str = setting(scenarios.SCENARIOS[0], f'Shift scenario: one of {", ".join(scenarios.SCENARIOS)} (see '
                          'periodic_shift/scenarios.py).')
  no_shift: bool = setting(
      False, 'Run the scenario without its shift (No-Dist-Shift, the reference of "Diurnal or Nocturnal?", Zhu et al., '
      '2022; what each scenario keeps fixed: its module\'s `build`, listed in periodic_shift/scenarios.py). '
      '--algorithm=nds is vanilla with --no_shift.')
  settings: object = None


@dataclasses.dataclass(frozen=True)
class MethodChoice:
  """The method and its Config (None: its defaults)."""
  algorithm: str = setting('vanilla', f'One of {", ".join(algorithms.ALGORITHMS)}.')
  config: object = None


@dataclasses.dataclass(frozen=True)
class SetupChoice:
  """The paper setup whose values the flags the command line leaves unset take (`experiment.setups.setup`), and its
  declaration (None: no setup)."""
  setup: Optional[str] = setting(
      None, 'A paper\'s experiment (docs/running.md, Paper setups): the task, scenario and training settings every '
      'method of its comparison shares, each from its paper or a named suite choice; explicit flags still win. '
      'Without it (or empty) a method takes its own paper\'s training settings, so methods run by name alone are not '
      'on one footing.')
  declared: object = None


@dataclasses.dataclass(frozen=True)
class TrainingConfig:
  """The schedule and the hyperparameters every method shares (`algorithms.core.method.Hyperparameters`)."""
  period: Optional[int] = setting(None, 'Period T in rounds (>= 2). Default: the task\'s.')
  window_rounds: int = setting(32, 'Rounds of a window: of a scenario that shifts at window boundaries, and the time '
                               'step of the methods that act per window (ShiftEx, FedDrift).')
  total_rounds: Optional[int] = setting(None, 'Training rounds. Default: the task\'s.')
  clients_per_round: Optional[int] = setting(None, 'm. Default: the task\'s.')
  client_epochs: Optional[int] = setting(None, 'Local epochs per round. Default: the method\'s, else 1.')
  client_batch_size: Optional[int] = setting(None, 'Local batch size. Default: the method\'s, else the task\'s.')
  max_elements_per_client: Optional[int] = setting(
      None, 'Cap on local examples per round. Default: the task\'s (512 for stackoverflow, none otherwise).')
  client_learning_rate: Optional[float] = setting(None, 'Client SGD learning rate. Default: the task\'s.')
  server_optimizer: Optional[str] = setting(
      None, 'The server optimizer on the aggregated update: adam (FedAdam, the optimizer of "Diurnal or Nocturnal?", '
      'Zhu et al., 2022), sgd (w - lr * update; lr 1 is the parameter averaging of FedAvg, pFedEM, FedGMM and '
      'FedEvolve), sgdm (sgd with --server_momentum: FedAvgM), adagrad or yogi (FedAdagrad, FedYogi; Reddi et al., '
      '2021). Default: the method\'s, else adam.')
  server_momentum: Optional[float] = setting(
      None, '--server_optimizer=sgdm: the momentum of the server step, in [0, 1). Default 0.9.')
  aggregator: str = setting(
      'mean', 'How the server aggregates the clients\' model updates: mean (example-weighted), dp (TFF\'s DP-FedAvg '
      'aggregator: adaptive clipping, zeroing, Gaussian noise) or secure (TFF\'s secure aggregator: the mean\'s sums '
      'as secure sums of values bounded per coordinate, simulated on one machine); methods whose update is one '
      'mean.')
  dp_noise_multiplier: float = setting(
      0.0, '--aggregator=dp: the Gaussian noise on the sum of clipped updates, in units of the clip norm; '
      'summary.json reports the run\'s epsilon at delta 1e-5.')
  accept_unprotected_sums: bool = setting(
      False, 'With --aggregator=dp or secure: run a method whose round also aggregates statistics of its own in the '
      'clear (FedTEM\'s and FedTKM\'s cluster statistics, pFedEM\'s Gaussian sums, T-shot k-means\' centers: each '
      'method\'s SENDS); the protection then covers the model update only, and summary.json and the '
      'report name what it does not cover. Without it such a run is refused.')
  server_learning_rate: Optional[float] = setting(
      None, 'Server learning rate. Default: the method\'s, else 1.0 (parameter averaging) with --server_optimizer=sgd '
      'and sgdm, the task\'s with adam, adagrad and yogi.')
  server_adam_epsilon: Optional[float] = setting(
      None, 'Epsilon of the server optimizers adam, adagrad and yogi (their adaptivity). Default: the task\'s.')
  num_branches: Optional[int] = setting(None, 'Branches K of the network (1 = single-branch). Default: the method\'s '
                                        '(ShiftEx\'s pool), else 2.')
  seed: int = setting(0, 'Seeds data generation, model initialization, sampling and shuffling.')


@dataclasses.dataclass(frozen=True)
class EvaluationConfig:
  rounds_per_eval: int = setting(8, 'Evaluate on the test sets every this many rounds.')
  eval_batch_size: int = setting(64, 'Test batch size: the group of test examples a method decides over (FedTEM, '
                                 'FedTKM: one test client).')
  eval_inference_batch_size: Optional[int] = setting(
      None, 'Test examples the model runs on at once, a multiple of --eval_batch_size whose batches stay the groups '
      '(same metrics); meant for accelerators (on a 2-core CPU it does not pay: docs/performance.md, Evaluation). '
      'Default: --eval_batch_size.')
  eval_routing: str = setting('batch', 'Test-time branch choice: per batch or per sample.')
  oracle_test_labels: bool = setting(
      False, 'Let methods that choose a branch, component, cluster or model at test time choose with the test labels '
      '(FedEM\'s EM on the labeled batch, CFL\'s and FedDrift\'s lowest-loss model): the oracle protocol of "Diurnal '
      'or Nocturnal?" (Zhu et al., 2022) for FedEM. Default: no test label decides anything; reports mark oracle '
      'runs.')
  oracle_test_domains: bool = setting(
      False, 'Let methods whose parties score their own test data with their own model (ShiftEx, FedDrift) score a '
      'domain\'s test data by the models of the clients that held that domain, which reads each test batch\'s true '
      'domain: an oracle, marked in reports. Default: no true domain is read (ShiftEx: the expert whose memory is '
      'nearest the batch\'s mean embedding; FedDrift: the active model most certain on the batch).')
  overlap_evaluation: bool = setting(
      True, 'Evaluate round t while round t + 1 trains (on a thread beside TFF\'s worker; the same rows, checkpoints '
      'and metrics as evaluating in turn); off for debugging or profiling one at a time.')
  mixed_test_q: tuple[str, ...] = setting(
      (), 'Shares q in [0, 1]: also test on batches holding both modes of a two-mode task, a share q of mode 1 (day) '
      'in every batch (metrics mixed_q<q>_accuracy); empty: per-mode test sets only.')


@dataclasses.dataclass(frozen=True)
class OutputConfig:
  root_output_dir: str = setting('/tmp/periodic_shift', 'Where experiments are written.')
  experiment_name: Optional[str] = setting(None, 'Sub-directory of the run. Default: made from the main flags.')
  overwrite: bool = setting(False, 'Delete the outputs of an earlier run in the experiment directory and start afresh '
                            '(otherwise a different configuration there stops the run).')
  rounds_per_checkpoint: int = setting(
      8, 'Checkpoint every this many rounds (and after the last); a resumed run recomputes the rounds after the last '
      'checkpoint, with identical results.')
  unlocked_run_directory: bool = setting(
      False, 'Run even where the run directory\'s filesystem keeps no locks (a run is otherwise refused there): '
      'nothing then stops a second run of the same directory from writing there at once.')


@dataclasses.dataclass(frozen=True)
class WorkersConfig:
  workers: tuple[str, ...] = setting(
      (), 'TFF workers (tools/start_worker.sh) that run each round\'s clients in subrounds: ssh://[user@]host:port for '
      'a worker on another host\'s loopback, reached through an SSH tunnel the run opens, or host:port (a non-loopback '
      'one is used with a warning: the worker has no TLS or authentication); empty: this process\'s own worker.')
  subrounds: Optional[int] = setting(None, 'With --workers: subrounds per round (default: one per worker; more run in '
                                     'turn).')
  worker_timeout: float = setting(60.0, 'With --workers: seconds to wait for a worker that does not answer, at '
                                  'start-up and during the run, before stopping.')
  state_on_worker: bool = setting(
      True, 'Without --workers: keep the learning-process state on TFF\'s worker between rounds, so a round sends only '
      'its data and reads only its metrics (the state is read for evaluations and checkpoints; the same results); '
      'off: the whole state goes to the worker and back every round.')


@dataclasses.dataclass(frozen=True)
class ExperimentConfig:
  task: TaskChoice = TaskChoice()
  scenario: ScenarioChoice = ScenarioChoice()
  method: MethodChoice = MethodChoice()
  setup: SetupChoice = SetupChoice()
  training: TrainingConfig = TrainingConfig()
  evaluation: EvaluationConfig = EvaluationConfig()
  outputs: OutputConfig = OutputConfig()
  workers: WorkersConfig = WorkersConfig()


GROUPS = {field.name: field.type for field in dataclasses.fields(ExperimentConfig)}
# Settings that cannot change a run's results: output cadence, locations, where rounds and inference run (several
# workers or larger inference batches give the same results, floats to the order of summation) and whether evaluation
# overlaps training. A run may be resumed
# with other values; config.json leaves them out.
CADENCE = frozenset({'rounds_per_eval', 'rounds_per_checkpoint', 'root_output_dir', 'experiment_name', 'cache_dir',
                     'workers', 'subrounds', 'worker_timeout', 'eval_inference_batch_size', 'overwrite',
                     'overlap_evaluation', 'state_on_worker', 'accept_unprotected_sums',
                     'unlocked_run_directory', 'setup'})
# The server optimizers whose learning rate 1 is parameter averaging (their default rate), and sgdm's momentum.
_AVERAGING_OPTIMIZERS = ('sgd', 'sgdm')
_ADAPTIVE_OPTIMIZERS = ('adam', 'adagrad', 'yogi')
_SERVER_MOMENTUM = 0.9
_SERVER_OPTIMIZER = 'adam'  # FedAdam, the server optimizer of "Diurnal or Nocturnal?" (Zhu et al., 2022).
_POSITIVE = ('window_rounds', 'client_epochs', 'client_batch_size', 'total_rounds', 'rounds_per_eval',
             'rounds_per_checkpoint', 'eval_batch_size', 'num_branches', 'client_learning_rate', 'server_learning_rate',
             'server_adam_epsilon')


def settings_of(group) -> dict:
  """A group's settings (fields declared with `setting`), by name."""
  return {field.name: getattr(group, field.name) for field in settings_lib.declared(type(group))}


@dataclasses.dataclass(frozen=True)
class Resolved:
  """A validated configuration: the task's defaults filled in, each plug-in's settings, where the run writes."""
  config: ExperimentConfig
  training: TrainingConfig  # No None left where the task has a default.
  task_settings: object
  scenario_settings: object
  method_config: object
  hparams: method.Hyperparameters
  shift_free: bool
  output_dir: str
  record: dict  # config.json: flag name -> value.
  defaults: dict  # flag name -> the value a run that did not record it had.
  sources: dict  # Training flag name -> where its value comes from (`FLAG`, `METHOD`, ...; `_resolve_training`).

  @property
  def schedule(self) -> scenario_lib.Schedule:
    return _schedule(self.training)


def _schedule(training: TrainingConfig) -> scenario_lib.Schedule:
  return scenario_lib.Schedule(training.clients_per_round, training.seed, training.total_rounds, training.period,
                               training.window_rounds)


# Where a resolved training setting's value comes from (config.json's `value_sources`).
FLAG, METHOD, OPTIMIZER, TASK, SUITE, RECORDED = 'flag', 'method', 'server optimizer', 'task', 'suite', 'recorded'
_SUITE_DEFAULTS = {'server_optimizer': _SERVER_OPTIMIZER, 'client_epochs': 1, 'num_branches': 2}
# A method's own training settings: its defaults of these apply under a setup too (a setup shares everything else).
_METHOD_OWN = ('num_branches',)


def _resolve_training(config: ExperimentConfig, recorded: Optional[dict] = None) -> tuple[TrainingConfig, dict]:
  """(the training settings, flag name -> where its value comes from), each setting left None resolved as: the value
  `recorded` in the run directory being resumed (an older run keeps the values it was started with when a default
  changed since), else the method's default (its module's `DEFAULTS`, its paper's), else the server optimizer's
  (learning rate 1 for sgd and sgdm, parameter averaging; sgdm's momentum), else the task's, else the suite's, else
  None. A method's server-step defaults (`server_*`) go with its server optimizer: with another optimizer chosen by
  flag they do not apply."""
  recorded = {name: value for name, value in (recorded or {}).items() if value is not None}
  # Under a setup no method's paper defaults apply but its own (`_METHOD_OWN`): every method of the comparison gets
  # the same values.
  method_defaults = algorithms.defaults(config.method.algorithm)
  if config.setup.declared:
    method_defaults = {name: value for name, value in method_defaults.items() if name in _METHOD_OWN}
  chosen = config.training.server_optimizer
  method_optimizer = method_defaults.get('server_optimizer', _SERVER_OPTIMIZER)
  if chosen is not None and chosen != method_optimizer:
    method_defaults = {name: value for name, value in method_defaults.items() if not name.startswith('server_')}
  optimizer = chosen or recorded.get('server_optimizer', method_optimizer)
  if optimizer != recorded.get('server_optimizer', optimizer):
    recorded = {name: value for name, value in recorded.items() if not name.startswith('server_')}
  layers = ((RECORDED, recorded), (METHOD, method_defaults), (OPTIMIZER, _optimizer_defaults(optimizer)),
            (TASK, tasks.defaults(config.task.task)), (SUITE, _SUITE_DEFAULTS))
  values, sources = {}, {}
  declared = {field.name: field.default for field in settings_lib.declared(TrainingConfig)}
  for name, value in settings_of(config.training).items():
    if value is not None:  # A flag, or a setting the suite fixes unless a flag sets it.
      values[name], sources[name] = value, FLAG if value != declared[name] else SUITE
      continue
    found = next(((source, layer[name]) for source, layer in layers if name in layer), None)
    if found is not None:
      sources[name], values[name] = found
  return dataclasses.replace(config.training, **values), sources


def _optimizer_defaults(optimizer: str) -> dict:
  """The defaults a server optimizer brings: learning rate 1 (parameter averaging) and momentum for sgd(m)."""
  if optimizer not in _AVERAGING_OPTIMIZERS:
    return {}
  return dict(server_learning_rate=1.0, **({'server_momentum': _SERVER_MOMENTUM} if optimizer == 'sgdm' else {}))


def _check_training(config: ExperimentConfig, training: TrainingConfig) -> None:
  if training.server_optimizer not in learning_process.SERVER_OPTIMIZERS:
    raise ValueError(f'--server_optimizer must be one of {", ".join(learning_process.SERVER_OPTIMIZERS)}; got '
                     f'{training.server_optimizer!r}.')
  if training.aggregator not in learning_process.AGGREGATORS:
    raise ValueError(f'--aggregator must be one of {", ".join(learning_process.AGGREGATORS)}; got '
                     f'{training.aggregator!r}.')
  if training.server_momentum is not None and (training.server_optimizer != 'sgdm'
                                               or not 0 <= training.server_momentum < 1):
    raise ValueError(f'--server_momentum must be in [0, 1) and is the momentum of --server_optimizer=sgdm; got '
                     f'{training.server_momentum:g} with --server_optimizer={training.server_optimizer}.')
  if training.dp_noise_multiplier < 0 or (training.dp_noise_multiplier > 0 and training.aggregator != 'dp'):
    raise ValueError(f'--dp_noise_multiplier must be >= 0 and is the noise of --aggregator=dp; got '
                     f'{training.dp_noise_multiplier:g} with --aggregator={training.aggregator}.')
  values = dict(settings_of(training), **settings_of(config.evaluation), **settings_of(config.outputs))
  for name in _POSITIVE:
    if values[name] is None or not values[name] > 0:
      raise ValueError(f'--{name} must be > 0; got {values[name]}.')
  if training.clients_per_round is None or training.clients_per_round < 1:
    raise ValueError(f'--clients_per_round must be >= 1; got {training.clients_per_round}.')
  if training.max_elements_per_client is not None and training.max_elements_per_client < 1:
    raise ValueError(f'--max_elements_per_client must be >= 1 when set; got {training.max_elements_per_client}.')
  _check_private_aggregation(config.method.algorithm, training)
  if config.evaluation.eval_routing not in certainty.ROUTINGS:
    raise ValueError(f'--eval_routing must be one of {", ".join(certainty.ROUTINGS)}; got '
                     f'{config.evaluation.eval_routing!r}.')


def _check_adaptive_step(resolved: Resolved, task) -> None:
  """Refuses (ValueError, one line) an adaptive server optimizer at the task's learning rate for a method that does
  not learn under it on its paper's network (its `DEFAULTS.untuned_adaptive_step` says why), when the task gives it
  a network other than its own (`models.representation.Representation.own_network`: the task's rate was chosen for
  its own); a rate set by flag is the user's choice, and a run in progress resumes with the rate it started with."""
  algorithm, training = resolved.config.method.algorithm, resolved.training
  reason = algorithms.METHODS[algorithm].module.DEFAULTS.untuned_adaptive_step
  if (reason and not task.representation_split().own_network and training.server_optimizer in _ADAPTIVE_OPTIMIZERS
      and resolved.sources.get('server_learning_rate') not in (FLAG, RECORDED)
      and not resolved.sources.get('server_learning_rate', '').startswith('setup ')):
    raise ValueError(f'--server_optimizer={training.server_optimizer} at task {task.name}\'s learning rate is refused '
                     f'for {algorithm}: {reason}; set --server_learning_rate (and --server_adam_epsilon) to tune it '
                     'for this network, or keep its default server step.')


def _check_private_aggregation(algorithm: str, training: TrainingConfig) -> None:
  """Refuses (ValueError, one line) `--aggregator=dp|secure` for a method that aggregates its updates its own way, and
  for one that aggregates statistics of its own in the clear unless `--accept_unprotected_sums`."""
  if training.aggregator == 'mean':
    return
  clear = algorithms.METHODS[algorithm].module.SENDS
  if clear.own_aggregation:
    raise ValueError(f'--aggregator={training.aggregator} replaces the mean of one model update; {algorithm} '
                     'aggregates its updates its own way (per network or component), so it runs with '
                     '--aggregator=mean only.')
  if clear.method_sums and not training.accept_unprotected_sums:
    raise ValueError(f'--aggregator={training.aggregator} protects the model update only; {algorithm} also '
                     f'aggregates {", ".join(clear.method_sums)} in the clear: pass --accept_unprotected_sums to run '
                     'it so (summary.json and the report record what is not covered).')


SECURE_SIMULATED = 'simulated: the server sees the clipped, quantized sum in the clear'


def _privacy_caveats(algorithm: str, training: TrainingConfig) -> dict:
  """What `--aggregator=dp|secure` covers in this run and what it does not, for summary.json and the log."""
  clear = algorithms.METHODS[algorithm].module.SENDS
  caveats = {'covers': 'the model update and its weight',
             'not_covered': {'training_metrics': list(method.TRAINING_METRICS),
                             'method_sums': list(clear.method_sums),
                             'simulation_only': list(clear.simulation_only)}}
  if training.aggregator == 'secure':
    caveats['simulated'] = SECURE_SIMULATED
  return caveats


def mixed_test_shares(evaluation_config: EvaluationConfig) -> list[float]:
  """The shares of `mixed_test_q`; raises ValueError for one that is not a number in [0, 1]."""
  shares = []
  for text in evaluation_config.mixed_test_q:
    try:
      share = float(text)
    except ValueError:
      share = float('nan')
    if not 0.0 <= share <= 1.0:
      raise ValueError(f'--mixed_test_q takes shares in [0, 1]; got {text!r}.')
    shares.append(share)
  return shares


def inference_groups(evaluation_config: EvaluationConfig) -> int:
  """Test batches per inference batch (`evaluation.Evaluator`); raises ValueError on a bad value."""
  size, batch = evaluation_config.eval_inference_batch_size, evaluation_config.eval_batch_size
  if size is None:
    return 1
  if size < 1 or size % batch:
    raise ValueError(f'--eval_inference_batch_size must be a positive multiple of --eval_batch_size ({batch}); got '
                     f'{size}.')
  return size // batch


def _hyperparameters(config: ExperimentConfig, training: TrainingConfig) -> method.Hyperparameters:
  return method.Hyperparameters(
      client_learning_rate=training.client_learning_rate, server_step=server_step(training),
      num_branches=algorithms.num_branches(config.method.algorithm, training.num_branches), period=training.period,
      clients_per_round=training.clients_per_round, window_rounds=training.window_rounds,
      eval_routing=config.evaluation.eval_routing, seed=training.seed,
      oracle_test_labels=config.evaluation.oracle_test_labels,
      oracle_test_domains=config.evaluation.oracle_test_domains)


def server_step(training: TrainingConfig) -> learning_process.ServerStep:
  """The server optimizer and model aggregator of resolved training settings, as every method is given them."""
  return learning_process.ServerStep.named(
      training.server_optimizer, training.server_learning_rate, training.server_adam_epsilon,
      training.server_momentum or 0.0, training.aggregator, training.dp_noise_multiplier, training.clients_per_round)


def _output_dir(config: ExperimentConfig, training: TrainingConfig, scenario_settings) -> str:
  """<root_output_dir>/<experiment_name>, by default `<task>_<method>_<the scenario's run_name>_s<seed>`; raises
  RunDirectoryError for a name that would leave the root."""
  name = config.outputs.experiment_name
  if name is None:
    scenario_name = scenarios.run_name(config.scenario.scenario, scenario_settings, _schedule(training))
    name = f'{config.task.task}_{config.method.algorithm}_{scenario_name}_s{training.seed}'
  run_directory.validate_name(name)
  root = config.outputs.root_output_dir
  if not os.path.isabs(root):  # Under `bazel run`, relative paths mean the user's working directory.
    root = os.path.join(os.environ.get('BUILD_WORKING_DIRECTORY', os.getcwd()), root)
  return os.path.join(root, name)


def _method_settings(name: str, config) -> tuple[dict, dict]:
  """(flag name -> value, flag name -> default) of the method's own settings."""
  module = algorithms.METHODS[name].module
  fields = method.settings(module.NAME, module.Config)
  return ({flag: getattr(config, field.name) for flag, field in fields.items()},
          {flag: field.default for flag, field in fields.items()})


def _record(config: ExperimentConfig, resolved_training: TrainingConfig, task_settings, scenario_settings,
            method_config) -> tuple[dict, dict]:
  """(config.json's record, flag name -> default): every setting that can change results, by flag name."""
  groups = [getattr(config, name) for name in GROUPS] + [scenario_settings]
  record = {name: value for group in groups for name, value in settings_of(group).items()}
  defaults = {field.name: field.default for group in groups for field in settings_lib.declared(type(group))}
  record.update(settings_of(resolved_training))
  task_values, task_defaults = tasks.settings_record(config.task.task, task_settings)
  method_values, method_defaults = _method_settings(config.method.algorithm, method_config)
  record.update(task_values, **method_values)
  defaults.update(task_defaults, **method_defaults)
  record = {name: list(value) if isinstance(value, tuple) else value for name, value in record.items()
            if name not in CADENCE}
  return record, defaults


def _check_finite(config: ExperimentConfig, task_settings, scenario_settings, method_config) -> None:
  """`utils.settings.check_finite` on every settings object of `config`: each float flag is a finite number."""
  for name in GROUPS:
    settings_lib.check_finite(getattr(config, name))
  settings_lib.check_finite(task_settings, {field.name: flag for flag, owner, _, field in tasks.declared_settings()
                                            if owner == config.task.task})
  settings_lib.check_finite(scenario_settings)
  module = algorithms.METHODS[config.method.algorithm].module
  settings_lib.check_finite(method_config, {field.name: flag for flag, field in
                                            method.settings(module.NAME, module.Config).items()})


def resolve(config: ExperimentConfig) -> Resolved:
  """Validates `config` and the run directory without building anything; raises ValueError (one line, naming the
  flag) for a bad value and RunDirectoryError for a directory that holds another run."""
  task_name, choice, algorithm = config.task.task, config.scenario, config.method.algorithm
  if (config.setup.setup is None) != (config.setup.declared is None):
    raise ValueError(f'--setup={config.setup.setup} is given without its declaration (experiment.setups.registry).')
  tasks.module(task_name)  # An unknown name, in one line.
  scenarios.module(choice.scenario)
  algorithms.validate(algorithm)
  task_settings = config.task.settings or tasks.module(task_name).Settings()
  scenario_settings = choice.settings or scenarios.module(choice.scenario).Settings()
  _check_finite(config, task_settings, scenario_settings,
                config.method.config or algorithms.METHODS[algorithm].module.Config())
  tasks.validate(task_name, task_settings)
  tasks.validate_scenario(task_name, choice.scenario)
  scenario_settings = _with_task_defaults(scenario_settings, tasks.defaults(task_name))
  training, sources = _resolve_training(config)
  algorithms.validate(algorithm, task_name, algorithms.num_branches(algorithm, training.num_branches))
  output_dir = _output_dir(config, training, scenario_settings)
  directory_lock.check_free(output_dir)  # Before reading the directory: another run may be writing it.
  # Resuming: the values the run started with stand where no flag sets them (an attempt that completed no round holds
  # no result and is replaced, `run_directory.prepare`).
  resuming = not config.outputs.overwrite and not run_directory.completed_no_round(output_dir)
  recorded = run_directory.read_config(output_dir) if resuming else None
  if recorded is not None:
    training, sources = _resolve_training(config, recorded)
  _check_training(config, training)
  scenarios.validate(choice.scenario, scenario_settings, _schedule(training))
  mixed_test_shares(config.evaluation)
  inference_groups(config.evaluation)
  hparams = _hyperparameters(config, training)
  module = algorithms.METHODS[algorithm].module
  method_config = method.with_shared(config.method.config or module.Config(), hparams)
  method_config.validate()
  workers = remote_workers.parse(','.join(config.workers.workers))
  if config.workers.subrounds is not None and (not workers or config.workers.subrounds < 1):
    raise ValueError(f'--subrounds needs --workers and must be >= 1; got {config.workers.subrounds}.')
  if config.workers.worker_timeout <= 0:
    raise ValueError(f'--worker_timeout must be > 0; got {config.workers.worker_timeout:g}.')
  if workers and training.aggregator == 'secure':
    raise ValueError('--aggregator=secure runs on this machine only: TFF splits a round over workers at its '
                     'aggregations, which it cannot do for secure sums; drop --workers.')
  record, defaults = _record(config, training, task_settings, scenario_settings, method_config)
  sources.update(_setup_sources(config.setup.declared, record))
  sources.update(_method_sources(algorithm, record, defaults))
  if not config.outputs.overwrite:
    run_directory.check_compatible(output_dir, record, defaults, scenarios.length_dependence(choice.scenario))
    if not run_directory.completed_no_round(output_dir):
      run_directory.check_metrics(output_dir, run_directory.newest_checkpoint_round(output_dir))
  shift_free = choice.no_shift or algorithms.is_shift_free(algorithm)
  return Resolved(config, training, task_settings, scenario_settings, method_config, hparams, shift_free, output_dir,
                  record, defaults, sources)


def _setup_sources(declared: Optional[setup_lib.Setup], record: dict) -> dict:
  """Flag name -> `setup NAME: <source>` for every flag of `declared` whose value in the run is the setup's."""
  if declared is None:
    return {}
  return {flag: declared.source_of(flag) for flag, value in declared.values().items()
          if record.get(flag) == _recorded(value)}


def _method_sources(algorithm: str, record: dict, defaults: dict) -> dict:
  """Flag name -> `method NAME: <source>` (`algorithms.registry.setting_sources`: its paper's line, a suite choice or
  a departure) for every setting of the method at its default, `flag` for one a flag moved."""
  return {flag: f'method {algorithm}: {source}' if record[flag] == _recorded(defaults[flag]) else FLAG
          for flag, source in algorithms.setting_sources(algorithm).items()}


def _recorded(value):
  return list(value) if isinstance(value, tuple) else value


def _with_task_defaults(scenario_settings, task_defaults: dict):
  """`scenario_settings` with each setting left None that the task has a default for set to it (a task's own
  components of the Dirichlet mixture, ...)."""
  return dataclasses.replace(scenario_settings, **{
      name: task_defaults[name] for name, value in settings_of(scenario_settings).items()
      if value is None and name in task_defaults})


def _absolute(path: Optional[str]) -> Optional[str]:
  """`path` as the run reads it (relative paths from the working directory), or None."""
  return os.path.abspath(path) if path else None


def _held_out_data(task, clients, client_batch_size: int, eval_batch_size: int, seed: int) -> evaluation.HeldOutData:
  """The held-out clients' test and personalization batches, together and (for local tuning) client by client,
  the tuning batches shuffled by `seed`."""
  client_data = lambda i: (task.held_out_dataset(clients.test[i:i + 1], eval_batch_size),
                           task.held_out_dataset(clients.personalization[i:i + 1], client_batch_size,
                                                 shuffle_seed=seed))
  return evaluation.HeldOutData(task.held_out_dataset(clients.test, eval_batch_size),
                                task.held_out_dataset(clients.personalization, eval_batch_size),
                                len(clients.test), client_data, tuple(plan.client_id for plan in clients.test))


def _privacy_summary(algorithm: str, training: TrainingConfig) -> dict:
  """With --aggregator=dp, the run's (epsilon, delta) (`algorithms.core.privacy_accounting`), with --aggregator=dp or
  secure what the aggregator covers and what it does not (`_privacy_caveats`)."""
  if training.aggregator == 'mean':
    return {}
  privacy = dict(aggregator=training.aggregator, **_privacy_caveats(algorithm, training))
  if training.aggregator == 'dp':
    noise = training.dp_noise_multiplier
    epsilon = (float('inf') if noise == 0 else  # Clipping alone: no privacy claimed.
               privacy_accounting.epsilon(noise, training.total_rounds))
    privacy.update(noise_multiplier=noise, rounds=training.total_rounds, delta=privacy_accounting.DEFAULT_DELTA,
                   epsilon=epsilon)
  return {'privacy': privacy}


def _shift_summary(scenario, domains, rows: list[dict]) -> dict:
  """Per window, drop / rounds to 95% recovery / max of the test accuracy on the window's data
  (`test_mixture_accuracy`, the ShiftEx paper) for scenarios with windows (`window_starts`), with the detector's
  rates and the assignment's
  ARI against the true regimes where the method reports them, and the forgetting of each recurring concept for
  concept-drift scenarios (`experiment.core.shift_metrics`)."""
  summary = {}
  domain_names = [domain.name for domain in domains]
  starts = scenario.window_starts()
  if starts is not None:
    evaluated = [row for row in rows if 'test_mixture_accuracy' in row]
    summary['window_metrics'] = [dataclasses.asdict(window) for window in shift_metrics.window_metrics(
        [int(row['round']) for row in evaluated], [row['test_mixture_accuracy'] for row in evaluated], starts)]
    detection = shift_metrics.detection_summary(rows, [domain.severity for domain in domains])
    if detection is not None:
      summary['detection'] = detection
    if scenario.domain_regimes() is not None:
      regime_ari = shift_metrics.regime_ari(rows, starts, scenario.domain_regimes())
      if regime_ari is not None:
        summary['regime_ari'] = regime_ari
  concepts = scenario.concept_domains()
  if concepts is not None:
    columns = [[f'test_{domain_names[d]}_accuracy' for d in domains] for domains in concepts]
    summary['forgetting'] = {f'concept_{j}': value
                             for j, value in shift_metrics.concept_forgetting(rows, columns).items()}
  return summary


def _connect_workers(config: ExperimentConfig) -> list[str]:
  """The workers' addresses once they answer and see the data directories; ExperimentError otherwise."""
  workers = remote_workers.parse(','.join(config.workers.workers))
  if workers:
    try:
      workers = remote_workers.connect(workers, config.workers.worker_timeout)
      remote_workers.wait_until_ready(workers, config.workers.worker_timeout)
      remote_workers.check_paths(workers, [_absolute(config.task.cache_dir), _absolute(config.task.tfds_data_dir)],
                                 config.workers.worker_timeout)
    except (remote_workers.WorkerUnavailableError, ssh_tunnels.TunnelError, FileNotFoundError) as error:
      raise ExperimentError(str(error)) from error
  return workers


def _build_task_and_scenario(resolved: Resolved):
  """(the task with the scenario's domains, the scenario); ExperimentError for data the run cannot use."""
  config, training = resolved.config, resolved.training
  try:
    task = tasks.create(config.task.task, resolved.task_settings,
                        task_lib.DataFiles(config.task.cache_dir, config.task.tfds_data_dir), training.seed)
    scenario = scenarios.build(config.scenario.scenario, resolved.scenario_settings, task.population(),
                               resolved.schedule, resolved.shift_free)
    scenario_domains = scenario.domains(task.mode_names, task.num_classes)
    if scenario_domains is not None:
      task = task.with_domains(scenario_domains)
  except (ValueError, FileNotFoundError) as error:
    raise ExperimentError(str(error)) from error
  if config.evaluation.mixed_test_q and len(task.domain_names) != 2:
    raise ExperimentError(f'--mixed_test_q mixes the two modes of a two-mode task; this scenario gives '
                          f'{len(task.domain_names)} domains.')
  return task, scenario


def _evaluator(resolved: Resolved, task, scenario) -> evaluation.Evaluator:
  """The test sets of every domain, the scenario's held-out clients and the mixed-mode batches."""
  evaluation_config, training = resolved.config.evaluation, resolved.training
  batch = evaluation_config.eval_batch_size
  test_datasets = task.test_datasets(batch)
  held_out = {name: _held_out_data(task, clients, training.client_batch_size, batch, training.seed)
              for name, clients in scenario.evaluation_plans().items()}
  mixed = {evaluation.mixed_name(share): task.mixed_test_dataset(share, batch, training.seed)
           for share in mixed_test_shares(evaluation_config)}
  return evaluation.Evaluator(task.model_fn(resolved.hparams.num_branches), test_datasets, held_out,
                              task.novelty_dataset(batch), mixed, inference_groups(evaluation_config))


def resolution_lines(resolved: Resolved) -> list[str]:
  """The training settings no flag set, one line per source (the recorded run, the method, the server optimizer, the
  task, the suite) with the values it gave and, for the method's, the paper they come from; first, the setup's
  values, or that without a setup methods are not on one footing (and what the method's paper states that its
  defaults leave to the task); last, each of the method's settings whose default departs from its paper, with why."""
  algorithm, task = resolved.config.method.algorithm, resolved.config.task.task
  declared = resolved.config.setup.declared
  if declared is None:
    lines = [f'No --setup: {algorithm} runs on its own paper\'s training settings; methods compared side by side take '
             'one --setup for all of them (docs/running.md, Paper setups).']
    notes = algorithms.METHODS[algorithm].module.DEFAULTS.notes
    if notes:
      lines.append(f'What {algorithm}\'s paper states that its defaults leave to the task: {notes}')
  else:
    given = [f'{flag}={_shown(resolved.record[flag])}' for flag, source in sorted(resolved.sources.items())
             if source.startswith(f'setup {declared.name}: ')]
    lines = [f'Setup {declared.name} ({declared.paper}; {declared.experiment}): {", ".join(given)}']
  labels = {RECORDED: f'Recorded in {resolved.output_dir} (the run resumed)',
            METHOD: f'Defaults of {algorithm}\'s paper',
            OPTIMIZER: f'Defaults of --server_optimizer={resolved.training.server_optimizer}',
            TASK: f'Defaults of task {task}', SUITE: 'Defaults of the suite'}
  for source, label in labels.items():
    values = [f'{name}={_shown(getattr(resolved.training, name))}' for name, given in sorted(resolved.sources.items())
              if given == source and (source != SUITE or name in _SUITE_DEFAULTS)]
    if values:
      cited = f' ({algorithms.METHODS[algorithm].module.DEFAULTS.source})' if source == METHOD else ''
      lines.append(f'{label}{cited}: {", ".join(values)}')
  for flag, source in algorithms.departures(algorithm, resolved.record).items():
    lines.append(f'Departure of {algorithm} from its paper: {flag}={_shown(resolved.record[flag])} '
                 f'({source.split(": ", 1)[1]})')
  return lines


def _shown(value) -> str:
  if isinstance(value, (list, tuple)):
    return ','.join(str(item) for item in value)
  return f'{value:g}' if isinstance(value, float) else str(value)


def _report_model(task, parameters: dict, algorithm: str, training: TrainingConfig) -> None:
  print(f'Task {task.name}: {task.population_summary()}')
  branch = (f', one branch {parameters["branch"]:,} ({parameters["branch_overhead_percent"]:.1f}% of the '
            'single-branch network)' if 'branch' in parameters else '')
  print(f'Model: {parameters["total"]:,} parameters{branch}')
  privacy = _privacy_summary(algorithm, training).get('privacy')
  if privacy and privacy['aggregator'] == 'dp':
    print(f'Differential privacy: noise multiplier {privacy["noise_multiplier"]:g}, epsilon {privacy["epsilon"]:.3g} '
          f'at delta {privacy["delta"]:g} over {privacy["rounds"]} rounds (every client in every round)')
  if privacy and privacy['aggregator'] == 'secure':
    print(f'Secure aggregation {SECURE_SIMULATED} (TFF\'s runtime has no secure-aggregation protocol).')
  if privacy:
    clear = privacy['not_covered']
    print(f'--aggregator={privacy["aggregator"]} covers {privacy["covers"]}, not the training metrics'
          + (f' nor {", ".join(clear["method_sums"])} (this method\'s own sums, in the clear)'
             if clear['method_sums'] else ''))


@dataclasses.dataclass
class RunData:
  """A resolved configuration's data as its run trains on it: the task (with the scenario's domains), the scenario
  and the clients' preprocessing. What benchmarks time methods on."""
  task: object
  scenario: scenario_lib.Scenario
  client_spec: tff.simulation.baselines.ClientSpec
  seed: int

  def round_datasets(self, round_num: int) -> list:
    """The datasets of round `round_num`'s participants, as the training loop builds them: `(raw_batch, mode)`
    elements (`tasks.task.preprocess_client`)."""
    return training_loop.round_datasets(self.task, self.scenario.round_plan(round_num).clients, self.client_spec,
                                        self.seed, round_num)

  @property
  def element_spec(self):
    """The element spec of every client dataset (the first client of the first domain's base)."""
    first_client = self.task.mode_client_ids()[self.task.domain_list[0].base][0]
    return self.task.client_dataset(0, first_client, self.client_spec, (0, 0)).element_spec


def build_data(resolved: Resolved) -> RunData:
  """The task, the scenario over its populations and the clients' preprocessing of a resolved configuration;
  ExperimentError for data the run cannot use."""
  task, scenario = _build_task_and_scenario(resolved)
  training = resolved.training
  client_spec = tff.simulation.baselines.ClientSpec(num_epochs=training.client_epochs,
                                                    batch_size=training.client_batch_size,
                                                    max_elements=training.max_elements_per_client)
  return RunData(task, scenario, client_spec, training.seed)


@dataclasses.dataclass
class Experiment:
  """A run ready to train: its data, the method's `Algorithm` and the workers it runs on."""
  resolved: Resolved
  data: RunData
  algorithm: method.Algorithm
  workers: list[str]

  @property
  def task(self):
    return self.data.task

  @property
  def scenario(self) -> scenario_lib.Scenario:
    return self.data.scenario

  @property
  def model_fn(self):
    return self.algorithm.model_fn or (lambda: self.task.model_fn(self.resolved.hparams.num_branches))

  def round_datasets(self, round_num: int) -> list:
    return self.data.round_datasets(round_num)


def _build_key(resolved: Resolved, data: RunData, evaluator: evaluation.Evaluator) -> tuple:
  """What the method's build reads (`built_methods.key`)."""
  config = resolved.config
  task_identity = (config.task.task, repr(resolved.task_settings), config.task.cache_dir, config.task.tfds_data_dir,
                   repr(data.task.domain_list))
  return built_methods.key(config.method.algorithm, task_identity, resolved.training, data.element_spec,
                           resolved.hparams, evaluator, resolved.method_config,
                           algorithms.seeded_build(config.method.algorithm))


def build(resolved: Resolved) -> Experiment:
  """Connects the workers and builds the data, the evaluator and the method of a resolved configuration;
  ExperimentError for data, workers or a method the run cannot use."""
  config = resolved.config
  execution_context.install()
  workers = _connect_workers(config)
  logging.set_verbosity(logging.WARNING)  # TFF's program managers log every file they write at INFO.
  tf.get_logger().setLevel('ERROR')
  data = build_data(resolved)
  name = config.method.algorithm
  evaluator = _evaluator(resolved, data.task, data.scenario)
  try:
    _check_adaptive_step(resolved, data.task)
    algorithm, _ = built_methods.build(
        _build_key(resolved, data, evaluator),
        lambda: algorithms.build(name, data.task, data.element_spec, resolved.hparams, evaluator,
                                 resolved.method_config),
        evaluator)
    for computation in (algorithm.split_round or [algorithm.process.next]) if workers else ():
      remote_workers.check_splittable(computation, f'--algorithm={name}')
  except ValueError as error:
    raise ExperimentError(str(error)) from error
  return Experiment(resolved, data, algorithm, workers)


def run(config: ExperimentConfig) -> dict:
  """Runs (or resumes, or extends) the experiment of `config` and returns its summary (summary.json); raises
  ExperimentError (a message of one line and the exit status) when it cannot start or go on.

  The run holds its directory's lock (`utils.directory_lock`) from before its first write to its end; the directory
  is resolved again once the lock is held, so what the checks read is what no other run changes meanwhile. A run
  refused by a check made under the lock (its checkpoints do not load) undoes the lock's record: the directory is
  left byte for byte as it was."""
  try:
    output_dir = resolve(config).output_dir
  except ValueError as error:
    raise ExperimentError(str(error)) from error
  try:
    lock = directory_lock.DirectoryLock(output_dir, required=not config.outputs.unlocked_run_directory).acquire()
  except ValueError as error:
    raise ExperimentError(str(error)) from error
  except OSError as error:
    fault = run_directory.storage_fault(error, output_dir)
    raise ExperimentError(fault or f'cannot write the run directory {output_dir}: {error.strerror or error}.',
                          STORAGE_FAULT_STATUS if fault else 2) from error
  try:
    try:
      resolved, experiment = _checked_build(config)
    except BaseException:
      lock.release(undo=True)
      raise
    return _prepare_and_train(resolved, experiment)
  except (OSError, tf.errors.OpError) as error:
    message = run_directory.storage_fault(error, output_dir)
    if message is None:
      raise
    raise ExperimentError(message, STORAGE_FAULT_STATUS) from error
  except loopback.NotLoopbackError as error:
    raise ExperimentError(str(error)) from error
  finally:
    lock.release()


def _checked_build(config: ExperimentConfig) -> tuple[Resolved, 'Experiment']:
  """`run`'s checks and build once the run directory's lock is held; writes nothing in the directory."""
  try:
    resolved = resolve(config)
  except ValueError as error:
    raise ExperimentError(str(error)) from error
  for line in resolution_lines(resolved):
    print(line)
  experiment = build(resolved)
  try:
    if not config.outputs.overwrite:
      training_loop.check_resumable(experiment.algorithm, resolved.output_dir)
  except ValueError as error:
    raise ExperimentError(str(error)) from error
  return resolved, experiment


def _prepare_and_train(resolved: Resolved, experiment: 'Experiment') -> dict:
  """The rest of `run`: records the configuration, trains, writes the summary."""
  config = resolved.config
  training, outputs, output_dir = resolved.training, config.outputs, resolved.output_dir
  try:
    extended_from = run_directory.prepare(
        output_dir, resolved.record, outputs.overwrite,
        lambda r: r % config.evaluation.rounds_per_eval == 0 and r % outputs.rounds_per_checkpoint == 0,
        resolved.sources)
  except ValueError as error:
    raise ExperimentError(str(error)) from error
  parameters = multi_branch.parameter_counts(experiment.model_fn())
  _report_model(experiment.task, parameters, config.method.algorithm, training)
  loop_config = training_loop.LoopConfig(
      total_rounds=training.total_rounds, rounds_per_eval=config.evaluation.rounds_per_eval,
      client_spec=experiment.data.client_spec, seed=training.seed, rounds_per_checkpoint=outputs.rounds_per_checkpoint,
      overlap_evaluation=config.evaluation.overlap_evaluation, state_on_worker=config.workers.state_on_worker)
  if extended_from is not None:
    print(f'Extending the run of {extended_from} rounds in {output_dir} to {training.total_rounds} rounds')
  workers = experiment.workers
  round_context = (remote_workers.round_context(workers, config.workers.subrounds, config.workers.worker_timeout)
                   if workers else None)
  started = time.monotonic()
  try:
    training_loop.run(experiment.algorithm, experiment.task, experiment.scenario,
                      learning_process.initial_weights(experiment.model_fn, training.seed), loop_config, output_dir,
                      round_context)
  except run_directory.RunDirectoryError as error:
    raise ExperimentError(str(error)) from error
  except training_loop.NumericFault as fault:
    raise ExperimentError(str(fault), NUMERIC_FAULT_STATUS) from fault
  except remote_workers.WorkerUnavailableError as error:
    raise ExperimentError(f'{error} The run stopped; its checkpoints are kept in {output_dir}: rerun the command to '
                          'resume (with the worker back, or without it in --workers).', WORKER_LOST_STATUS) from error
  except resident_state.WorkerLost as error:
    raise ExperimentError(f'{error} twice without a new checkpoint in between; the run stopped and its checkpoints '
                          f'are kept in {output_dir}: rerun the command to resume (with --state_on_worker=false '
                          'TFF restarts its worker and retries each round).', WORKER_LOST_STATUS) from error
  return _summarize(resolved, experiment.task, experiment.scenario, parameters, time.monotonic() - started)


def _summarize(resolved: Resolved, task, scenario, parameters: dict, seconds: float) -> dict:
  """Writes summary.json and prints the final line."""
  config, training, output_dir = resolved.config, resolved.training, resolved.output_dir
  rows = training_loop.read_metrics(output_dir)
  if [int(row['round']) for row in rows] != list(range(1, training.total_rounds + 1)):
    raise ExperimentError(f'{os.path.join(output_dir, run_directory.METRICS)} does not hold rounds 1-'
                          f'{training.total_rounds} after the run, so no summary is written; rerun the command to '
                          'resume, or --overwrite to start afresh.')
  final = training_loop.final_metrics(rows, window_rounds=training.period)
  every_setting = {name: value for group in [getattr(config, name) for name in GROUPS] + [resolved.scenario_settings]
                   for name, value in settings_of(group).items() if name != 'overwrite'}
  every_setting.update(tasks.settings_record(config.task.task, resolved.task_settings)[0],
                       **_method_settings(config.method.algorithm, resolved.method_config)[0])
  summary = {
      'flags': {name: list(value) if isinstance(value, tuple) else value for name, value in every_setting.items()},
      'resolved_hyperparameters': dict(
          settings_of(training),
          **settings_of(resolved.scenario_settings), shift_free=resolved.shift_free),
      run_directory.SOURCES: resolved.sources,
      'headline_metric': scenarios.module(config.scenario.scenario).HEADLINE_METRIC,
      'population': task.population_summary(),
      'parameters': parameters,
      'final_metrics': final,
      **_shift_summary(scenario, task.domain_list, rows),
      **_privacy_summary(config.method.algorithm, training),
      'seconds_this_invocation': seconds,
  }
  run_directory.write_json(os.path.join(output_dir, 'summary.json'), summary)
  if 'test_accuracy' in final:
    print(f'Test accuracy {final["test_accuracy"]:.4f} at round {int(final["round"])}, '
          f'{final["test_accuracy_last_period_mean"]:.4f} averaged over the last period. Outputs: {output_dir}')
  else:
    held_out = ', '.join(f'{key} {value:.4f}' for key, value in final.items() if key.endswith('_accuracy'))
    print(f'{held_out} at round {int(final["round"])}. Outputs: {output_dir}')
  return summary
