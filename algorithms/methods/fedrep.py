"""FedRep (Collins et al., 2021, "Exploiting Shared Representations for Personalized Federated Learning"): one
shared representation, a head on every client; a baseline of the FedEvolve paper (Section 5.2, its ref. [29]).

The network is FedEvp's (`models.representation.tower_head_model` of the task's representation split): a tower
phi and a head h. Every client keeps its own head h_c in the client-state store (`algorithms.core.client_state`,
checkpointed with the run). A client sampled in round t (Collins et al., Algorithm 1):

  1. starts from the broadcast phi^t and its own head h_c (at its first round, the broadcast server head h^t);
  2. trains the head alone, phi fixed: `head_epochs` passes over its round's data, one SGD step per batch;
  3. trains the representation alone, its new head fixed: `representation_epochs` passes;
  4. stores its new head and sends (phi^t - phi_c, h^t - h_c), weighted by the examples of step 3.

The server averages the updates (example-weighted mean; the server step by default averages parameters, the
paper's: `DEFAULTS`).

Evaluation (`algorithms.core.evaluation.Evaluator.evaluate_personal`):
- client accuracy (`target_accuracy` on `evolving_domains`, `personalized_accuracy` on `dirichlet_mixture`): each
  held-out client tested with the global phi and its own stored head, as Collins et al. test their clients; a
  held-out client that never trained (an unseen client) has no head and uses the server's;
- server accuracy (`<name>_server_accuracy` and the centralized test sets): the global phi with the server head.

Choices:
- The server head. FedRep has no global head, yet the FedEvolve paper reports FedRep's server accuracy without saying
  how it is formed. The server here averages the heads its clients trained (step 4 sends h^t - h_c), so the server model
  is the average client's; clients never load it after their first round. The representation's average is
  FedRep's.
- `head_epochs` = 10 and `representation_epochs` = 1: Collins et al.'s experiments train the head for many local
  steps and the representation for one epoch; the FedEvolve paper's hyperparameters are lost.
- Both steps use `--client_learning_rate` (Collins et al. use one rate).
"""

import collections
import dataclasses

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from algorithms.core import client_state
from algorithms.core import client_training
from algorithms.core import evaluation
from algorithms.core import learning_process
from algorithms.core import method
from algorithms.core import objectives
from models import representation
from tasks import task as task_lib

NAME = 'fedrep'
SEEDED_BUILD = False
SENDS = method.Sends(client_state=('initialized', 'head_0', 'head_1'))
DEFAULTS = method.Defaults(
    method.PARAMETER_AVERAGING,
    source=('Collins et al., "Exploiting Shared Representations for Personalized Federated Learning", 2021, '
            "Algorithm 1 (the server averages the clients' representations)"),
    scenario='evolving_domains')
INITIALIZED = 'initialized'


@dataclasses.dataclass(frozen=True)
class Config:
  head_epochs: int = method.setting(10, 'FedRep: passes over its round\'s data a client trains its head for, the '
                                    'representation fixed.')
  representation_epochs: int = method.setting(1, 'FedRep: passes over its round\'s data a client then trains the '
                                              'representation for, its head fixed.')

  def validate(self) -> None:
    method.check_settings(self, NAME, at_least_one=('head_epochs', 'representation_epochs'))


# Where each setting's default comes from (`algorithms.registry` checks one per setting; docs/running.md
# shows them).
SETTING_SOURCES = {
    'head_epochs': ("suite choice: Collins et al. (2021) train the head for many local steps; the FedEvolve paper's "
                    'hyperparameters for FedRep are not stated'),
    'representation_epochs': 'suite choice: Collins et al. (2021) train the representation for one epoch',
}


def head_key(index: int) -> str:
  """The client-state field of the head's `index`-th trainable tensor."""
  return f'head_{index}'


def initial_client_state(head_shapes) -> dict:
  """A client without a head yet: `initialized` 0 and zero head tensors (never read until it trains)."""
  state = {INITIALIZED: np.float32(0.0)}
  state.update({head_key(i): np.zeros(shape, np.float32) for i, shape in enumerate(head_shapes)})
  return state


def with_own_head(trainable, stored, head_mask: tuple[bool, ...]) -> list:
  """The trainable tensors `trainable` with the head's replaced by the client's stored head when it has one."""
  heads = iter(range(sum(head_mask)))
  own = stored[INITIALIZED] > 0
  return [tf.where(own, stored[head_key(next(heads))], value) if is_head else value
          for value, is_head in zip(trainable, head_mask)]


def build_client_work(model_fn: learning_process.ModelFn, head_mask: tuple[bool, ...], batch_fn: task_lib.BatchFn,
                      element_spec, learning_rate: float, config: Config,
                      initial_state: dict) -> tff.learning.templates.ClientWorkProcess:
  """Steps 1-4 of the module docstring on every sampled client; the new heads return to the client-state store."""
  weights_type = learning_process.model_weights_type(model_fn)
  data_type = client_state.client_data_type(element_spec, initial_state)
  representation_mask = tuple(not is_head for is_head in head_mask)

  @tff.tensorflow.computation(weights_type, data_type)
  def client_update(weights, data):
    model = learning_process.client_model(model_fn)
    optimizer = tff.learning.optimizers.build_sgdm(learning_rate)
    objective = objectives.averaged_branches

    @tf.function(autograph=False)
    def run(weights, dataset, stored):
      start = tff.learning.models.ModelWeights(with_own_head(weights.trainable, stored, head_mask),
                                               weights.non_trainable)
      batches = task_lib.model_batches(dataset, batch_fn)
      head = client_training.local_training(model, optimizer, start, batches.repeat(config.head_epochs), objective,
                                            trained_mask=head_mask)
      tuned = tff.learning.models.ModelWeights([tf.identity(v) for v in model.trainable_variables],
                                               [tf.identity(v) for v in model.non_trainable_variables])
      body = client_training.local_training(model, optimizer, tuned, batches.repeat(config.representation_epochs),
                                            objective, trained_mask=representation_mask)
      trained = [tf.identity(v) for v in model.trainable_variables]
      update = [initial - value for initial, value in zip(weights.trainable, trained)]
      output = client_training.excluded_unless(body._replace(update=update), head.finite)
      new_heads = iter(value for value, is_head in zip(trained, head_mask) if is_head)
      new_state = collections.OrderedDict(position=stored[client_state.POSITION],
                                          **{INITIALIZED: tf.where(output.finite, 1.0, stored[INITIALIZED])})
      for index in range(sum(head_mask)):
        new_state[head_key(index)] = tf.where(output.finite, next(new_heads), stored[head_key(index)])
      return output, new_state

    output, new_state = run(weights, data['dataset'], client_state.read(data['client_state']))
    result = tff.learning.templates.ClientResult(update=output.update, update_weight=output.num_examples)
    return result, output.metrics, new_state

  return client_state.client_work(client_update, client_training.finalize_train_metrics)


def build_process(task: task_lib.Task, element_spec, hparams: method.Hyperparameters, config: Config):
  """(model_fn, learning process, a client's initial state): the tower and head of the task's representation
  split, trained as steps 1-4, averaged, FedAdam."""
  network = task.representation_split()
  model_fn = lambda: representation.tower_head_model(network)
  model = model_fn()
  head_mask = representation.personalized_mask(model, 0)
  initial_state = initial_client_state(
      [v.shape for v, is_head in zip(model.trainable_variables, head_mask) if is_head])
  client_work = build_client_work(model_fn, head_mask, task.batch_fn, element_spec, hparams.client_learning_rate,
                                  config, initial_state)
  return model_fn, learning_process.compose(model_fn, client_work, hparams.server_step), initial_state


def build_algorithm(task: task_lib.Task, element_spec, hparams: method.Hyperparameters,
                    evaluator: evaluation.Evaluator, config: Config) -> method.Algorithm:
  config.validate()
  model_fn, process, initial_state = build_process(task, element_spec, hparams, config)
  model = model_fn()
  head_mask = representation.personalized_mask(model, 0)
  evaluator = evaluator.with_model(model)

  def evaluate(state, client_states):
    weights = learning_process.global_model_weights(state)

    def client_weights(client_id: str) -> tff.learning.models.ModelWeights:
      stored = {key: tf.constant(value) for key, value in client_states(client_id).items()}
      return tff.learning.models.ModelWeights(with_own_head(weights.trainable, stored, head_mask),
                                              weights.non_trainable)

    return evaluator.evaluate_personal(weights, objectives.averaged_branches, client_weights=client_weights)

  return method.Algorithm(process, evaluate, initial_client_state=initial_state,
                          model_fn=model_fn, evaluates_client_states=True)
