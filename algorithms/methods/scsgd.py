"""SCSGD: semi-cyclic SGD adapted to the multi-branch network (Section 4 "Baselines", Eichner et al., 2019).

Branch k is trained in the k-th of K equal parts of each period (K = 2: branch 1 in the first half, branch 2 in
the second), with cross-entropy on that branch; test examples go to the most certain branch (`certainty`).

Choice (flag `scsgd_halves`): `period` splits each period at its start, t mod T in [0, T/2) and [T/2, T), as the
paper words it; under the paper's shifts q(t) starts a period at its maximum, so each half mixes day and night.
`mode_centered` shifts the parts by T / (2K) so that, for K = 2, branch 1 covers the T/2 rounds around the day peak
(t mod T in [3T/4, T) and [0, T/4)), the block-cyclic reading of Eichner et al.

Server state: the round number. One value is broadcast (the branch of the round); clients report the model update
and summed metrics, including `train_routing_accuracy` (clients trained on their mode's branch).
"""

import dataclasses

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from algorithms.core import certainty
from algorithms.core import client_training
from algorithms.core import evaluation
from algorithms.core import learning_process
from algorithms.core import method
from algorithms.core import objectives
from algorithms.core import routing
from tasks import task as task_lib

NAME = 'scsgd'
SEEDED_BUILD = False
SENDS = method.Sends(simulation_only=('routing',))
DEFAULTS = method.Defaults(
    {'server_optimizer': 'adam', 'client_epochs': 1},
    source=('Zhu et al., "Diurnal or Nocturnal? Federated Learning of Multi-branch Networks from Periodically '
            'Shifting Distributions", 2022, Table 2 (server optimizer Adam, one local epoch; its rate and epsilon '
            'per dataset are the tasks\' defaults)'))
HALVES = ('period', 'mode_centered')


@dataclasses.dataclass(frozen=True)
class Config:
  halves: str = method.setting('period', 'SCSGD: period (branch 1 in [0, T/2), the paper\'s wording) or '
                               'mode_centered (branch 1 in the T/2 rounds around the day peak).')

  def validate(self) -> None:
    method.check_settings(self, NAME, {'halves': HALVES})


# Where each setting's default comes from (`algorithms.registry` checks one per setting; docs/running.md
# shows them).
SETTING_SOURCES = {
    'halves': "paper: Zhu et al. (2022), Section 4 Baselines, 'one model during first half of each period'",
}


def branch_of_round(round_num: tf.Tensor, period: int, num_branches: int, halves: str) -> tf.Tensor:
  """The branch trained in round t: floor(((t + offset) mod T) K / T), offset T / (2K) when mode-centered."""
  offset = period / (2 * num_branches) if halves == 'mode_centered' else 0.0
  phase = tf.math.floormod(tf.cast(round_num, tf.float64) + offset, float(period))
  return tf.cast(tf.floor(phase * num_branches / period), tf.int32)


def build_client_work(model_fn: learning_process.ModelFn, batch_fn: task_lib.BatchFn,
                      client_optimizer: tff.learning.optimizers.Optimizer, element_spec, num_branches: int,
                      num_modes: int, period: int, halves: str) -> tff.learning.templates.ClientWorkProcess:
  if halves not in HALVES:
    raise ValueError(f'--scsgd_halves must be one of {", ".join(HALVES)}; got {halves!r}.')
  weights_type = learning_process.model_weights_type(model_fn)
  data_type = learning_process.client_data_type(element_spec)

  @tff.tensorflow.computation(weights_type, np.int32, data_type)
  def client_update(weights, branch, dataset):
    model = learning_process.client_model(model_fn)

    @tf.function(autograph=False)
    def run(weights, branch, dataset):
      examples, batches, _ = routing.client_examples(task_lib.model_batches(dataset, batch_fn))
      training = client_training.local_training(model, client_optimizer, weights, batches,
                                                objectives.selected_branch(branch, 0.0, 0.0))
      mode = routing.client_mode(examples)
      sums = routing.training_sums(training, mode, branch, num_modes, num_branches)
      return tff.learning.templates.ClientResult(training.update, training.num_examples), sums

    return run(weights, branch, dataset)

  sums_type = client_update.type_signature.result[1]

  @tff.tensorflow.computation(np.int64)
  def round_branch(round_num):
    return round_num + 1, branch_of_round(round_num + 1, period, num_branches, halves)

  finalize = tff.tensorflow.computation(routing.train_metrics, sums_type)

  @tff.federated_computation
  def initialize():
    return tff.federated_value(np.int64(0), tff.SERVER)

  @tff.federated_computation(initialize.type_signature.result, tff.FederatedType(weights_type, tff.CLIENTS),
                             tff.FederatedType(data_type, tff.CLIENTS))
  def next_fn(round_num, weights, client_data):
    round_num, branch = tff.federated_map(round_branch, round_num)
    result, sums = tff.federated_map(client_update, (weights, tff.federated_broadcast(branch), client_data))
    measurements = tff.federated_map(finalize, tff.federated_sum(sums))
    return tff.templates.MeasuredProcessOutput(round_num, result, measurements)

  return tff.learning.templates.ClientWorkProcess(initialize, next_fn)


def build_process(model_fn, batch_fn, element_spec, client_learning_rate, server_step,
                  num_branches, num_modes, period, halves) -> tff.learning.templates.LearningProcess:
  client_work = build_client_work(model_fn, batch_fn, tff.learning.optimizers.build_sgdm(client_learning_rate),
                                  element_spec, num_branches, num_modes, period, halves)
  return learning_process.compose(model_fn, client_work, server_step)


def build_algorithm(task: task_lib.Task, element_spec, hparams: method.Hyperparameters,
                    evaluator: evaluation.Evaluator, config: Config) -> method.Algorithm:
  config.validate()
  process = build_process(*method.process_args(task, element_spec, hparams), hparams.num_branches, task.num_modes,
                          hparams.period, config.halves)
  return method.Algorithm(process, certainty.routed_evaluation(evaluator, task.num_modes, hparams.num_branches,
                                                               hparams.eval_routing))
