"""FedProx (Li et al., 2020, "Federated Optimization in Heterogeneous Networks"), a baseline of FedGMM (Table 2).

Client k approximately minimizes, from the broadcast weights w^t, its local objective plus a proximal term
(Li et al., Eq. 2):

  h_k(w; w^t) = F_k(w) + (mu / 2) ||w - w^t||^2,

here by the suite's local SGD pass (`client_training.local_training` with `proximal_strength` mu). The rest is the
suite's FedAvg (the FedGMM paper's FedAvg is the suite's `vanilla_single`): the task's single-branch network, updates
averaged with the clients' example counts and applied by the server step (by default parameter averaging, Li et al.
average with server learning rate 1; `--server_learning_rate` and the Adam epsilon are the suite's). Evaluation is
the global model's, on the centralized test sets and on every held-out client.

Choices: mu = 1.0 (`--fedprox_mu`), the FedGMM authors' setting for CIFAR-10 (the paper states
none). TFF's `tff.learning.algorithms.build_weighted_fed_prox` applies the same term; the suite composes its own
client work so that FedProx reports the suite's metrics and shares its finalizer with the method it is compared to.
"""

import dataclasses

from algorithms.core import evaluation
from algorithms.core import method
from algorithms.methods import vanilla
from tasks import task as task_lib

NAME = 'fedprox'
SEEDED_BUILD = False
SENDS = method.Sends()
DEFAULTS = method.Defaults(
    method.PARAMETER_AVERAGING,
    source=('Li et al., "Federated Optimization in Heterogeneous Networks", 2020, Algorithm 2 (the server averages '
            "the clients' models)"),
    scenario='dirichlet_mixture')


@dataclasses.dataclass(frozen=True)
class Config:
  mu: float = method.setting(1.0, 'FedProx: mu of the proximal term (mu / 2) ||w - w^t||^2.')

  def validate(self) -> None:
    method.check_settings(self, NAME, positive=('mu',))


# Where each setting's default comes from (`algorithms.registry` checks one per setting; docs/running.md
# shows them).
SETTING_SOURCES = {
    'mu': ("suite choice: the FedGMM authors' setting for CIFAR-10 (Li et al., 2020, tune mu per dataset; the "
           'FedGMM paper states none)'),
}


def build_algorithm(task: task_lib.Task, element_spec, hparams: method.Hyperparameters,
                    evaluator: evaluation.Evaluator, config: Config) -> method.Algorithm:
  config.validate()
  model_fn, process = vanilla.build_single_network_process(
      task, element_spec, hparams.client_learning_rate, hparams.server_step,
      proximal_strength=config.mu)
  return method.Algorithm(process, method.global_model_evaluation(evaluator.with_model(model_fn())), model_fn=model_fn)
