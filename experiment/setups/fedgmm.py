"""The synthetic experiment of "Personalized Federated Learning under Mixture of Distributions" (Wu et al., 2023;
FedGMM): 300 clients whose data mix three Gaussian components with their own labelling functions, Dir(0.4) mixture
weights per client, a fifth of the clients held out as unseen, trained as its Section 4.3 states, against the
baselines of its Table 2 that run here.

The paper tunes the client rate of each method by grid search (Section 4.3, after Marfoq et al., 2021) without
stating the values: the rate is left to the task, the same for every method, until a tuning record with an equal
budget per method chooses them.
"""

from experiment.setups import setup

PAPER = '"Personalized Federated Learning under Mixture of Distributions", Wu et al., 2023'
_SECTION_4_3 = 'Section 4.3 (Implementation Details)'

SETUPS = (
    setup.Setup(
        'fedgmm_synthetic', PAPER, 'the synthetic Gaussian mixture (d = 32, M = 3), Dir(0.4) clients, unseen clients',
        dict(
            task=setup.Value('gaussian_mixture', setup.paper('Section 4.1, Synthetic dataset; Table 1')),
            scenario=setup.Value('dirichlet_mixture', setup.paper('Section 4.1 (each client\'s mixture weights from '
                                                                  'a Dirichlet)')),
            component_alpha=setup.Value(0.4, setup.paper('Section 4.1, "Dir(alpha) with alpha = 0.4"')),
            unseen_fraction=setup.Value(0.2, setup.paper('Section 4.6 (clients held out of training)')),
            clients_per_round=setup.Value(30, setup.suite_choice(
                'the paper states no participation; 30 of the 240 training clients a round')),
            total_rounds=setup.Value(200, setup.paper(f'{_SECTION_4_3}: "the total communication round is set to '
                                                      '200"')),
            client_epochs=setup.Value(1, setup.paper(f'{_SECTION_4_3}: "the number of local epochs ... is set to 1"')),
            client_batch_size=setup.Value(128, setup.paper(f'{_SECTION_4_3}: "the batch size is set to 128"')),
            server_optimizer=setup.Value('sgd', setup.paper(f'{_SECTION_4_3} (the protocol of Marfoq et al., 2021, '
                                                            'which averages parameters)')),
            server_learning_rate=setup.Value(1.0, setup.paper('Algorithm 1 lines 12-17 (weighted averages)'))),
        ('fedgmm', 'vanilla_single', 'fedprox', 'fedavg_plus', 'fedem', 'cfl', 'local')),
)
