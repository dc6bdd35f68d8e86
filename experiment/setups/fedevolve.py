"""The evolving-domain experiments of "Federated Learning Under Evolving Distribution Shifts" (Tan et al., 2024;
FedEvolve, FedEvp): Rotated MNIST (12 domains, 15 degrees apart) and Circle (30 domains on a half circle), the last
domain the target, against the paper's baselines that run here (FedAvg, FedAvg+FT, FedRep).

The paper's training hyperparameters are in its Appendix A, which its text does not carry: the participation, batch
and rounds below are the suite's, each with its reason, and the client rate and epochs are left to the task (the same
for every method of the comparison) until a tuning record on a validation split chooses them.
"""

from experiment.setups import setup

PAPER = '"Federated Learning Under Evolving Distribution Shifts", Tan et al., 2024'
_METHODS = ('fedevolve', 'fedevp', 'vanilla_single', 'fedavg_plus', 'fedrep')


def _evolving(task: str, domains: int, step: float, where: str) -> dict[str, setup.Value]:
  return dict(
      task=setup.Value(task, setup.paper(f'Section 5.1, {where}')),
      scenario=setup.Value('evolving_domains', setup.paper('Section 3 (a sequence of source domains, then an unseen '
                                                           'target domain)')),
      num_domains=setup.Value(domains, setup.paper(f'Section 5.1, {where}: {domains} domains, the last the target')),
      rotation_step=setup.Value(step, setup.paper(f'Section 5.1, {where}')),
      num_clients=setup.Value(20, setup.suite_choice('the scenario\'s population; the paper\'s client count is in '
                                                     'its Appendix A')),
      clients_per_round=setup.Value(10, setup.suite_choice('half the clients a round ("clients may be partially '
                                                           'participating", Section 3)')),
      client_batch_size=setup.Value(128, setup.suite_choice(
          'in-batch prototypes need several examples of a class and stage in a batch')),
      total_rounds=setup.Value(60, setup.suite_choice('the rounds at which FedAvg\'s training accuracy has leveled '
                                                      'off on the suite\'s FedEvolve grid')),
      server_optimizer=setup.Value('sgd', setup.paper('Section 3, "weighted averaging by local sample counts"')),
      server_learning_rate=setup.Value(1.0, setup.paper('Algorithm 1 (the server\'s parameters are the clients\' '
                                                        'mean)')))


SETUPS = (
    setup.Setup('fedevolve_rotated_mnist', PAPER, 'Rotated MNIST, 12 domains 15 degrees apart',
                _evolving('mnist', 12, 15.0, 'Rotated MNIST (15-degree increments)'), _METHODS),
    setup.Setup('fedevolve_circle', PAPER, 'Circle, 30 Gaussian domains on a half circle',
                _evolving('circle', 30, 6.2069, 'Circle (30 domains uniformly on a half circle: 180 / 29 degrees)'),
                _METHODS),
)
