"""The experiments of "Diurnal or Nocturnal? Federated Learning of Multi-branch Networks from Periodically Shifting
Distributions" (Zhu et al., ICLR 2022): its three datasets under the periodic shift of period T = 256, trained as its
Table 2 states (FedAdam on the server, one local SGD epoch, its rates, epsilon, participation, batch and rounds).
"""

from experiment.setups import setup

PAPER = ('"Diurnal or Nocturnal? Federated Learning of Multi-branch Networks from Periodically Shifting '
         'Distributions", Zhu et al., 2022')
_TABLE_2 = 'Table 2 (training hyperparameters)'
_METHODS = ('vanilla', 'nds', 'scsgd', 'min_loss', 'fedem', 'fedtem', 'fedtkm')
_IMAGE_METHODS = _METHODS + ('tshot_kmeans',)  # T-shot k-means clusters raw inputs: images, not token ids.


def _table_2(task: str, server_rate: float, epsilon: float, client_rate: float, clients: int, batch: int,
             rounds: int, **more: setup.Value) -> dict[str, setup.Value]:
  row = setup.paper(f'{_TABLE_2}, row {task}')
  return dict(
      task=setup.Value(task, setup.paper('Section 4, Dataset')),
      scenario=setup.Value('periodic', setup.paper('Section 2 (the periodic shift between a day and a night mode)')),
      period=setup.Value(256, setup.paper('Section 4, Dataset: "we use T=256 for the majority of our results"')),
      server_optimizer=setup.Value('adam', setup.paper('Section 4, Hyperparameters: "We use FedAdam"')),
      server_learning_rate=setup.Value(server_rate, row), server_adam_epsilon=setup.Value(epsilon, row),
      client_learning_rate=setup.Value(client_rate, row), clients_per_round=setup.Value(clients, row),
      client_batch_size=setup.Value(batch, row), total_rounds=setup.Value(rounds, row),
      client_epochs=setup.Value(1, setup.paper(f'{_TABLE_2}: "trained for one epoch on each client"')), **more)


SETUPS = (
    setup.Setup('diurnal_emnist', PAPER, 'EMNIST, day and night modes, periodic shift',
                _table_2('emnist', 10**-2.5, 1e-4, 10**-1.5, 10, 20, 2049), _IMAGE_METHODS),
    setup.Setup('diurnal_cifar', PAPER, 'CIFAR-10 and CIFAR-100 modes, periodic shift',
                _table_2('cifar', 1.0, 1e-1, 10**-1.5, 10, 20, 8196), _IMAGE_METHODS),
    setup.Setup('diurnal_stackoverflow', PAPER, 'Stack Overflow, day and night modes, periodic shift',
                _table_2('stackoverflow', 0.01, 1e-5, 10**-0.5, 50, 16, 2048, max_elements_per_client=setup.Value(
                    512, setup.paper(f'{_TABLE_2}: "no more than 512 samples during training"'))), _METHODS),
)
