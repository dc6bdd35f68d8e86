"""FedEvp (Tan et al., "Federated Learning Under Evolving Distribution Shifts", 2024, Algorithm 2): a
representation aligned to evolving prototypes, a classifier, personalization.

The paper's text as available lost its formulas; the equations below are reconstructed from its prose, marked [R].
One representation f and a classifier head w (`models.representation.tower_head_model`; the paper's Table 8 counts
379,392 parameters = the 370,560 tower + an 8,832 head). Algorithm 2 sweeps a client's domains m = 1..M in order,
each with a batch B^m of domain m:

  c^0 = 0,  c^m_y = ((m - 1) / m) c^{m-1}_y + (1 / m) mean_{x in B^m, y} f(x)                 (Eq. 6 [R])
  A^m = -(1 / |Q^m|) sum_{(x, y) in Q^m} log softmax_{y'}(-d(f(x), c^{m-1}_{y'}))_y,  m >= 2     (Eq. 7 [R])
  CE^m = (1 / |B^m|) sum_{(x, y) in B^m} CE(w(f(x)), y)                                         (Eq. 8)

and steps on CE^m and A^m at every domain: cross-entropy and alignment weigh 1:1 per domain. Here (`batching`
`stage_sweep`, the default) each local iteration takes a step per domain m in turn, on the next `stage_batch_size`
examples of domain m (`algorithms.core.stage_batches`; the support rows it adds are not used), descending CE^m + A^m
against the prototypes c^{m-1} the sweep has accumulated so far; after the step, domain m's class means, from the
features of that step, enter c (Eq. 6), as Algorithm 2's line 20. The prototypes live in the client computation's
variables, start at 0 for every client and restart with every local iteration (a step whose domain is not later
than the previous step's). Built instead before each step from the earlier domains with the step's own parameters,
prototypes chase the representation they align, and on Circle at the task's client rate the global model collapses
to a constant predictor (docs/results/fedevolve.md, "FedEvp's prototypes (Algorithm 2)";
`benchmarks/fedevp_reference_sweep.py` runs both).

The other layouts take a batch holding examples of every stage (the client's shuffled batch, or `stage_strata`'s
`stage_batch_size` of each stage), build the prototypes from the batch itself, and descend the sweep's objective
divided by the M stages in the batch:

  L = (1 / |B|) sum_{(x, y) in B} CE(w(f(x)), y) + (1 / M) sum_{m >= 2} A^m                   (`stage_reduction` mean)

the mean of Algorithm 2's per-domain objectives CE^m + A^m when every stage fills an equal share of the batch: the
same balance in M times fewer steps.

The server averages f and w. After training, each client personalizes the head and the last layer of f for one
epoch on its own data (Section 4.2), `target_accuracy` (the paper's client accuracy); `target_server_accuracy` and
the centralized test sets use the global model (server accuracy). Prediction: argmax_y w(f(x))_y.

Choices (flags `--fedevp_<field>`):
- `batching`: `stage_sweep` (default: Algorithm 2's step per domain, above), `packed` (the client's shuffled batches
  as they come; a batch of 128 over 12 stages holds about one example of a class and stage, but c^{m-1} averages
  the class means of m stages, so its support grows with m) or `stage_strata` (`stage_batch_size` examples of every
  stage per batch: a batch of M b examples, so M b / B times fewer steps than `packed` batches of B). The step count
  decides how fast the paper's CNN trains under parameter averaging (docs/results/fedevolve.md, "At each method's
  defaults"): a client of 6 domains of 30 digits takes 6 steps a round swept, 2 packed in batches of 128.
- `stage_batch_size` (64): examples per stage in a batch (`stage_sweep`, `stage_strata`).
- `stage_reduction`: `mean` (default, Algorithm 2's 1:1 balance, above; `stage_sweep` steps on one domain, where
  the two readings agree) or `sum` (the alignment summed over the stages: M - 1 times the cross-entropy's weight; on
  Circle's 29 sources the global model then did not fit its training data, train accuracy 0.58).
- `prototypes`: `running_mean` (default; Eq. 6's 1/m weights, "averaging over all previous domains"), over the
  stages where the class is present, or `moving_average` with `momentum`.
- `first_stage`: `included` (default: domain 1's class means enter c, the sensible reading) or `skipped`
  (Algorithm 2's skeleton literally: the update sits under `if m >= 2`, so domain 1 never enters).
- `prototype_gradient`: `detached` (default; in Algorithm 2 the prototypes are built before the step that uses them,
  so no gradient reaches them) or `through` (`packed` and `stage_strata` only: the swept prototypes come from
  earlier steps).
- Alignment and cross-entropy weigh 1 each (the paper names no coefficient).
- `distance`, `aggregation`: as FedEvolve's (`algorithms.methods.fedevolve`).
- Personalization: `personalization_epochs` (1) of SGD at `personalization_learning_rate` (0: the client rate) on
  the training objective, over the client's sources (the held-out `target` clients' personalization data, in
  shuffled batches), head and last layer of f only (the paper's Table 9's best).
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
from algorithms.core import stage_batches
from models import multi_branch
from models import representation
from tasks import task as task_lib

NAME = 'fedevp'
SEEDED_BUILD = False
SENDS = method.Sends()
UNTUNED_ADAPTIVE_STEP = (
    "on real digits in EMNIST's layout (evolving_domains, 80 rounds) FedAdam at the emnist task's rate left the "
    "FedEvolve paper's CNN near its initial representation for the first 35 rounds: FedEvp's training accuracy 0.17 "
    "over rounds 1-50 against 0.33 with its averaging, and 0.82 over rounds 71-80 against 0.87 "
    '(docs/results/fedevolve.md)')
DEFAULTS = method.Defaults(
    method.PARAMETER_AVERAGING,
    source=('Tan et al., "Federated Learning Under Evolving Distribution Shifts", 2024: Section 3 (the server '
            "aggregates the clients' parameters by weighted averaging) and Algorithm 2 (the server's new f and w "
            "are the clients' means)"),
    notes=("The local step size, local updates and batch size are in the paper's Appendix A, not in its main text: "
           "the task's."),
    scenario='evolving_domains',
    untuned_adaptive_step=UNTUNED_ADAPTIVE_STEP)
FIRST_STAGE = ('included', 'skipped')
PROTOTYPE_GRADIENTS = ('detached', 'through')
AGGREGATIONS = ('examples', 'uniform')
BATCHINGS = ('stage_sweep', 'packed', 'stage_strata')


@dataclasses.dataclass(frozen=True)
class Config:
  distance: str = method.setting('euclidean', 'FedEvp: d of Eq. 7, euclidean (the paper\'s word) or squared.')
  prototypes: str = method.setting('running_mean', 'FedEvp: evolving prototypes of Eq. 6, running_mean (1/m '
                                   'weights) or moving_average.')
  momentum: float = method.setting(0.5, 'FedEvp: weight of the newest domain in the moving_average prototypes.')
  first_stage: str = method.setting('included', 'FedEvp: whether domain 1\'s class means enter the prototypes '
                                    '(included) or not (skipped, Algorithm 2 read literally).')
  prototype_gradient: str = method.setting('detached', 'FedEvp: prototypes of past domains detached from the '
                                           'gradient (detached) or not (through).')
  aggregation: str = method.setting('examples', 'FedEvp: server average weighted by examples or uniform.')
  stage_reduction: str = method.setting('mean', 'FedEvp: Eq. 7 averaged over the stages of a batch (mean, Algorithm '
                                        '2\'s balance with the cross-entropy) or summed (sum).')
  batching: str = method.setting('stage_sweep', 'FedEvp: a step per domain in turn, aligned to the prototypes the '
                                 'sweep has accumulated (stage_sweep, Algorithm 2), the client\'s mixed batches '
                                 '(packed) or batches with stage_batch_size examples of every stage (stage_strata).')
  stage_batch_size: int = method.setting(64, 'FedEvp: examples of each stage in a batch (stage_sweep, stage_strata).')
  alignment_weight: float = method.setting(1.0, 'FedEvp: weight of the alignment (Eq. 7) against the '
                                           'cross-entropy; the paper names none (1); 0 trains the tower and head on '
                                           'the cross-entropy alone.')
  personalization_epochs: int = method.setting(1, 'FedEvp: epochs of personalization of the head and the last '
                                               'representation layer before each client\'s test.')
  personalization_learning_rate: float = method.setting(0.0, 'FedEvp: SGD learning rate of the personalization; '
                                                        '0 uses --client_learning_rate.')

  def validate(self) -> None:
    method.check_settings(self, NAME, choices={'distance': prototypes.DISTANCES, 'prototypes': prototypes.AVERAGES,
                                              'first_stage': FIRST_STAGE, 'prototype_gradient': PROTOTYPE_GRADIENTS,
                                              'aggregation': AGGREGATIONS,
                                              'stage_reduction': prototypes.STAGE_REDUCTIONS,
                                              'batching': BATCHINGS},
                          at_least_one=('personalization_epochs', 'stage_batch_size'))
    if self.batching == 'stage_sweep' and self.prototype_gradient == 'through':
      raise ValueError('--fedevp_prototype_gradient=through needs --fedevp_batching=packed or stage_strata: the '
                       'prototypes of stage_sweep come from earlier steps, which no gradient reaches.')
    if not 0 < self.momentum <= 1 or self.personalization_learning_rate < 0 or self.alignment_weight < 0:
      raise ValueError(f'--fedevp_momentum must be in (0, 1], --fedevp_personalization_learning_rate and '
                       f'--fedevp_alignment_weight >= 0; got {self.momentum:g}, '
                       f'{self.personalization_learning_rate:g}, {self.alignment_weight:g}.')


# Where each setting's default comes from (`algorithms.registry` checks one per setting; docs/running.md
# shows them).
SETTING_SOURCES = {
    'distance': "paper: Section 3, 'we employ Euclidean distance'",
    'prototypes': "paper: Eq. 6, 1/m weights ('averaging over all previous domains')",
    'momentum': 'suite choice: only with --fedevp_prototypes=moving_average, which the paper does not use',
    'first_stage': ("suite choice: domain 1's class means enter the prototypes; Algorithm 2's skeleton, read "
                    "literally, updates them under 'if m >= 2' only (skipped)"),
    'prototype_gradient': 'paper: Algorithm 2 builds the prototypes before the step that uses them (no gradient)',
    'aggregation': "paper: Section 3.4, 'weighted averaging by local sample counts'",
    'stage_reduction': ('paper: Algorithm 2, the alignment and the cross-entropy in a 1:1 balance (the mean over '
                        'stages)'),
    'batching': 'paper: Algorithm 2, a step per domain in turn against the prototypes accumulated so far',
    'stage_batch_size': "suite choice: the paper states no batch per stage; as FedEvolve's",
    'alignment_weight': 'suite choice: the paper names no coefficient of the alignment against the cross-entropy (1)',
    'personalization_epochs': ('suite choice: the paper states none; one epoch of the head and last layer, Table '
                               "9's best choice of what to personalize"),
    'personalization_learning_rate': 'suite choice: the client rate (0); the paper states none',
}


def training_objective(num_stages: int, num_classes: int, config: Config):
  """L = CE + the alignment (Eq. 6-8 [R]; divided by the stages in the batch with `stage_reduction` mean) on the
  tower-head network's outputs, the prototypes built from the batch itself (`packed`, `stage_strata` and
  personalization); the metrics are the classifier's. Batches without stages (scenarios without time stages) have
  no alignment: plain cross-entropy."""

  def objective(outputs, batch):
    if 'stage' not in batch:
      return objectives.averaged_branches(outputs, batch)
    features = outputs[multi_branch.FEATURES]
    means, counts = prototypes.stage_class_means(features, batch['y'], batch['stage'], num_stages, num_classes)
    evolving, has_prototype = prototypes.evolving_prototypes(means, counts, config.prototypes, config.momentum,
                                                             include_first_stage=config.first_stage == 'included')
    if config.prototype_gradient == 'detached':
      evolving = tf.stop_gradient(evolving)
    result = objectives.averaged_branches(outputs, batch)
    alignment = prototypes.prototype_nll(features, batch['y'], batch['stage'], evolving, has_prototype,
                                         config.distance).loss
    if config.stage_reduction == 'mean':
      alignment /= tf.maximum(tf.reduce_sum(tf.cast(tf.reduce_sum(counts, axis=1) > 0, tf.float32)), 1.0)
    return result._replace(loss=result.loss + config.alignment_weight * alignment)

  return objective


def _own_rows(batch: dict) -> tf.Tensor:
  """The rows of a `stage_sweep` batch that are its step's own: its last stage's (the others are support rows)."""
  return tf.equal(batch['stage'], tf.reduce_max(batch['stage']))


def swept_forward(model: tf.keras.Model, batch: dict):
  """The network on a `stage_sweep` batch's own rows only."""
  return model(tf.boolean_mask(batch['x'], _own_rows(batch)), training=True)


class SweptPrototypes:
  """Algorithm 2's prototypes c over one client's sweep, in variables of the client computation: the class
  prototypes [C, d], the number of domains each class entered [C] and the stage of the last step."""

  def __init__(self, num_classes: int, feature_dim: int):
    self.prototypes = tf.Variable(tf.zeros([num_classes, feature_dim]), trainable=False)
    self.domains = tf.Variable(tf.zeros([num_classes]), trainable=False)
    self.last_stage = tf.Variable(tf.constant(-1, tf.int64), trainable=False)


def _with_domain(config: Config, current: tuple, features, labels, stage) -> tuple:
  """(prototypes, domains) after the domain `stage` with `features` [n, d] and `labels` [n] enters (Eq. 6):
  running_mean, the mean of the class means over the domains where the class is present; moving_average, momentum
  times the new class mean plus (1 - momentum) times the old. With `first_stage` skipped, stage 0 enters as zeros."""
  prototypes_now, domains = current
  means, counts = prototypes.stage_class_means(features, labels, tf.zeros_like(labels), 1, domains.shape[0])
  means, present = means[0], counts[0] > 0
  if config.first_stage == 'skipped':
    first = tf.equal(stage, 0)
    means, present = tf.where(first, tf.zeros_like(means), means), tf.logical_or(first, present)
  domains = domains + tf.cast(present, tf.float32)
  if config.prototypes == 'running_mean':
    moved = prototypes_now + (means - prototypes_now) / tf.maximum(domains, 1.0)[:, tf.newaxis]
  else:
    moved = (1.0 - config.momentum) * prototypes_now + config.momentum * means
  return tf.where(present[:, tf.newaxis], moved, prototypes_now), domains


def swept_objective(config: Config, carried: SweptPrototypes):
  """Algorithm 2's step on a `stage_sweep` batch (outputs of `swept_forward`): CE^m + A^m of the step's domain m
  against the prototypes c^{m-1} in `carried`, which then take in domain m's class means. A step whose stage does
  not follow the last one starts a new sweep: c restarts at 0."""

  def objective(outputs, batch):
    batch = tf.nest.map_structure(lambda t: tf.boolean_mask(t, _own_rows(batch)), batch)
    stage = tf.cast(batch['stage'][0], tf.int64)
    restart = stage <= carried.last_stage
    current = tuple(tf.where(restart, tf.zeros_like(v), v) for v in (carried.prototypes, carried.domains))
    features, labels = outputs[multi_branch.FEATURES], tf.cast(batch['y'], tf.int32)
    result = objectives.averaged_branches(outputs, batch)
    has_prototype = current[1] > 0
    scored = tf.cast(tf.gather(has_prototype, labels), tf.float32)
    nll = tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=labels, logits=prototypes.prototype_logits(features, current[0], has_prototype, config.distance))
    alignment = tf.reduce_sum(nll * scored) / tf.maximum(tf.reduce_sum(scored), 1.0)
    updated = _with_domain(config, current, tf.stop_gradient(features), labels, stage)
    for variable, value in zip((carried.prototypes, carried.domains, carried.last_stage), updated + (stage,)):
      variable.assign(value)
    return result._replace(loss=result.loss + config.alignment_weight * alignment)

  return objective


def _swept_client_work(model_fn, task: task_lib.Task, element_spec, hparams: method.Hyperparameters,
                       config: Config) -> tff.learning.templates.ClientWorkProcess:
  """The client work of `stage_sweep`: `client_training.local_training` on `swept_objective`, whose prototypes are
  variables made inside the client computation (so every client starts from c = 0)."""
  optimizer = tff.learning.optimizers.build_sgdm(hparams.client_learning_rate)
  regroup = stage_batches.regrouped('stage_sweep', task.num_stages, config.stage_batch_size)
  feature_dim = model_fn().output[multi_branch.FEATURES].shape[-1]

  @tff.tensorflow.computation(learning_process.model_weights_type(model_fn),
                              learning_process.client_data_type(element_spec))
  def client_update(weights, dataset):
    model = learning_process.client_model(model_fn)
    objective = swept_objective(config, SweptPrototypes(task.num_classes, feature_dim))
    train = tf.function(lambda initial, batches: client_training.local_training(
        model, optimizer, initial, batches, objective, forward=swept_forward), autograph=False)
    output = train(weights, regroup(task_lib.model_batches(dataset, task.batch_fn)))
    weight = tf.cast(output.finite, tf.float32) if config.aggregation == 'uniform' else output.num_examples
    return tff.learning.templates.ClientResult(update=output.update, update_weight=weight), output.metrics

  return learning_process.stateless_client_work(client_update, client_training.finalize_train_metrics)


def build_process(task: task_lib.Task, element_spec, hparams: method.Hyperparameters, config: Config):
  """(model_fn, learning process): the tower and head trained on Eq. 6-8 [R], averaged, the server step applied. A
  task without time stages has no domains to sweep and no alignment: every layout trains on the cross-entropy of the
  client's batches as they come."""
  network = task.representation_split()
  model_fn = lambda: representation.tower_head_model(network)
  if config.batching == 'stage_sweep' and task.num_stages > 1:
    client_work = _swept_client_work(model_fn, task, element_spec, hparams, config)
  else:
    client_work = client_training.objective_client_work(
        model_fn, task.batch_fn, tff.learning.optimizers.build_sgdm(hparams.client_learning_rate), element_spec,
        training_objective(task.num_stages, task.num_classes, config), uniform_weights=config.aggregation == 'uniform',
        regroup=stage_batches.regrouped(config.batching, task.num_stages, config.stage_batch_size))
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

  return method.Algorithm(process, evaluate, model_fn=model_fn)
