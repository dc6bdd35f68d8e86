"""Min-Loss (IFCA, Ghosh et al., 2020) on the multi-branch network (Section 4 "Baselines").

Each client evaluates every branch's loss on its training data with the broadcast weights and trains the branch
with the smallest loss, with the label-smoothing objective of Eq. 4 ("we applied the label smoothing regularization
(Eq. 4) to IFCA"; `objectives.selected_branch`). Unlabeled test clients cannot compute a loss, so test examples go
to the most certain branch (`certainty`). Stateless; the server keeps no state beyond the model.

The per-branch losses are means over the client's examples, computed batch by batch (a next-word model's logits
for a whole client would not fit in memory).
"""


import dataclasses

import tensorflow as tf
import tensorflow_federated as tff

from algorithms.core import certainty
from algorithms.core import client_training
from algorithms.core import evaluation
from algorithms.core import learning_process
from algorithms.core import method
from algorithms.core import objectives
from algorithms.core import routing
from models import multi_branch
from tasks import task as task_lib

NAME = 'min_loss'
SEEDED_BUILD = False
SENDS = method.Sends(simulation_only=('routing',))
DEFAULTS = method.Defaults(
    {'server_optimizer': 'adam', 'client_epochs': 1},
    source=('Zhu et al., "Diurnal or Nocturnal? Federated Learning of Multi-branch Networks from Periodically '
            'Shifting Distributions", 2022, Table 2 (server optimizer Adam, one local epoch; its rate and epsilon '
            'per dataset are the tasks\' defaults)'))


@dataclasses.dataclass(frozen=True)
class Config(objectives.LabelSmoothing):
  """Min-Loss trains the branch of lowest loss with Eq. 4's objective (`objectives.LabelSmoothing`)."""


# Where each setting's default comes from: Eq. 4's, shared with FedTEM and FedTKM.
SETTING_SOURCES = objectives.SETTING_SOURCES


def branch_losses(model: tf.keras.Model, batches: tf.data.Dataset, num_branches: int) -> tf.Tensor:
  """The mean loss of every branch over the client's examples, [K] (inside a `tf.function`)."""

  def add(sums, batch):
    logits = model(batch['x'], training=False)[multi_branch.LOGITS]
    losses = tf.stack([objectives.classification_result(logits[:, k], batch).loss_sum
                       for k in range(num_branches)])
    return sums[0] + losses, sums[1] + tf.cast(tf.shape(batch['y'])[0], tf.float32)

  loss_sums, count = client_training.fold(batches, (tf.zeros([num_branches]), tf.constant(0.0)), add)
  return loss_sums / tf.maximum(count, 1.0)


def build_client_work(model_fn: learning_process.ModelFn, batch_fn: task_lib.BatchFn,
                      client_optimizer: tff.learning.optimizers.Optimizer, element_spec, num_branches: int,
                      num_modes: int, smoothing_weight: float,
                      smoothing_epsilon: float) -> tff.learning.templates.ClientWorkProcess:
  weights_type = learning_process.model_weights_type(model_fn)
  data_type = learning_process.client_data_type(element_spec)

  @tff.tensorflow.computation(weights_type, data_type)
  def client_update(weights, dataset):
    model = learning_process.client_model(model_fn)

    @tf.function(autograph=False)
    def run(weights, dataset):
      examples, batches, _ = routing.client_examples(task_lib.model_batches(dataset, batch_fn))
      client_training.assign_weights(model, weights)
      branch = tf.argmin(branch_losses(model, batches, num_branches), output_type=tf.int32)
      objective = objectives.selected_branch(branch, smoothing_weight, smoothing_epsilon)
      training = client_training.local_training(model, client_optimizer, weights, batches, objective)
      mode = routing.client_mode(examples)
      sums = routing.training_sums(training, mode, branch, num_modes, num_branches)
      return tff.learning.templates.ClientResult(training.update, training.num_examples), sums

    return run(weights, dataset)

  return learning_process.stateless_client_work(client_update, routing.train_metrics)


def build_process(model_fn, batch_fn, element_spec, client_learning_rate, server_step,
                  num_branches, num_modes, smoothing_weight,
                  smoothing_epsilon) -> tff.learning.templates.LearningProcess:
  client_work = build_client_work(model_fn, batch_fn, tff.learning.optimizers.build_sgdm(client_learning_rate),
                                  element_spec, num_branches, num_modes, smoothing_weight, smoothing_epsilon)
  return learning_process.compose(model_fn, client_work, server_step)


def build_algorithm(task: task_lib.Task, element_spec, hparams: method.Hyperparameters,
                    evaluator: evaluation.Evaluator, config: Config) -> method.Algorithm:
  """Min-Loss's process; test examples routed to the most certain branch."""
  config.validate()
  process = build_process(*method.process_args(task, element_spec, hparams), hparams.num_branches, task.num_modes,
                          config.smoothing_weight, config.smoothing_epsilon)
  return method.Algorithm(process, certainty.routed_evaluation(evaluator, task.num_modes, hparams.num_branches,
                                                               hparams.eval_routing))
