"""Methods by name: each builds a learning process and a test evaluation for a task.

An `Algorithm` is what the training loop needs from a method:
  process:    the `tff.learning.templates.LearningProcess` (broadcast + client work + aggregator + finalizer);
  evaluate:   learning-process state -> test metrics (`test_accuracy`, `test_<mode>_accuracy`, ...);
  shift_free: True for methods defined by training without distribution shift (No-Dist-Shift), whose clients the
              training loop draws with the `none` shift whatever `--shift_fn` says.
"""

import dataclasses
from typing import Callable, NamedTuple

import numpy as np
import tensorflow_federated as tff

from algorithms import evaluation
from algorithms import fedtem
from algorithms import fedtkm
from algorithms import objectives
from algorithms import routing
from algorithms import vanilla
from tasks import task as task_lib


@dataclasses.dataclass(frozen=True)
class Hyperparameters:
  client_learning_rate: float
  server_learning_rate: float
  server_adam_epsilon: float
  num_branches: int = 2
  fedtem_config: fedtem.Config = fedtem.Config()
  fedtkm_config: fedtkm.Config = fedtkm.Config()


class Algorithm(NamedTuple):
  process: tff.learning.templates.LearningProcess
  evaluate: Callable[[object], dict]
  shift_free: bool


def _build_vanilla(task: task_lib.Task, element_spec, hparams: Hyperparameters, evaluator: evaluation.Evaluator,
                   shift_free: bool) -> Algorithm:
  model_fn = lambda: task.model_fn(hparams.num_branches)
  process = vanilla.build_process(model_fn, task.batch_fn, element_spec, hparams.client_learning_rate,
                                  hparams.server_learning_rate, hparams.server_adam_epsilon)

  def evaluate(state):
    return evaluator.evaluate(process.get_model_weights(state), objectives.averaged_branches)

  return Algorithm(process, evaluate, shift_free)


def _routed_evaluation(process, evaluator: evaluation.Evaluator, objective, objective_args_fn, routing_shape,
                       best_matching: bool):
  """evaluate(state) for a method that routes each test batch to a branch: accuracy plus `routing_accuracy`."""

  def evaluate(state):
    metrics = evaluator.evaluate(process.get_model_weights(state), objective, routing_shape=routing_shape,
                                 objective_args=objective_args_fn(state.client_work))
    confusion = metrics.pop('test_routing').astype(np.float32)
    metrics['routing_accuracy'] = float(routing.routing_accuracy(confusion, best_matching=best_matching))
    return metrics

  return evaluate


def _build_fedtem(task: task_lib.Task, element_spec, hparams: Hyperparameters, evaluator: evaluation.Evaluator,
                  ) -> Algorithm:
  model_fn = lambda: task.model_fn(hparams.num_branches)
  config = hparams.fedtem_config
  process = fedtem.build_process(model_fn, task.batch_fn, element_spec, hparams.client_learning_rate,
                                 hparams.server_learning_rate, hparams.server_adam_epsilon, hparams.num_branches,
                                 task.num_modes, config)
  objective = fedtem.evaluation_objective(task.num_modes, hparams.num_branches, config.eval_routing)
  evaluate = _routed_evaluation(
      process, evaluator, objective, lambda state: (state['mixture']['means'], state['mixture']['variances']),
      [task.num_modes, hparams.num_branches], best_matching=config.prior == 'none')
  return Algorithm(process, evaluate, shift_free=False)


def _build_fedtkm(task: task_lib.Task, element_spec, hparams: Hyperparameters, evaluator: evaluation.Evaluator,
                  ) -> Algorithm:
  model_fn = lambda: task.model_fn(hparams.num_branches)
  config = hparams.fedtkm_config
  process = fedtkm.build_process(model_fn, task.batch_fn, element_spec, hparams.client_learning_rate,
                                 hparams.server_learning_rate, hparams.server_adam_epsilon, hparams.num_branches,
                                 task.num_modes, config)
  objective = fedtkm.evaluation_objective(task.num_modes, hparams.num_branches, config.eval_routing,
                                          config.eval_scaling)
  evaluate = _routed_evaluation(
      process, evaluator, objective,
      lambda state: (state['clustering']['centers'], state['clustering']['scales']),
      [task.num_modes, hparams.num_branches], best_matching=config.prior == 'none')
  return Algorithm(process, evaluate, shift_free=False)


_BUILDERS = {
    'vanilla': lambda *args: _build_vanilla(*args, shift_free=False),
    'nds': lambda *args: _build_vanilla(*args, shift_free=True),
    'fedtem': _build_fedtem,
    'fedtkm': _build_fedtkm,
}
ALGORITHMS = tuple(_BUILDERS)


def validate(name: str) -> None:
  if name not in _BUILDERS:
    raise ValueError(f'algorithm must be one of {", ".join(ALGORITHMS)}; got {name!r}.')


def build(name: str, task: task_lib.Task, element_spec, hparams: Hyperparameters,
          evaluator: evaluation.Evaluator) -> Algorithm:
  """Builds the method `name` for `task`; `element_spec` is the spec of a preprocessed client batch."""
  validate(name)
  return _BUILDERS[name](task, element_spec, hparams, evaluator)
