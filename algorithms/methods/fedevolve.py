"""FedEvolve (seed 001, Algorithm 1): federated learning of the transition between consecutive domains.

Seed 001's formulas were lost with its text; the digest (`../shared/notes/seed_001_digest.md`, section 2.1)
reconstructs them, marked [R]. Two representation towers and no classifier (`models.representation
.two_tower_model`; Table 8's 741,120 parameters are two of the 370,560 towers): psi maps data of domain m to the
estimated representation of domain m + 1, phi maps data of domain m + 1 to its actual representation.

Client objective, one step per batch (`algorithms.core.prototypes`):

  c^m_y = mean_{x in B^m, y} psi(x)                                               (Eq. 4 [R], inside the graph)
  L = sum_{m=1}^{M-1} -(1 / |Q^{m+1}|) sum_{(x, y) in Q^{m+1}} log softmax_{y' in Y^m}(-d(phi(x), c^m_{y'}))_y
                                                                                  (Eq. 5 [R], summed over m)

Server: the towers are averaged (Algorithm 1, lines 23-24) through the suite's composition: the averaged update goes
to the server step (`--server_optimizer`; `sgd` with learning rate 1 is Algorithm 1's averaging, the faithful reading
the FedEvolve grids use; `adam`, the suite's default, is FedAdam).
Prediction on the target domain M + 1: prototypes c^M from the last source domain through psi, each target example
mapped by phi and given the class of the nearest prototype.

Choices, measured or argued (flags `--fedevolve_<field>`):
- One batch holds examples of every source stage (the client's sources shuffled together; `batch['stage']`, the
  time stage a client knows of its data), and the prototypes of stage m are the batch's class means of stage m, so
  one step takes the gradient of the whole sum over m where Algorithm 1 steps once per pair (B^m, B^{m+1}): the
  same objective, M - 1 times fewer steps. Batches must hold several examples of each class per stage: the runs of
  the README use `--client_batch_size` 128 for every method.
- An example whose class has no prototype in the previous stage of its batch is not scored (digest 5.5), and
  |Q^{m+1}| counts the scored examples.
- `distance`: `euclidean` (default, the seed's word) or `squared` (Prototypical Networks).
- `stage_reduction`: `sum` (default, Eq. 5 [R] summed over m) or `mean` over the stages scored. FedEvolve's loss is
  the alignment alone, so the mean only divides its gradient by the M - 1 stages (a smaller step on Circle's 29
  sources).
- `aggregation`: `examples` (default; the seed's protocol, Section 3.4: "weighted averaging by local sample
  counts", here the examples scored) or `uniform` (Section 4.1's "average aggregation").
- Evaluation needs each client's data of the last source domain (the scenario's held-out `target` clients, with
  their sources): `target_accuracy` (the seed's client accuracy) predicts each client's target data with the global
  towers and that client's own prototypes; `target_server_accuracy` and the centralized test sets (the seed's
  server accuracy) use prototypes pooled over every client's last-source data. FedEvolve has no other per-client
  part, so its client model is the global towers with the client's prototypes (digest section 5.7 leaves this
  open).
"""

import dataclasses

import tensorflow as tf
import tensorflow_federated as tff

from algorithms.core import client_training
from algorithms.core import evaluation
from algorithms.core import learning_process
from algorithms.core import method
from algorithms.core import prototypes
from models import representation
from tasks import task as task_lib

NAME = 'fedevolve'
AGGREGATIONS = ('examples', 'uniform')
HELD_OUT = 'target'


@dataclasses.dataclass(frozen=True)
class Config:
  distance: str = method.setting('euclidean', 'FedEvolve: d of Eq. 5, euclidean (the seed\'s word) or squared.')
  aggregation: str = method.setting('examples', 'FedEvolve: server average weighted by the examples each client '
                                    'scored (examples) or a plain average (uniform).')
  stage_reduction: str = method.setting('sum', 'FedEvolve: Eq. 5 summed over consecutive stages (sum, the '
                                        'reconstruction) or averaged (mean).')

  def validate(self) -> None:
    method.check_settings(self, NAME, choices={'distance': prototypes.DISTANCES, 'aggregation': AGGREGATIONS,
                                              'stage_reduction': prototypes.STAGE_REDUCTIONS})


def check_stages(task: task_lib.Task, name: str, at_least: int) -> None:
  """Raises a one-line ValueError unless the task's domains have `at_least` time stages (sources and target)."""
  if task.num_stages < at_least:
    raise ValueError(f'{name} learns from the order of a client\'s domains and needs a scenario whose domains are '
                     f'time stages, at least {at_least} (--scenario=evolving_domains --num_domains>={at_least}); '
                     f'this one has {task.num_stages}.')


def training_objective(num_stages: int, num_classes: int, distance: str, stage_reduction: str = 'sum'):
  """The per-batch objective of Eq. 4-5 [R] on the two towers' outputs."""

  def objective(outputs, batch):
    means, counts = prototypes.stage_class_means(outputs[representation.PSI], batch['y'], batch['stage'],
                                                 num_stages, num_classes)
    return prototypes.prototype_nll(outputs[representation.PHI], batch['y'], batch['stage'], means, counts > 0,
                                    distance, stage_reduction)

  return objective


def evaluation_objective(distance: str):
  """Nearest prototype on phi(x): objective(outputs, batch, prototypes [C, d], has [C][, client table [N, C, d],
  [N, C]]) with the client's own prototypes when the client tables are given."""

  def objective(outputs, batch, pooled, pooled_has, client_prototypes=None, client_has=None):
    if client_prototypes is None:
      return prototypes.nearest_prototype_result(outputs[representation.PHI], batch['y'], pooled, pooled_has,
                                                 distance)
    return prototypes.nearest_prototype_result(outputs[representation.PHI], batch['y'], client_prototypes,
                                               client_has, distance, clients=batch['client'])

  return objective


def last_source_prototypes(embeddings, labels, stages, clients, last_stage: int, num_clients: int,
                           num_classes: int):
  """(client prototypes [N, C, d], has [N, C], pooled prototypes [C, d], has [C]): class means of psi over the
  examples of stage `last_stage`, per client and over all clients."""
  selected = tf.equal(stages, last_stage)
  embeddings, labels, clients = (tf.boolean_mask(t, selected) for t in (embeddings, labels, clients))
  per_client, client_counts = prototypes.stage_class_means(embeddings, labels, clients, num_clients, num_classes)
  pooled, pooled_counts = prototypes.stage_class_means(embeddings, labels, tf.zeros_like(labels), 1, num_classes)
  return per_client, client_counts > 0, pooled[0], pooled_counts[0] > 0


def build_process(task: task_lib.Task, element_spec, hparams: method.Hyperparameters, config: Config):
  """(model_fn, learning process): the two towers trained on Eq. 5 [R], averaged, the server step applied."""
  network = task.representation_split()
  model_fn = lambda: representation.two_tower_model(network)
  client_work = client_training.objective_client_work(
      model_fn, task.batch_fn, tff.learning.optimizers.build_sgdm(hparams.client_learning_rate), element_spec,
      training_objective(task.num_stages, task.num_classes, config.distance, config.stage_reduction),
      uniform_weights=config.aggregation == 'uniform')
  return model_fn, learning_process.compose(model_fn, client_work, hparams.server_step)


def build_algorithm(task: task_lib.Task, element_spec, hparams: method.Hyperparameters,
                    evaluator: evaluation.Evaluator, config: Config) -> method.Algorithm:
  config.validate()
  check_stages(task, NAME, at_least=3)
  if HELD_OUT not in evaluator.held_out_names:
    raise ValueError(f'{NAME} predicts with each client\'s last-source prototypes and needs the scenario\'s '
                     f'held-out {HELD_OUT!r} clients (evolving_domains).')
  num_stages, num_classes = task.num_stages, task.num_classes
  model_fn, process = build_process(task, element_spec, hparams, config)
  evaluator = evaluator.with_model(model_fn())
  server = evaluator.held_out_only()
  objective = evaluation_objective(config.distance)
  embed = lambda outputs, batch: (outputs[representation.PSI], batch['y'], batch['stage'])

  def evaluate(state):
    weights = learning_process.global_model_weights(state)
    embeddings, labels, stages, clients = evaluator.collect_personalization(weights, HELD_OUT, embed,
                                                                            (tf.float32, tf.int32, tf.int32))
    per_client, client_has, pooled, pooled_has = last_source_prototypes(
        embeddings, labels, stages, clients, num_stages - 2, evaluator.held_out_clients(HELD_OUT), num_classes)
    metrics = evaluator.evaluate(weights, objective, objective_args=(pooled, pooled_has),
                                 client_args={HELD_OUT: (per_client, client_has)})
    metrics.update(evaluation.server_view(server.evaluate(weights, objective, objective_args=(pooled, pooled_has)),
                                          server.held_out_names))
    return metrics

  return method.Algorithm(process, evaluate, shift_free=False, model_fn=model_fn)
