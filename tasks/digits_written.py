"""`digits_written`: scikit-learn's real handwritten digits as written, one base population, IID clients.

Every digit of `tasks.digits` in one base (labels 0-9, 10 classes, no night mode; `DigitsConfig(one_base=True,
label_concentration=inf)`): the real-handwriting base that scenarios transforming one base need. Tan et al.,
"Federated Learning Under Evolving Distribution Shifts" (2024), rotate MNIST's digits by 15 degrees per domain;
`evolving_domains` on this task is that on real handwriting at a far smaller scale (1,258 training digits in 62
clients of 20). Model and default hyperparameters: `tasks.digits`'s.
"""

from tasks import digits
from tasks import task as task_lib
from utils import settings as settings_lib

NAME = 'digits_written'
DEFAULTS = digits.DEFAULTS
RAW_INPUT_SPACE = True
READS_FILES = False
UNSUPPORTED = {'periodic': task_lib.ONE_BASE, 'mixture_drift': task_lib.ONE_BASE}
Settings = settings_lib.NoSettings


def create(settings: Settings, files: task_lib.DataFiles, seed: int) -> task_lib.Task:
  """The task for `--task=digits_written` (the contract: `tasks.task`)."""
  del settings, files  # No settings; scikit-learn's bundled data.
  return digits.create_task(seed, digits.DigitsConfig(one_base=True, label_concentration=float('inf')))
