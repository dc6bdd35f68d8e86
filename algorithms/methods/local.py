"""Local: every client learns from its own data alone, a baseline of the FedGMM paper (Tables 2 and 4).

No model is communicated. Each held-out client trains the task's single-branch network from the shared seeded
initialization on its own personalization data (its training split; an unseen client's adaptation half) for
`epochs` passes of SGD at `--client_learning_rate`, one step per batch, and is tested on its own test data
(`personalized_accuracy`, `unseen_accuracy`; `algorithms.core.evaluation.LocalTuning`).

How the suite realizes it (documented choices):
- The local training happens at evaluation, from scratch each time, rather than spread over the rounds the client
  is sampled in: the same number of SGD passes over the client's own data (`epochs` set to its number of rounds)
  without a client state holding every client's model; only the order of the batches differs. Default 20
  (`--local_epochs`): about what a training client of the suite's FedGMM setting gets
  (150 rounds x 30 of 240 clients = 18.75 rounds of one epoch); the FedGMM authors' clients train every round.
- The learning process exists because the training loop runs one: its client work evaluates the shared initial
  model on the round's data (`train_loss`, `train_accuracy` of that untrained model) and sends a zero update, so
  the model stays the initialization the evaluation starts from.
- Local has no global model: it reports no centralized test metrics and needs a scenario with per-client test data
  (`--scenario=dirichlet_mixture` or `evolving_domains`).
"""

import collections
import dataclasses

import tensorflow as tf
import tensorflow_federated as tff

from algorithms.core import client_training
from algorithms.core import evaluation
from algorithms.core import learning_process
from algorithms.core import method
from algorithms.core import objectives
from tasks import task as task_lib

NAME = 'local'
SEEDED_BUILD = False
SENDS = method.Sends()
DEFAULTS = method.Defaults(notes='Local sends no update: no server step moves its model.',
                           scenario='dirichlet_mixture')


@dataclasses.dataclass(frozen=True)
class Config:
  epochs: int = method.setting(20, 'Local: epochs each client trains on its own data before its test.')

  def validate(self) -> None:
    method.check_settings(self, NAME, at_least_one=('epochs',))


# Where each setting's default comes from (`algorithms.registry` checks one per setting; docs/running.md
# shows them).
SETTING_SOURCES = {
    'epochs': ("suite choice: about what a training client of the suite's FedGMM setting gets (150 rounds x 30 of "
               '240 clients = 18.75 one-epoch rounds); the FedGMM paper states none'),
}


def build_client_work(model_fn: learning_process.ModelFn, batch_fn: task_lib.BatchFn,
                      element_spec) -> tff.learning.templates.ClientWorkProcess:
  """A zero update of weight 1 from every client, with the metrics of the received model on its data."""
  weights_type = learning_process.model_weights_type(model_fn)
  data_type = learning_process.client_data_type(element_spec)

  @tff.tensorflow.computation(weights_type, data_type)
  def client_update(weights, dataset):
    model = learning_process.client_model(model_fn)

    @tf.function(autograph=False)
    def metric_sums():
      client_training.assign_weights(model, weights)

      def step(sums, batch):
        result = objectives.averaged_branches(model(batch['x'], training=False), batch)
        return tf.nest.map_structure(tf.add, sums, client_training.metric_sums(result))

      return client_training.fold(task_lib.model_batches(dataset, batch_fn), client_training.zero_metric_sums(), step)

    sums = collections.OrderedDict(metric_sums(), nonfinite_clients=tf.constant(0.0))
    update = tf.nest.map_structure(tf.zeros_like, list(weights.trainable))
    return tff.learning.templates.ClientResult(update=update, update_weight=tf.constant(1.0)), sums

  return learning_process.stateless_client_work(client_update, client_training.finalize_train_metrics)


def build_algorithm(task: task_lib.Task, element_spec, hparams: method.Hyperparameters,
                    evaluator: evaluation.Evaluator, config: Config) -> method.Algorithm:
  config.validate()
  if not evaluator.held_out_names:
    raise ValueError('local evaluates every client on its own test data and needs a scenario with per-client '
                     'test data (--scenario=dirichlet_mixture or evolving_domains).')
  model_fn = lambda: task.model_fn(1)
  process = learning_process.compose(model_fn, build_client_work(model_fn, task.batch_fn, element_spec),
                                     hparams.server_step)
  evaluator = evaluator.with_model(model_fn()).held_out_only()
  tuning = evaluation.LocalTuning(objectives.averaged_branches, config.epochs, hparams.client_learning_rate)
  return method.Algorithm(process, method.global_model_evaluation(evaluator, local_tuning=tuning), model_fn=model_fn)
