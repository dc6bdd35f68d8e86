"""`gaussian_toy_1d`: the FedGMM paper's Figure 1 data (Wu et al., "Personalized Federated Learning under Mixture of
Distributions", ICML 2023), two 1-d components, `tasks.gaussian_mixture.TOY_1D` (that module's docstring says how
we read the figure). Default hyperparameters: `gaussian_mixture`'s with 10 clients a round, batches of 32 and 100
rounds (ours; the figure has no federation).
"""

from tasks import gaussian_mixture
from tasks import task as task_lib
from utils import settings as settings_lib

NAME = 'gaussian_toy_1d'
DEFAULTS = dict(gaussian_mixture.DEFAULTS, clients_per_round=10, client_batch_size=32, total_rounds=100)
RAW_INPUT_SPACE = True
READS_FILES = False
UNSUPPORTED = {'periodic': task_lib.NOT_DAY_NIGHT}
Settings = settings_lib.NoSettings


def create(settings: Settings, files: task_lib.DataFiles, seed: int) -> task_lib.Task:
  """The task for `--task=gaussian_toy_1d` (the contract: `tasks.task`)."""
  del settings, files  # No settings; generated in-process.
  return gaussian_mixture.create_task(seed, gaussian_mixture.TOY_1D, NAME)
