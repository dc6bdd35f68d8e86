"""The EMNIST experiment of "Adaptive Personalized Federated Learning for Non-IID Data with Continual Distribution
Shift" (Chen, Liu, Zhang, Xu, Lin and Chen; pFedEM): 80 clients whose data mixes two base distributions (EMNIST's
digits and letters, day and night) in shares that drift in cycles, trained as its Section IV-A states, against the
baselines it compares with the same backbone and hyperparameters.
"""

from experiment.setups import setup

PAPER = ('"Adaptive Personalized Federated Learning for Non-IID Data with Continual Distribution Shift", Chen, Liu, '
         'Zhang, Xu, Lin and Chen')
_HYPERPARAMETERS = 'Section IV-A.4 (Hyperparameters)'

_METHODS = ('pfedem', 'vanilla_single', 'fedem', 'fedgmm', 'cfl')


def _hyperparameters(task: str, data: str, client_rate: float, rate_text: str, **more: setup.Value) -> dict:
  """Section IV-A's values shared by its experiments, on `task` (`data`: the paper's words for it)."""
  return dict(
      task=setup.Value(task, setup.paper(f'Section IV-A.1 ({data})')),
      scenario=setup.Value('mixture_drift', setup.paper('Section IV-A.2 (the shares of the bases drift)')),
      mixture_schedule=setup.Value('linear', setup.paper('Section IV-A.2 (linear shift)')),
      num_cycles=setup.Value(3.0, setup.paper(f'{_HYPERPARAMETERS}: "200 rounds ... three cycle periods"')),
      total_rounds=setup.Value(200, setup.paper(f'{_HYPERPARAMETERS}: 200 rounds')),
      num_clients=setup.Value(80, setup.paper(f'{_HYPERPARAMETERS}: |I| = 80 clients')),
      clients_per_round=setup.Value(10, setup.suite_choice(
          'the paper does not state how many of its 80 clients train in a round; the task\'s participation')),
      client_learning_rate=setup.Value(client_rate, setup.paper(f'{_HYPERPARAMETERS}: {rate_text}')),
      client_batch_size=setup.Value(128, setup.paper(f'{_HYPERPARAMETERS}: batch size 128')),
      client_epochs=setup.Value(1, setup.suite_choice(
          'J = 20 local iterations (Section IV-A.4) read as one pass over at most 20 batches of 128; a client '
          'holding fewer examples takes fewer iterations')),
      max_elements_per_client=setup.Value(2560, setup.suite_choice(
          'J = 20 local iterations of batch 128 (Section IV-A.4): at most 2,560 examples a round')),
      server_optimizer=setup.Value('sgd', setup.paper('Eq. 5 (the server averages the clients\' models)')),
      server_learning_rate=setup.Value(1.0, setup.paper('Eq. 5 (averaging: server rate 1)')), **more)


SETUPS = (
    setup.Setup('pfedem_emnist', PAPER, 'EMNIST, K = 2 base distributions in linearly drifting shares, three cycles',
                _hyperparameters('emnist', 'EMNIST\'s digits and letters: the day and night bases', 0.01,
                                 'learning rate 0.01 for EMNIST'), _METHODS),
    setup.Setup('pfedem_emnist_fashion', PAPER, 'EMNIST digits, letters and Fashion-MNIST, K = 3 bases in linearly '
                'drifting shares, three cycles (run every method with --num_branches=3)',
                _hyperparameters('emnist_fashion', 'Section IV-B.1, "we extend K to 3 by adding the Fashion-MNIST '
                                 'dataset"', 0.01, 'learning rate 0.01 for EMNIST'), _METHODS),
    setup.Setup('pfedem_cifar', PAPER, 'CIFAR-10 and CIFAR-100, K = 2 bases in linearly drifting shares, three cycles',
                _hyperparameters('cifar', 'CIFAR-10 and CIFAR-100', 0.03, 'learning rate 0.03 for CIFAR'), _METHODS),
)
