"""Runs one federated simulation under periodic distribution shift.

    bazel run //:run_experiment -- --task=synthetic --algorithm=vanilla --shift_fn=linear --shift_p=4

Writes to <root_output_dir>/<experiment_name>/: config.json (the configuration, see `experiment.run_directory`),
metrics.csv, tensorboard/, checkpoints/ (see `experiment.training_loop`) and summary.json (the flags, population
sizes, parameter counts, final metrics). Rerunning the same command after an interruption resumes after the last
checkpoint; rerunning into the directory with other flags stops (only the flags in `_CADENCE_FLAGS`, which cannot
change results, may differ), and `--overwrite` starts afresh.

Hyperparameter flags left unset take the task's defaults (Table 2 for the paper's tasks). Invalid flag values and
unusable run directories end the run with one line on stderr and exit status 2, before any data is loaded or
model built. A round with non-finite values ends it with one line and exit status 3 (`NUMERIC_FAULT_STATUS`),
keeping the last good checkpoint and the rows before that round.
"""

import collections
import dataclasses
import os
import sys
import time
from typing import Optional

# TensorFlow's C++ INFO and WARNING logs (here and in TFF's worker process, which inherits the environment) drown
# the progress lines; set TF_CPP_MIN_LOG_LEVEL=0 to see them.
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

from absl import app
from absl import logging
from absl import flags
import tensorflow as tf
import tensorflow_federated as tff

from algorithms import registry as algorithms
from algorithms.core import certainty
from algorithms.core import evaluation
from algorithms.core import learning_process
from algorithms.core import method
from algorithms.core import privacy_accounting
from experiment import run_directory
from experiment import shift_metrics
from experiment import training_loop
from models import multi_branch
from periodic_shift import scenario as scenario_lib
from periodic_shift import scenarios
from tasks import registry as tasks
from utils import execution_context
from utils import remote_workers
from utils import settings as settings_lib

_FLAGS_BEFORE = frozenset(flags.FLAGS)  # absl's own, and those of the libraries imported above.
_TASK = flags.DEFINE_string('task', 'synthetic', f'One of {", ".join(tasks.TASKS)}.')
_SYNTHETIC_STYLE_SCALE = flags.DEFINE_float(
    'synthetic_style_scale', None, 'Task synthetic: scale of each mode\'s input offset s_m, how far apart its two '
    'bases are (tasks/synthetic.py). Default: the task\'s, 0.15.')
_ALGORITHM = flags.DEFINE_string('algorithm', 'vanilla', f'One of {", ".join(algorithms.ALGORITHMS)}.')
_SCENARIO = flags.DEFINE_string('scenario', 'periodic', f'Shift scenario: one of {", ".join(scenarios.SCENARIOS)} '
                                '(see periodic_shift/scenarios.py).')
_NO_SHIFT = flags.DEFINE_bool(
    'no_shift', False, 'Run the scenario without its shift (No-Dist-Shift, the reference of "Diurnal or Nocturnal?", '
    'Zhu et al., 2022): periodic samples the population\'s day share every round, mixture_drift keeps equal shares, '
    'evolving_domains does not rotate, concept_drift and windowed keep every client in concept or regime 0, '
    'dirichlet_mixture mixes every client equally. --algorithm=nds is vanilla with --no_shift.')
_PERIOD = flags.DEFINE_integer('period', None, 'Period T in rounds (>= 2). Default: the task\'s.')
_TOTAL_ROUNDS = flags.DEFINE_integer('total_rounds', None, 'Training rounds. Default: the task\'s.')
_CLIENTS_PER_ROUND = flags.DEFINE_integer('clients_per_round', None, 'm. Default: the task\'s.')
_CLIENT_EPOCHS = flags.DEFINE_integer('client_epochs', 1, 'Local epochs per round.')
_CLIENT_BATCH_SIZE = flags.DEFINE_integer('client_batch_size', None, 'Local batch size. Default: the task\'s.')
_MAX_ELEMENTS = flags.DEFINE_integer('max_elements_per_client', None, 'Cap on local examples per round. Default: '
                                     'the task\'s (512 for stackoverflow, none otherwise).')
_CLIENT_LR = flags.DEFINE_float('client_learning_rate', None, 'Client SGD learning rate. Default: the task\'s.')
_SERVER_OPTIMIZER = flags.DEFINE_string(
    'server_optimizer', 'adam', 'The server step on the averaged update: adam '
    '(FedAdam, the optimizer of "Diurnal or Nocturnal?", Zhu et al., 2022) or sgd (w - lr * update; lr 1 is the '
    'parameter averaging of FedAvg, pFedEM, FedGMM and FedEvolve).')
_AGGREGATOR = flags.DEFINE_string(
    'aggregator', 'mean', 'How the server aggregates the clients\' model updates: mean (example-weighted) or dp '
    '(TFF\'s DP-FedAvg aggregator: adaptive clipping, zeroing, Gaussian noise; methods whose update is one mean).')
_DP_NOISE_MULTIPLIER = flags.DEFINE_float(
    'dp_noise_multiplier', 0.0, '--aggregator=dp: the Gaussian noise on the sum of clipped updates, in units of the '
    'clip norm; summary.json reports the run\'s epsilon at delta 1e-5.')
_SERVER_LR = flags.DEFINE_float('server_learning_rate', None, 'Server learning rate. Default: the task\'s with '
                                '--server_optimizer=adam, 1.0 (parameter averaging) with sgd.')
_SERVER_EPSILON = flags.DEFINE_float('server_adam_epsilon', None, 'Server Adam epsilon. Default: the task\'s.')
_NUM_BRANCHES = flags.DEFINE_integer('num_branches', 2, 'Branches K of the network (1 = single-branch).')
_ROUNDS_PER_EVAL = flags.DEFINE_integer('rounds_per_eval', 8, 'Evaluate on the test sets every this many rounds.')
_ROUNDS_PER_CHECKPOINT = flags.DEFINE_integer(
    'rounds_per_checkpoint', 8, 'Checkpoint every this many rounds (and after the last); a resumed run recomputes '
    'the rounds after the last checkpoint, with identical results.')
_EVAL_BATCH_SIZE = flags.DEFINE_integer('eval_batch_size', 64, 'Test batch size: the group of test examples a method '
                                        'decides over (FedTEM, FedTKM: one test client).')
_EVAL_INFERENCE_BATCH_SIZE = flags.DEFINE_integer(
    'eval_inference_batch_size', None, 'Test examples the model runs on at once, a multiple of --eval_batch_size '
    'whose batches stay the groups (same metrics); meant for accelerators (on a 2-core CPU it did not pay: '
    'docs/operations.md, Speed). Default: --eval_batch_size.')
_SEED = flags.DEFINE_integer('seed', 0, 'Seeds data generation, model initialization, sampling and shuffling.')
_ROOT_OUTPUT_DIR = flags.DEFINE_string('root_output_dir', '/tmp/periodic_shift', 'Where experiments are written.')
_EXPERIMENT_NAME = flags.DEFINE_string('experiment_name', None,
                                       'Sub-directory of the run. Default: made from the main flags.')
_OVERWRITE = flags.DEFINE_bool('overwrite', False, 'Delete the outputs of an earlier run in the experiment directory '
                                'and start afresh (otherwise a different configuration there stops the run).')
_CACHE_DIR = flags.DEFINE_string('cache_dir', None, 'Directory holding the dataset files of emnist, cifar and '
                                 'stackoverflow (TFF\'s cache layout, see tasks/); default ~/.tff.')
_WORKERS = flags.DEFINE_list('workers', [], 'TFF workers (host:port, tools/start_worker.sh) that run each round\'s '
                             'clients in subrounds; empty: this process\'s own worker.')
_SUBROUNDS = flags.DEFINE_integer('subrounds', None, 'With --workers: subrounds per round (default: one per worker; '
                                  'more run in turn).')
_WORKER_TIMEOUT = flags.DEFINE_float('worker_timeout', 60.0, 'With --workers: seconds to wait for a worker that does '
                                     'not answer, at start-up and during the run, before stopping.')
_TFDS_DATA_DIR = flags.DEFINE_string(
    'tfds_data_dir', None, 'Directory of datasets prepared by tensorflow-datasets (task mnist; task cifar reads '
    'CIFAR-10 from it when set), see tasks/tfds_files.py. Recorded with the run: CIFAR-10 read from it is split '
    'into other clients.')
# Shared by the methods that train on Eq. 4 or route test batches.
_LABEL_SMOOTH_W = flags.DEFINE_float('label_smooth_w', 0.1, 'lambda of Eq. 4 (weight of the other branches).')
_LABEL_SMOOTH_EPS = flags.DEFINE_float('label_smooth_eps', 0.5, 'epsilon of Eq. 4 (label smoothing).')
_EVAL_ROUTING = flags.DEFINE_string('eval_routing', 'batch', 'Test-time branch choice: per batch or per sample.')
_ORACLE_TEST_LABELS = flags.DEFINE_bool(
    'oracle_test_labels', False, 'Let methods that choose a branch, component, cluster or model at test time choose '
    'with the test labels (FedEM\'s EM on the labeled batch, CFL\'s and FedDrift\'s lowest-loss model): the '
    'oracle protocol of "Diurnal or Nocturnal?" (Zhu et al., 2022) for FedEM. Default: no test label decides '
    'anything; reports mark oracle runs.')
_MIXED_TEST_Q = flags.DEFINE_list(
    'mixed_test_q', [], 'Shares q in [0, 1]: also test on batches holding both modes of a two-mode task, a share q of '
    'mode 1 (day) in every batch (metrics mixed_q<q>_accuracy); empty: per-mode test sets only.')


def _define_method_flags() -> dict:
  """One flag per setting of every method's Config (`algorithms.core.method.settings`): flag name -> holder; a flag
  two methods declare (FedTEM's and FedTKM's `--prior`) is defined once."""
  defined, defaults = {}, {}
  for module in algorithms.MODULES:
    config_class = module.Config
    for flag, field in method.settings(module.NAME, config_class).items():
      if flag in defined:
        assert defaults[flag] == field.default, f'--{flag} has two defaults.'
        continue
      define = _DEFINE[settings_lib.flag_type(config_class, field)]
      defined[flag], defaults[flag] = define(flag, field.default, field.metadata['help']), field.default
  return defined


def _define_scenario_flags() -> dict:
  """One flag per setting of every scenario's Settings (`periodic_shift.scenario`), named as the setting: flag name ->
  holder. A setting several scenarios declare (`--num_clients`) is one flag whose default, None, leaves each
  scenario its own."""
  owners = collections.defaultdict(list)
  for name, settings_class, field in scenarios.declared_settings():
    owners[field.name].append((name, settings_class, field))
  defined = {}
  for flag, declared in owners.items():
    name, settings_class, field = declared[0]
    kind = settings_lib.flag_type(settings_class, field)
    assert all(settings_lib.flag_type(c, f) is kind for _, c, f in declared), f'--{flag} has two types.'
    if len(declared) == 1:
      default, help_text = field.default, f'{name}: {field.metadata["help"]}'
    else:
      default = None
      help_text = '; '.join(f'{name}: {field.metadata["help"]} Default {field.default}.' for name, _, field in declared)
    defined[flag] = _DEFINE[kind](flag, list(default) if kind is list else default, help_text)
  return defined


_DEFINE = {bool: flags.DEFINE_bool, int: flags.DEFINE_integer, float: flags.DEFINE_float, str: flags.DEFINE_string,
           list: flags.DEFINE_list}
_METHOD_FLAGS = _define_method_flags()
_SCENARIO_FLAGS = _define_scenario_flags()


def _method_config(name: str, shared: dict):
  """The Config of method `name` from its module's flags and the `shared` hyperparameters."""
  module = algorithms.METHODS[name].module
  config = module.Config(**{field.name: _METHOD_FLAGS[flag].value
                            for flag, field in method.settings(module.NAME, module.Config).items()})
  return method.with_shared(config, shared)


def _shared_hyperparameters(values: dict) -> dict:
  """The settings every method may read (`algorithms.core.method.Hyperparameters`), from the resolved `values`."""
  return dict(
      client_learning_rate=values['client_learning_rate'], server_learning_rate=values['server_learning_rate'],
      server_adam_epsilon=values['server_adam_epsilon'],
      num_branches=algorithms.num_branches(_ALGORITHM.value, _NUM_BRANCHES.value), period=values['period'],
      clients_per_round=values['clients_per_round'], window_rounds=_SCENARIO_FLAGS['window_rounds'].value,
      smoothing_weight=_LABEL_SMOOTH_W.value,
      smoothing_epsilon=_LABEL_SMOOTH_EPS.value, eval_routing=_EVAL_ROUTING.value, seed=_SEED.value,
      oracle_test_labels=_ORACLE_TEST_LABELS.value, server_optimizer=_SERVER_OPTIMIZER.value,
      aggregator=_AGGREGATOR.value, dp_noise_multiplier=_DP_NOISE_MULTIPLIER.value)


_POSITIVE_INTEGERS = (_CLIENT_EPOCHS, _CLIENT_BATCH_SIZE, _TOTAL_ROUNDS, _ROUNDS_PER_EVAL, _ROUNDS_PER_CHECKPOINT,
                      _EVAL_BATCH_SIZE, _NUM_BRANCHES)
_POSITIVE_FLOATS = (_CLIENT_LR, _SERVER_LR, _SERVER_EPSILON)


def _resolved(flag, defaults):
  return flag.value if flag.value is not None else defaults.get(flag.name)


def _inference_groups() -> int:
  """Test batches per inference batch (`evaluation.Evaluator`); raises ValueError on a bad value."""
  size = _EVAL_INFERENCE_BATCH_SIZE.value
  if size is None:
    return 1
  if size < 1 or size % _EVAL_BATCH_SIZE.value:
    raise ValueError(f'--eval_inference_batch_size must be a positive multiple of --eval_batch_size '
                     f'({_EVAL_BATCH_SIZE.value}); got {size}.')
  return size // _EVAL_BATCH_SIZE.value


def _hyperparameters() -> dict:
  """Flag values with the task's defaults filled in; raises ValueError on a bad value."""
  tasks.validate(_TASK.value)
  tasks.validate_scenario(_TASK.value, _SCENARIO.value)
  tasks.validate_style_scale(_TASK.value, _SYNTHETIC_STYLE_SCALE.value)
  algorithms.validate(_ALGORITHM.value, _TASK.value, algorithms.num_branches(_ALGORITHM.value, _NUM_BRANCHES.value))
  defaults = tasks.defaults(_TASK.value)
  if _SERVER_OPTIMIZER.value not in learning_process.SERVER_OPTIMIZERS:
    raise ValueError(f'server_optimizer must be one of {", ".join(learning_process.SERVER_OPTIMIZERS)}; got '
                     f'{_SERVER_OPTIMIZER.value!r}.')
  if _AGGREGATOR.value not in learning_process.AGGREGATORS:
    raise ValueError(f'aggregator must be one of {", ".join(learning_process.AGGREGATORS)}; got '
                     f'{_AGGREGATOR.value!r}.')
  if _DP_NOISE_MULTIPLIER.value < 0 or (_DP_NOISE_MULTIPLIER.value > 0 and _AGGREGATOR.value != 'dp'):
    raise ValueError(f'--dp_noise_multiplier must be >= 0 and is the noise of --aggregator=dp; got '
                     f'{_DP_NOISE_MULTIPLIER.value:g} with --aggregator={_AGGREGATOR.value}.')
  if _SERVER_OPTIMIZER.value == 'sgd':
    defaults = dict(defaults, server_learning_rate=1.0)
  values = {flag.name: _resolved(flag, defaults) for flag in (
      _PERIOD, _TOTAL_ROUNDS, _CLIENTS_PER_ROUND, _CLIENT_BATCH_SIZE, _CLIENT_LR, _SERVER_LR, _SERVER_EPSILON,
      _MAX_ELEMENTS, _SCENARIO_FLAGS['dirichlet_components'])}
  scenarios.validate(_SCENARIO.value, _scenario_settings(values), _schedule(values))
  for flag in _POSITIVE_INTEGERS + _POSITIVE_FLOATS:
    value = values.get(flag.name, flag.value)
    if value is None or not value > 0:
      raise ValueError(f'--{flag.name} must be > 0; got {value}.')
  if values['clients_per_round'] is None or values['clients_per_round'] < 1:
    raise ValueError(f'--clients_per_round must be >= 1; got {values["clients_per_round"]}.')
  if values['max_elements_per_client'] is not None and values['max_elements_per_client'] < 1:
    raise ValueError(f'--max_elements_per_client must be >= 1 when set; got {values["max_elements_per_client"]}.')
  if _EVAL_ROUTING.value not in certainty.ROUTINGS:
    raise ValueError(f'eval_routing must be one of {", ".join(certainty.ROUTINGS)}; got {_EVAL_ROUTING.value!r}.')
  _mixed_test_shares()
  _inference_groups()
  _method_config(_ALGORITHM.value, _shared_hyperparameters(values)).validate()
  return values


def _mixed_test_shares() -> list[float]:
  """The shares of `--mixed_test_q`; raises ValueError for one that is not a number in [0, 1]."""
  shares = []
  for text in _MIXED_TEST_Q.value:
    try:
      share = float(text)
    except ValueError:
      share = float('nan')
    if not 0.0 <= share <= 1.0:
      raise ValueError(f'--mixed_test_q takes shares in [0, 1]; got {text!r}.')
    shares.append(share)
  return shares


def _scenario_settings(values: dict):
  """The chosen scenario's Settings from its flags (`--dirichlet_components` with the task's default resolved)."""
  chosen = {name: holder.value for name, holder in _SCENARIO_FLAGS.items()}
  return scenarios.settings_from(_SCENARIO.value, dict(chosen, dirichlet_components=values['dirichlet_components']))


def _schedule(values: dict) -> scenario_lib.Schedule:
  return scenario_lib.Schedule(values['clients_per_round'], _SEED.value, values['total_rounds'], values['period'])


def _absolute(path: Optional[str]) -> Optional[str]:
  """`path` as the run reads it (relative paths from the working directory), or None."""
  return os.path.abspath(path) if path else None


def _workers() -> list[str]:
  """The --workers addresses, checked with --subrounds; ValueError (one line) for bad values."""
  workers = remote_workers.parse(','.join(_WORKERS.value))
  if _SUBROUNDS.value is not None and (not workers or _SUBROUNDS.value < 1):
    raise ValueError(f'--subrounds needs --workers and must be >= 1; got {_SUBROUNDS.value}.')
  if _WORKER_TIMEOUT.value <= 0:
    raise ValueError(f'--worker_timeout must be > 0; got {_WORKER_TIMEOUT.value:g}.')
  return workers


def _output_dir(values: dict) -> str:
  """<root_output_dir>/<experiment_name>; raises RunDirectoryError for a name that would leave the root."""
  name = _EXPERIMENT_NAME.value
  if name is None and _SCENARIO.value == 'periodic':
    shift_fn, shift_p = _SCENARIO_FLAGS['shift_fn'].value, _SCENARIO_FLAGS['shift_p'].value
    name = f'{_TASK.value}_{_ALGORITHM.value}_{shift_fn}_p{shift_p:g}_T{values["period"]}_s{_SEED.value}'
  elif name is None:
    name = f'{_TASK.value}_{_ALGORITHM.value}_{_SCENARIO.value}_s{_SEED.value}'
  run_directory.validate_name(name)
  root = _ROOT_OUTPUT_DIR.value
  if not os.path.isabs(root):  # Under `bazel run`, relative paths mean the user's working directory.
    root = os.path.join(os.environ.get('BUILD_WORKING_DIRECTORY', os.getcwd()), root)
  return os.path.join(root, name)


def _run_config(values: dict) -> dict:
  """The configuration recorded in the run directory: every flag that can change results, task defaults resolved."""
  config = {name: flags.FLAGS[name].value for name in _FLAG_NAMES - _CADENCE_FLAGS}
  config.update(values)
  return config


def _shift_summary(scenario, domains, rows: list[dict]) -> dict:
  """Per window, drop / rounds to 95% recovery / max of the test accuracy on the window's data
  (`test_mixture_accuracy`, the ShiftEx paper) for windowed scenarios, with the detector's rates and the assignment's
  ARI against the true regimes where the method reports them, and the forgetting of each recurring concept for
  concept-drift scenarios (`experiment.shift_metrics`)."""
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


def _privacy_summary(total_rounds: int) -> dict:
  """With --aggregator=dp, the run's (epsilon, delta) (`algorithms.core.privacy_accounting`)."""
  if _AGGREGATOR.value != 'dp':
    return {}
  return {'privacy': dict(aggregator='dp', noise_multiplier=_DP_NOISE_MULTIPLIER.value, rounds=total_rounds,
                          delta=privacy_accounting.DEFAULT_DELTA,
                          epsilon=privacy_accounting.epsilon(_DP_NOISE_MULTIPLIER.value, total_rounds))}


NUMERIC_FAULT_STATUS = 3
WORKER_LOST_STATUS = 4


def _fail(message: str, status: int = 2) -> None:
  print(f'run_experiment: error: {message}', file=sys.stderr)
  sys.exit(status)


def _held_out_data(task, clients, client_batch_size: int, seed: int) -> evaluation.HeldOutData:
  """The held-out clients' test and personalization batches, together and (for local tuning) client by client,
  the tuning batches shuffled by `seed`."""
  client_data = lambda i: (task.held_out_dataset(clients.test[i:i + 1], _EVAL_BATCH_SIZE.value),
                           task.held_out_dataset(clients.personalization[i:i + 1], client_batch_size,
                                                 shuffle_seed=seed))
  return evaluation.HeldOutData(task.held_out_dataset(clients.test, _EVAL_BATCH_SIZE.value),
                                task.held_out_dataset(clients.personalization, _EVAL_BATCH_SIZE.value),
                                len(clients.test), client_data, tuple(plan.client_id for plan in clients.test))


@execution_context.exits_with_signal_status
def main(argv):
  if len(argv) > 1:
    _fail(f'unexpected arguments: {" ".join(argv[1:])}')
  try:
    values = _hyperparameters()
    output_dir = _output_dir(values)
    config = _run_config(values)
    if not _OVERWRITE.value:
      run_directory.check_compatible(output_dir, config, {name: flags.FLAGS[name].default for name in config},
                                     scenarios.length_dependence(_SCENARIO.value))
    workers = _workers()
  except ValueError as error:
    _fail(str(error))
  execution_context.install()
  if workers:
    try:
      remote_workers.wait_until_ready(workers, _WORKER_TIMEOUT.value)
      remote_workers.check_paths(workers, [_absolute(_CACHE_DIR.value), _absolute(_TFDS_DATA_DIR.value)],
                                 _WORKER_TIMEOUT.value)
    except (remote_workers.WorkerUnavailableError, FileNotFoundError) as error:
      _fail(str(error))
  logging.set_verbosity(logging.WARNING)  # TFF's program managers log every file they write at INFO.
  tf.get_logger().setLevel('ERROR')
  try:
    task = tasks.create(_TASK.value, _CACHE_DIR.value, _SEED.value, _TFDS_DATA_DIR.value,
                        _SYNTHETIC_STYLE_SCALE.value)
  except (ValueError, FileNotFoundError) as error:
    _fail(str(error))
  shift_free = _NO_SHIFT.value or algorithms.is_shift_free(_ALGORITHM.value)
  shift_fn = 'none' if shift_free else _SCENARIO_FLAGS['shift_fn'].value
  populations = task.mode_client_ids()
  try:
    scenario = scenarios.build(_SCENARIO.value, _scenario_settings(values), task.population(), _schedule(values),
                               shift_free)
  except ValueError as error:
    _fail(str(error))
  scenario_domains = scenario.domains(task.mode_names, task.num_classes)
  if scenario_domains is not None:
    try:
      task = task.with_domains(scenario_domains)
    except ValueError as error:
      _fail(str(error))

  client_spec = tff.simulation.baselines.ClientSpec(
      num_epochs=_CLIENT_EPOCHS.value, batch_size=values['client_batch_size'],
      max_elements=values['max_elements_per_client'])
  element_spec = task.client_dataset(0, populations[task.domain_list[0].base][0], client_spec,
                                     (0, 0)).element_spec
  hparams = algorithms.Hyperparameters(**_shared_hyperparameters(values))
  model_fn = lambda: task.model_fn(hparams.num_branches)
  test_datasets = {name: task.test_dataset(mode, _EVAL_BATCH_SIZE.value)
                   for mode, name in enumerate(task.domain_names)}
  held_out = {name: _held_out_data(task, clients, values['client_batch_size'], _SEED.value)
              for name, clients in scenario.evaluation_plans().items()}
  if _MIXED_TEST_Q.value and len(task.domain_names) != 2:
    _fail(f'--mixed_test_q mixes the two modes of a two-mode task; this scenario gives '
          f'{len(task.domain_names)} domains.')
  mixed_datasets = {evaluation.mixed_name(share): task.mixed_test_dataset(share, _EVAL_BATCH_SIZE.value, _SEED.value)
                    for share in _mixed_test_shares()}
  evaluator = evaluation.Evaluator(model_fn(), test_datasets, held_out,
                                  task.novelty_dataset(_EVAL_BATCH_SIZE.value), mixed_datasets, _inference_groups())
  try:
    algorithm = algorithms.build(_ALGORITHM.value, task, element_spec, hparams, evaluator,
                                 _method_config(_ALGORITHM.value, _shared_hyperparameters(values)))
    if workers:
      for computation in (algorithm.split_round or [algorithm.process.next]):
        remote_workers.check_splittable(computation, f'--algorithm={_ALGORITHM.value}')
    extended_from = run_directory.prepare(
        output_dir, config, _OVERWRITE.value,
        lambda r: r % _ROUNDS_PER_EVAL.value == 0 and r % _ROUNDS_PER_CHECKPOINT.value == 0)
  except ValueError as error:
    _fail(str(error))
  model_fn = algorithm.model_fn or model_fn

  parameters = multi_branch.parameter_counts(model_fn())
  print(f'Task {task.name}: {task.population_summary()}')
  branch = (f', one branch {parameters["branch"]:,} ({parameters["branch_overhead_percent"]:.1f}% of the '
            'single-branch network)' if 'branch' in parameters else '')
  print(f'Model: {parameters["total"]:,} parameters{branch}')
  privacy = _privacy_summary(values['total_rounds']).get('privacy')
  if privacy:
    print(f'Differential privacy: noise multiplier {privacy["noise_multiplier"]:g}, epsilon {privacy["epsilon"]:.3g} '
          f'at delta {privacy["delta"]:g} over {privacy["rounds"]} rounds (every client in every round)')
  loop_config = training_loop.LoopConfig(
      total_rounds=values['total_rounds'], rounds_per_eval=_ROUNDS_PER_EVAL.value, client_spec=client_spec,
      seed=_SEED.value, rounds_per_checkpoint=_ROUNDS_PER_CHECKPOINT.value)
  if extended_from is not None:
    print(f'Extending the run of {extended_from} rounds in {output_dir} to {values["total_rounds"]} rounds')
  round_context = None
  if workers:
    round_context = remote_workers.round_context(workers, _SUBROUNDS.value, _WORKER_TIMEOUT.value)
  started = time.monotonic()
  try:
    training_loop.run(algorithm, task, scenario, learning_process.initial_weights(model_fn, _SEED.value),
                      loop_config, output_dir, round_context)
  except run_directory.RunDirectoryError as error:
    _fail(str(error))
  except training_loop.NumericFault as fault:
    _fail(str(fault), NUMERIC_FAULT_STATUS)
  except remote_workers.WorkerUnavailableError as error:
    _fail(f'{error} The run stopped; its checkpoints are kept in {output_dir}: rerun the command to resume (with '
          'the worker back, or without it in --workers).', WORKER_LOST_STATUS)
  rows = training_loop.read_metrics(output_dir)
  final = training_loop.final_metrics(rows, window_rounds=values['period'])
  summary = {
      'flags': {name: flags.FLAGS[name].value for name in flags.FLAGS if name in _FLAG_NAMES},
      'resolved_hyperparameters': dict(values, shift_fn=shift_fn),
      'population': task.population_summary(),
      'parameters': parameters,
      'final_metrics': final,
      **_shift_summary(scenario, task.domain_list, rows),
      **_privacy_summary(values['total_rounds']),
      'seconds_this_invocation': time.monotonic() - started,
  }
  run_directory.write_json(os.path.join(output_dir, 'summary.json'), summary)
  if 'test_accuracy' in final:
    print(f'Test accuracy {final["test_accuracy"]:.4f} at round {int(final["round"])}, '
          f'{final["test_accuracy_last_period_mean"]:.4f} averaged over the last period. Outputs: {output_dir}')
  else:
    held_out = ', '.join(f'{key} {value:.4f}' for key, value in final.items() if key.endswith('_accuracy'))
    print(f'{held_out} at round {int(final["round"])}. Outputs: {output_dir}')


# Every flag of the binary but --overwrite: recorded in config.json and summary.json.
_FLAG_NAMES = frozenset(flags.FLAGS) - _FLAGS_BEFORE - {_OVERWRITE.name}
# Flags that cannot change a run's results: output cadence, locations and where rounds and inference run (several
# workers or larger inference batches give the same results, floats to the order of summation). A run may be
# resumed with other values.
_CADENCE_FLAGS = frozenset(flag.name for flag in (
    _ROUNDS_PER_EVAL, _ROUNDS_PER_CHECKPOINT, _ROOT_OUTPUT_DIR, _EXPERIMENT_NAME, _CACHE_DIR, _WORKERS, _SUBROUNDS,
    _WORKER_TIMEOUT, _EVAL_INFERENCE_BATCH_SIZE))

if __name__ == '__main__':
  app.run(main)
