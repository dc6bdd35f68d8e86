"""What every method provides to the suite, and how a method module declares its own settings.

An `Algorithm` is what the training loop needs from a method:
  process:    the `tff.learning.templates.LearningProcess` (broadcast + client work + aggregator + finalizer);
  evaluate:   learning-process state -> test metrics (`test_accuracy`, `test_<mode>_accuracy`, ...); for a
              method that `evaluates_client_states` (FedRep's personal heads), (state, client_states) -> metrics,
              where client_states(client id) is the client's stored state (its initial state if never sampled);
  initial_client_state: for methods that keep state on clients (`algorithms.core.client_state`), a client's state at
              its first round; None for the others;
  model_fn:   for methods whose network is not the task's K-branch network (pFedEM's K full networks), the
              builder of their network; None for the task's.

`Hyperparameters` are the settings every method shares (learning rates, branches, the period, ...).

Every method module owns its settings: a `NAME`, a frozen dataclass `Config` (empty for a method without settings of
its own) with a `validate()` raising a one-line ValueError, `SENDS` (`Sends`: what its round sends besides the model
update and the training metrics), `DEFAULTS` (`Defaults`: the training settings its paper uses where they differ from
the suite's, with their source: `--algorithm=X` alone runs X as its paper does; an explicit flag overrides them) and a
`build_algorithm(task, element_spec, hparams, evaluator, config)`, which builds its process from the server step
it is given (`hparams.server_step`), and `SEEDED_BUILD`: whether that build reads the run's seed (`hparams.seed`:
initial networks or mixtures drawn when the process is built), so that a build is reused for runs of another seed
only when it does not (`experiment.core.built_methods`; a test checks every method's declaration). A field declared with
`setting(default, help)` is a flag of the binary, named `<method>_<field>` (`flag_name`) or, for the settings of
the Diurnal-or-Nocturnal paper's methods that users already pass by their first names (`--prior`, `--eta_max`), the
`flag` the setting gives; methods that declare the same `flag` share it. A field without `setting` is not a flag: when
it is named like a `Hyperparameters` field (`period`, `seed`, `num_branches`, ...) `with_shared` sets it from the shared
hyperparameters, else it keeps its default (a constant of the method). A new method touches neither the binary nor
the registry beyond its one entry.
"""

import dataclasses
from typing import Callable, NamedTuple, Optional

import tensorflow as tf
import tensorflow_federated as tff

from algorithms.core import learning_process
from algorithms.core import objectives
from utils import settings as settings_lib


@dataclasses.dataclass(frozen=True)
class Hyperparameters:
  client_learning_rate: float
  # The server optimizer and model aggregator, built by the assembler from --server_optimizer and --aggregator and
  # given to every method (`learning_process.ServerStep`).
  server_step: learning_process.ServerStep
  num_branches: int = 2
  period: int = 32
  window_rounds: int = 32  # The time step of the methods that act per window (ShiftEx, FedDrift).
  clients_per_round: int = 10
  eval_routing: str = 'batch'
  seed: int = 0
  # Test-time decisions (branch, component, cluster, model) may read the test labels: the oracle protocol some
  # papers grant a baseline (Zhu et al., 2022 grant FedEM the labels of its test batches); reports mark such runs.
  oracle_test_labels: bool = False
  # Test-time scoring may read each test batch's true domain: the stand-in of methods whose parties score their own
  # test data with their own model (ShiftEx, FedDrift); an oracle, marked in reports.
  oracle_test_domains: bool = False


# The training metrics every method's round sums over its clients (`client_training`), reported as TFF's own
# learning algorithms report theirs: in the clear, whatever aggregates the model update.
TRAINING_METRICS = ('loss_sum', 'num_correct', 'num_examples', 'num_predictions', 'nonfinite_clients')


@dataclasses.dataclass(frozen=True)
class Sends:
  """What a method's round sends from its clients besides the model update, its weight and `TRAINING_METRICS`: the
  row of the privacy table (docs/privacy.md, generated from these declarations). tests/client_messages_test.py checks
  every declaration against the fields of the method's traced round (`aggregation_only.client_messages`), and
  tests/server_step_contract_test.py checks what `--aggregator=dp|secure` covers.

  `method_sums`: the method's own statistics, which decide its clustering, routing or prior and which a deployment
  would send too (FedTEM's and FedTKM's cluster statistics, pFedEM's Gaussian sums, T-shot k-means' centers); the
  aggregators leave them in the clear, so a private run of a method that has any needs `--accept_unprotected_sums`,
  and records them as not covered. `per_client`: those of `method_sums` the server receives one per client instead of
  summed. `simulation_only`: counts by the examples' true domain (`routing`, ...), which exist for the simulation's
  metrics and which no deployment could send. `client_state`: the fields of the client's own state on its way to the
  simulation's store (`client_state`), which TFF cannot keep on clients between rounds. `own_aggregation`: the method
  aggregates its model updates its own way (per network of a pool, per component), so it runs with the mean only.
  """
  method_sums: tuple[str, ...] = ()
  per_client: tuple[str, ...] = ()
  simulation_only: tuple[str, ...] = ()
  client_state: tuple[str, ...] = ()
  own_aggregation: bool = False


@dataclasses.dataclass(frozen=True)
class Defaults:
  """The training settings a method's paper uses where they differ from the suite's, and where the paper says so.

  `values`: flag name -> value (`--server_optimizer`, `--server_learning_rate`, `--client_batch_size`, ...), applied
  to every setting the user leaves unset (`experiment.core.assembly`: flag > method > server optimizer > task >
  suite); `source`: the paper and the section, equation or table the values come from (docs/running.md's table of
  method defaults is made from it); `notes`: what the paper states that the suite does not take as a default, and
  why (a setting the paper tunes per dataset, a unit the suite counts differently); `scenario`: the scenario the
  paper evaluates the method under (`periodic_shift.scenarios`), where tests/methods_learn_test.py checks that it
  learns real handwriting at these defaults; `untuned_adaptive_step`: why an adaptive server optimizer (adam, adagrad,
  yogi) at the task's learning rate is refused for this method on a task that gives it a network other than the
  task's own (`models.representation.Representation.own_network`), for which the task's rate was not chosen (empty:
  it is not refused); with
  `--server_learning_rate` set, the user has chosen a rate and the run goes on.
  """
  values: dict = dataclasses.field(default_factory=dict)
  source: str = ''
  notes: str = ''
  scenario: str = 'periodic'
  untuned_adaptive_step: str = ''

  def __post_init__(self):
    if self.values and not self.source:
      raise ValueError('a method\'s defaults name the paper they come from (`source`).')


# The server step of federated averaging (McMahan et al., 2017): the mean update applied at learning rate 1, the new
# model the example-weighted mean of the clients' models.
PARAMETER_AVERAGING = {'server_optimizer': 'sgd', 'server_learning_rate': 1.0}


class Algorithm(NamedTuple):
  process: tff.learning.templates.LearningProcess
  evaluate: Callable[[object], dict]
  initial_client_state: Optional[dict] = None
  model_fn: Optional[Callable[[], tf.keras.Model]] = None
  evaluates_client_states: bool = False
  # The round as two computations (`learning_process.SplitRound`) when `process.next` has an aggregation that
  # depends on another, which TFF cannot split over several workers; None when `process.next` splits as it is.
  split_round: Optional[Callable] = None
  # Every party of the population reports in the scenario's census rounds (`Scenario.census_plan`; the round's
  # other parties beside its participants, marked by `client_state.TRAINS` 0): ShiftEx's window boundaries.
  census: bool = False


def global_model_evaluation(evaluator, **options) -> Callable[[object], dict]:
  """The `evaluate` of a method whose model is the process's global model, its branches averaged: state -> the
  evaluator's metrics (`options`: the evaluator's, e.g. `local_tuning`)."""
  return lambda state: evaluator.evaluate(learning_process.global_model_weights(state), objectives.averaged_branches,
                                          **options)


def window_of(round_num, window_rounds: int):
  """The window (0 for W0) of a round numbered from 1, for methods that act per window of `window_rounds` rounds
  (ShiftEx, FedDrift); works on Python ints and tensors."""
  return (round_num - 1) // window_rounds


def process_args(task, element_spec, hparams: Hyperparameters) -> tuple:
  """The leading arguments every K-branch method's `build_process` takes: (model_fn of the task's K-branch network,
  the task's batch_fn, `element_spec`, client learning rate, the server step `learning_process.ServerStep`)."""
  model_fn = lambda: task.model_fn(hparams.num_branches)
  return (model_fn, task.batch_fn, element_spec, hparams.client_learning_rate, hparams.server_step)


# A `Config` field that is a flag, with its help text; `flag` names it (default `<method>_<field>`).
setting = settings_lib.setting


def flag_name(method: str, field_name: str) -> str:
  return f'{method}_{field_name}'


def settings(method: str, config_class) -> dict[str, dataclasses.Field]:
  """Flag name -> field, for the fields of `config_class` declared with `setting`."""
  return {field.metadata['flag'] or flag_name(method, field.name): field
          for field in settings_lib.declared(config_class)}


def with_shared(config, hparams: Hyperparameters):
  """`config` with its fields that are not settings and are named like a field of `hparams` set from it."""
  shared = {field.name for field in dataclasses.fields(hparams)}
  return dataclasses.replace(config, **{field.name: getattr(hparams, field.name) for field in dataclasses.fields(config)
                                        if 'help' not in field.metadata and field.name in shared})


def check_settings(config, method: str, choices: Optional[dict] = None, at_least_one: tuple = (),
                   positive: tuple = (), non_negative: tuple = ()) -> None:
  """Raises a one-line ValueError naming the flag (`settings`) of the first `config` field that is not in its
  allowed `choices[field]`, is below 1 (`at_least_one`), is not > 0 (`positive`) or is not >= 0
  (`non_negative`)."""
  flag = {field.name: name for name, field in settings(method, type(config)).items()}
  for name, allowed in (choices or {}).items():
    if getattr(config, name) not in allowed:
      raise ValueError(f'--{flag[name]} must be one of {", ".join(allowed)}; got {getattr(config, name)!r}.')
  for name in at_least_one:
    if getattr(config, name) < 1:
      raise ValueError(f'--{flag[name]} must be >= 1; got {getattr(config, name)}.')
  for name in positive:
    if not getattr(config, name) > 0:
      raise ValueError(f'--{flag[name]} must be > 0; got {getattr(config, name):g}.')
  for name in non_negative:
    if not getattr(config, name) >= 0:
      raise ValueError(f'--{flag[name]} must be >= 0; got {getattr(config, name):g}.')
