"""Vanilla and No-Dist-Shift: FedAdam on the multi-branch network, predicting with the mean of its branches.

Section 4 "Baselines": "For the baseline without any branch selection technique, we train the same multi-branch
network by taking the averaged output from both branches for prediction." Vanilla trains under the periodic shift;
No-Dist-Shift (`nds`) is the same algorithm under the scenario without its shift (`--no_shift`, `algorithms.registry`). With a
single-branch model (K = 1) these are the Appendix A.8 baselines.

The client work has no state; it reports the train loss and accuracy, aggregated with `federated_sum`.
"""

import tensorflow_federated as tff

from algorithms.core import client_training
from algorithms.core import evaluation
from algorithms.core import learning_process
from algorithms.core import method
from algorithms.core import objectives
from tasks import task as task_lib
from utils import settings as settings_lib

NAME = 'vanilla'
SEEDED_BUILD = False
SENDS = method.Sends()
DEFAULTS = method.Defaults(
    {'server_optimizer': 'adam', 'client_epochs': 1},
    source=('Zhu et al., "Diurnal or Nocturnal? Federated Learning of Multi-branch Networks from Periodically '
            'Shifting Distributions", 2022, Table 2 (server optimizer Adam, one local epoch; its rate and epsilon '
            'per dataset are the tasks\' defaults)'))
Config = settings_lib.NoSettings


def build_client_work(model_fn: learning_process.ModelFn, batch_fn: task_lib.BatchFn,
                      client_optimizer: tff.learning.optimizers.Optimizer,
                      element_spec, proximal_strength: float = 0.0) -> tff.learning.templates.ClientWorkProcess:
  """Local training on the averaged-branch objective; reports (update, |D_i|) and train metrics.

  `element_spec` is the spec of `tasks.task.preprocess_client` batches; `batch_fn` the task's; `proximal_strength`
  adds FedProx's proximal term (`algorithms.methods.fedprox`).
  """
  return client_training.objective_client_work(model_fn, batch_fn, client_optimizer, element_spec,
                                               objectives.averaged_branches, proximal_strength)


def build_process(model_fn: learning_process.ModelFn, batch_fn: task_lib.BatchFn, element_spec,
                  client_learning_rate: float,
                  server_step: learning_process.ServerStep) -> tff.learning.templates.LearningProcess:
  client_work = build_client_work(model_fn, batch_fn, tff.learning.optimizers.build_sgdm(client_learning_rate),
                                  element_spec)
  return learning_process.compose(model_fn, client_work, server_step)


def build_algorithm(task: task_lib.Task, element_spec, hparams: method.Hyperparameters,
                    evaluator: evaluation.Evaluator, config: Config) -> method.Algorithm:
  """The K-branch network trained on the averaged branches and tested on them."""
  config.validate()
  process = build_process(*method.process_args(task, element_spec, hparams))
  return method.Algorithm(process, method.global_model_evaluation(evaluator))


def build_single_network_process(task: task_lib.Task, element_spec, client_learning_rate: float,
                                 server_step: learning_process.ServerStep,
                                 proximal_strength: float = 0.0):
  """(model_fn, process): FedAvg of the task's single-branch network (the FedGMM paper's FedAvg; FedProx with
  `proximal_strength`), for the baselines that build on it (`algorithms.methods.fedprox`,
  `algorithms.methods.fedavg_plus`)."""
  model_fn = lambda: task.model_fn(1)
  client_work = build_client_work(model_fn, task.batch_fn, tff.learning.optimizers.build_sgdm(client_learning_rate),
                                  element_spec, proximal_strength)
  return model_fn, learning_process.compose(model_fn, client_work, server_step)
