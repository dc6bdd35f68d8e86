"""Methods by name: each builds a learning process and a test evaluation for a task.

An `Algorithm` (`algorithms.core.method`) is what the training loop needs from a method. A method with settings of
its own (`METHOD_CONFIGS`) owns them and its builder in its module; the variants of Vanilla and the two baselines
without settings of their own (T-shot k-means, Min-Loss) have a builder here.

`vanilla_single` and `nds_single` are Vanilla and No-Dist-Shift with a single-branch network (Appendix A.8), whatever
`num_branches` says. Methods that choose a branch without a temporal prior report routing accuracy under the best
matching of modes to branches.

Layout: `algorithms/core` holds the building blocks methods compose (the learning-process composition, local
training, objectives, client state, routing, evaluation) and never imports a method; `algorithms/methods` has one
module per method, importing only `algorithms/core` (FedProx and FedAvg+ are Vanilla's process with one change and
import it); this registry is the only module that imports every method.
"""

import dataclasses

from algorithms.core import certainty
from algorithms.core import evaluation
from algorithms.core import learning_process
from algorithms.core import method
from algorithms.core import objectives
from algorithms.methods import cfl
from algorithms.methods import fedavg_plus
from algorithms.methods import feddrift
from algorithms.methods import fedem
from algorithms.methods import fedevolve
from algorithms.methods import fedevp
from algorithms.methods import fedgmm
from algorithms.methods import fedprox
from algorithms.methods import fedrep
from algorithms.methods import fedtem
from algorithms.methods import fedtkm
from algorithms.methods import local
from algorithms.methods import min_loss
from algorithms.methods import pfedem
from algorithms.methods import scsgd
from algorithms.methods import shiftex
from algorithms.methods import tshot_kmeans
from algorithms.methods import vanilla
from tasks import task as task_lib


Hyperparameters = method.Hyperparameters
Algorithm = method.Algorithm


def _build_vanilla(task: task_lib.Task, element_spec, hparams: Hyperparameters, evaluator: evaluation.Evaluator,
                   shift_free: bool) -> Algorithm:
  process = vanilla.build_process(*method.process_args(task, element_spec, hparams))

  def evaluate(state):
    return evaluator.evaluate(learning_process.global_model_weights(state), objectives.averaged_branches)

  return Algorithm(process, evaluate, shift_free)


def _build_min_loss(task, element_spec, hparams, evaluator) -> Algorithm:
  process = min_loss.build_process(*method.process_args(task, element_spec, hparams), hparams.num_branches,
                                   task.num_modes, hparams.smoothing_weight, hparams.smoothing_epsilon)
  return Algorithm(process, certainty.routed_evaluation(evaluator, task.num_modes, hparams.num_branches,
                                                        hparams.eval_routing), shift_free=False)


def _build_tshot_kmeans(task, element_spec, hparams, evaluator) -> Algorithm:
  process = tshot_kmeans.build_process(*method.process_args(task, element_spec, hparams), hparams.num_branches,
                                       task.num_modes, hparams.period, hparams.clients_per_round)
  objective = tshot_kmeans.evaluation_objective(task.num_modes, hparams.num_branches)
  evaluate = evaluation.routed_evaluation(evaluator, objective, lambda state: (state['centers'],),
                                [task.num_modes, hparams.num_branches], best_matching=True)
  return Algorithm(process, evaluate, shift_free=False)


def _single_branch(hparams: Hyperparameters) -> Hyperparameters:
  return dataclasses.replace(hparams, num_branches=1)


_BUILDERS = {
    'vanilla': lambda *args: _build_vanilla(*args, shift_free=False),
    'nds': lambda *args: _build_vanilla(*args, shift_free=True),
    'vanilla_single': lambda t, e, h, v: _build_vanilla(t, e, _single_branch(h), v, shift_free=False),
    'nds_single': lambda t, e, h, v: _build_vanilla(t, e, _single_branch(h), v, shift_free=True),
    'tshot_kmeans': _build_tshot_kmeans,
    'min_loss': _build_min_loss,
}
# Methods that own their settings (`algorithms.core.method`): name -> (Config class, build_algorithm).
METHOD_CONFIGS = {
    scsgd.NAME: (scsgd.Config, scsgd.build_algorithm),
    fedem.NAME: (fedem.Config, fedem.build_algorithm),
    fedtem.NAME: (fedtem.Config, fedtem.build_algorithm),
    fedtkm.NAME: (fedtkm.Config, fedtkm.build_algorithm),
    pfedem.NAME: (pfedem.Config, pfedem.build_algorithm),
    cfl.NAME: (cfl.Config, cfl.build_algorithm),
    fedgmm.NAME: (fedgmm.Config, fedgmm.build_algorithm),
    fedprox.NAME: (fedprox.Config, fedprox.build_algorithm),
    fedavg_plus.NAME: (fedavg_plus.Config, fedavg_plus.build_algorithm),
    local.NAME: (local.Config, local.build_algorithm),
    fedevolve.NAME: (fedevolve.Config, fedevolve.build_algorithm),
    fedevp.NAME: (fedevp.Config, fedevp.build_algorithm),
    fedrep.NAME: (fedrep.Config, fedrep.build_algorithm),
    shiftex.NAME: (shiftex.Config, shiftex.build_algorithm),
    feddrift.NAME: (feddrift.Config, feddrift.build_algorithm),
}
ALGORITHMS = tuple(_BUILDERS) + tuple(METHOD_CONFIGS)
_SHIFT_FREE = frozenset({'nds', 'nds_single'})
_SINGLE_BRANCH = frozenset({'vanilla_single', 'nds_single'})
_ROUTING_METHODS = frozenset({'scsgd', 'tshot_kmeans', 'min_loss', 'fedem', 'fedtem', 'fedtkm', pfedem.NAME, cfl.NAME,
                              shiftex.NAME, feddrift.NAME})
_TASKS_WITHOUT_RAW_SPACE = frozenset({'stackoverflow'})


def validate(name: str, task_name: str = None, num_branches: int = 2) -> None:
  """Raises ValueError for an unknown method, or one that cannot run on the task or with the branches."""
  if name not in ALGORITHMS:
    raise ValueError(f'algorithm must be one of {", ".join(ALGORITHMS)}; got {name!r}.')
  if name == 'tshot_kmeans' and task_name in _TASKS_WITHOUT_RAW_SPACE:
    raise ValueError(f'tshot_kmeans is not defined for {task_name}: k-means on raw token ids has no meaning (the '
                     'paper does not run it there either).')
  if name in _ROUTING_METHODS and num_branches < 2:
    raise ValueError(f'{name} chooses between branches and needs --num_branches >= 2; got {num_branches}.')


def is_shift_free(name: str) -> bool:
  return name in _SHIFT_FREE


def num_branches(name: str, requested: int) -> int:
  """The network's branches for method `name`: 1 for the single-branch baselines, else `requested`."""
  return 1 if name in _SINGLE_BRANCH else requested


def build(name: str, task: task_lib.Task, element_spec, hparams: Hyperparameters, evaluator: evaluation.Evaluator,
          config=None) -> Algorithm:
  """Builds the method `name` for `task`; `element_spec` is the spec of a preprocessed client batch; `config` is
  the method's own `Config` for the methods of `METHOD_CONFIGS` (default settings when None)."""
  validate(name)
  if name in METHOD_CONFIGS:
    config_class, build_algorithm = METHOD_CONFIGS[name]
    return build_algorithm(task, element_spec, hparams, evaluator, config or config_class())
  return _BUILDERS[name](task, element_spec, hparams, evaluator)
