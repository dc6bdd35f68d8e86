"""FedEvp (seed 001, Algorithm 2): a representation aligned to evolving prototypes, a classifier, personalization.

Seed 001's formulas were lost with its text; the digest (`../shared/notes/seed_001_digest.md`, section 2.2)
reconstructs them, marked [R]. One representation f and a classifier head w (`models.representation
.tower_head_model`; Table 8's 379,392 parameters = the 370,560 tower + an 8,832 head). Client objective, one step
per batch (`algorithms.core.prototypes`):

  c^0 = 0,  c^m_y = ((m - 1) / m) c^{m-1}_y + (1 / m) mean_{x in B^m, y} f(x)                 (Eq. 6 [R])
  L_align = sum_{m >= 2} -(1 / |Q^m|) sum_{(x, y) in Q^m} log softmax_{y'}(-d(f(x), c^{m-1}_{y'}))_y   (Eq. 7 [R])
  L_CE = (1 / |B|) sum_{(x, y) in B} CE(w(f(x)), y)                                         (Eq. 8)
  L = L_CE + L_align

The server averages f and w. After training, each client personalizes the head and the last layer of f for one
epoch on its own data (Section 4.2), `target_accuracy` (the seed's client accuracy); `target_server_accuracy` and
the centralized test sets use the global model (server accuracy). Prediction: argmax_y w(f(x))_y.

Choices (flags `--fedevp_<field>`):
- As for FedEvolve (`algorithms.methods.fedevolve`), one batch holds every source stage and the prototypes are
  built from the batch's class means per stage, inside the graph; the prototypes are rebuilt from c^0 = 0 at every
  batch, so no client state carries them (digest section 2.2, "State").
- `prototypes`: `running_mean` (default; Eq. 6's 1/m weights, "averaging over all previous domains"), over the
  stages where the class is present (digest 5.5), or `moving_average` with `momentum` (the digest's alternative).
- `first_stage`: `included` (default; the digest's "faithful and sensible" reading: domain 1's class means enter
  c) or `skipped` (Algorithm 2's skeleton literally: the update under `if m >= 2`, so domain 1 never enters).
- `prototype_gradient`: `detached` (default; the digest suggests detaching past domains, so the alignment moves
  f(x) towards the prototypes and not the prototypes towards it) or `through`.
- Alignment and cross-entropy are one summed loss, weight 1 (the seed names no coefficient; digest 5.4).
- `stage_reduction`: `sum` (default; Eq. 7 [R] summed over m >= 2) or `mean` over the stages scored. The sum makes
  the alignment M - 2 times the cross-entropy's weight: on Circle's 29 sources the global model did not fit its
  training data (train accuracy 0.58, server accuracy on the target 0.56 at round 60, seed 0; README).
- `distance`, `aggregation`: as FedEvolve's.
- Personalization: `personalization_epochs` (1) of SGD at `personalization_learning_rate` (0: the client rate) on
  the training objective, over the client's sources (the held-out `target` clients' personalization data), head
  and last layer of f only (Table 9's best).
"""

import dataclasses

import tensorflow as tf
import tensorflow_federated as tff

from algorithms.core import client_training
from algorithms.core import evaluation
from algorithms.core import learning_process
from algorithms.core import method
from algorithms.core import objectives
from algorithms.core import prototypes
from models import multi_branch
from models import representation
from tasks import task as task_lib

NAME = 'fedevp'
FIRST_STAGE = ('included', 'skipped')
PROTOTYPE_GRADIENTS = ('detached', 'through')
AGGREGATIONS = ('examples', 'uniform')


@dataclasses.dataclass(frozen=True)
class Config:
  distance: str = method.setting('euclidean', 'FedEvp: d of Eq. 7, euclidean (the seed\'s word) or squared.')
  prototypes: str = method.setting('running_mean', 'FedEvp: evolving prototypes of Eq. 6, running_mean (1/m '
                                   'weights) or moving_average.')
  momentum: float = method.setting(0.5, 'FedEvp: weight of the newest domain in the moving_average prototypes.')
  first_stage: str = method.setting('included', 'FedEvp: whether domain 1\'s class means enter the prototypes '
                                    '(included) or not (skipped, Algorithm 2 read literally).')
  prototype_gradient: str = method.setting('detached', 'FedEvp: prototypes of past domains detached from the '
                                           'gradient (detached) or not (through).')
  aggregation: str = method.setting('examples', 'FedEvp: server average weighted by examples or uniform.')
  stage_reduction: str = method.setting('sum', 'FedEvp: Eq. 7 summed over consecutive stages (sum, the '
                                        'reconstruction) or averaged (mean).')
  personalization_epochs: int = method.setting(1, 'FedEvp: epochs of personalization of the head and the last '
                                               'representation layer before each client\'s test.')
  personalization_learning_rate: float = method.setting(0.0, 'FedEvp: SGD learning rate of the personalization; '
                                                        '0 uses --client_learning_rate.')

  def validate(self) -> None:
    method.check_settings(self, NAME, choices={'distance': prototypes.DISTANCES, 'prototypes': prototypes.AVERAGES,
                                              'first_stage': FIRST_STAGE, 'prototype_gradient': PROTOTYPE_GRADIENTS,
                                              'aggregation': AGGREGATIONS,
                                              'stage_reduction': prototypes.STAGE_REDUCTIONS},
                          at_least_one=('personalization_epochs',))
    if not 0 < self.momentum <= 1 or self.personalization_learning_rate < 0:
      raise ValueError(f'--fedevp_momentum must be in (0, 1] and --fedevp_personalization_learning_rate >= 0; got '
                       f'{self.momentum:g}, {self.personalization_learning_rate:g}.')


def training_objective(num_stages: int, num_classes: int, config: Config):
  """L_CE + L_align (Eq. 6-8 [R]) on the tower-head network's outputs; the metrics are the classifier's. Batches
  without stages (scenarios without time stages) have no alignment: plain cross-entropy."""

  def objective(outputs, batch):
    result = objectives.averaged_branches(outputs, batch)
    if 'stage' not in batch:
      return result
    features = outputs[multi_branch.FEATURES]
    means, counts = prototypes.stage_class_means(features, batch['y'], batch['stage'], num_stages, num_classes)
    evolving, has_prototype = prototypes.evolving_prototypes(means, counts, config.prototypes, config.momentum,
                                                             include_first_stage=config.first_stage == 'included')
    if config.prototype_gradient == 'detached':
      evolving = tf.stop_gradient(evolving)
    alignment = prototypes.prototype_nll(features, batch['y'], batch['stage'], evolving, has_prototype,
                                         config.distance, config.stage_reduction)
    return result._replace(loss=result.loss + alignment.loss)

  return objective


def build_process(task: task_lib.Task, element_spec, hparams: method.Hyperparameters, config: Config):
  """(model_fn, learning process): the tower and head trained on Eq. 6-8 [R], averaged, the server step applied."""
  network = task.representation_split()
  model_fn = lambda: representation.tower_head_model(network)
  client_work = client_training.objective_client_work(
      model_fn, task.batch_fn, tff.learning.optimizers.build_sgdm(hparams.client_learning_rate), element_spec,
      training_objective(task.num_stages, task.num_classes, config), uniform_weights=config.aggregation == 'uniform')
  return model_fn, learning_process.compose(model_fn, client_work, hparams.server_step)


def build_algorithm(task: task_lib.Task, element_spec, hparams: method.Hyperparameters,
                    evaluator: evaluation.Evaluator, config: Config) -> method.Algorithm:
  config.validate()
  network = task.representation_split()
  model_fn, process = build_process(task, element_spec, hparams, config)
  objective = training_objective(task.num_stages, task.num_classes, config)
  model = model_fn()
  evaluator = evaluator.with_model(model)
  tuning = evaluation.LocalTuning(objective, config.personalization_epochs,
                                  config.personalization_learning_rate or hparams.client_learning_rate,
                                  trained_mask=representation.personalized_mask(model, network.last_layers))

  def evaluate(state):
    return evaluator.evaluate_personal(learning_process.global_model_weights(state), objectives.averaged_branches,
                                       tuning)

  return method.Algorithm(process, evaluate, shift_free=False, model_fn=model_fn)
