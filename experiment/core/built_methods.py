"""The methods built in this process, kept for the runs after: a run whose method would be built exactly as an
earlier run's reuses that build (its learning process, TFF's compilation of it and its evaluation functions).

Building a method traces its TFF computations, and its first round compiles them: together half or more of a short
run (`benchmarks/short_run_cost`). Runs in one process (a grid's job, `run_series.py`; a test's in-process runs)
often build the same method again: other output directories, round counts or evaluation cadence, other settings of
the scenario's schedule or shift that leave the task's domains as they are.

A method's build reads only its arguments (`algorithms.registry.build`): the task, the element spec of a client
batch, the hyperparameters with the server step, the evaluator and the method's settings. The key holds each as what
makes it:
- the task: its name, settings, data directories and domains (every transform of every domain); a build reads the
  task's network, batch function and domains, not its examples (but pFedEM's, which is seeded);
- the element spec as it is;
- the hyperparameters but the server step, and every training setting but those that shape only the data a round
  receives (`DATA_ONLY`), which include the server step's (optimizer, rates, aggregator, noise); the seed only for a
  method whose build reads it (its module's `SEEDED_BUILD`: networks or mixtures drawn at build time);
- the evaluator's structure (`Evaluator.structure`: the names of its test, held-out and mixed sets), not its data;
- the method's name and settings.
So two runs share a build only when every input the build reads is equal, but for the evaluator's data, which the
reused build is given with `Evaluator.rebind`: the test sets are another run's when the seed, the scenario's
held-out clients or the test batch size differ. `tests/build_reuse_test.py` runs every method on a build of another
seed and compares its rows with a fresh build's, so a method that reads the seed without declaring it fails there.

A process keeps the last `CAPACITY` builds (the grid runner runs a job's runs in the grid's order; a test file's
in-process runs repeat configurations close together).
"""

import collections
import dataclasses

from algorithms.core import evaluation
from algorithms.core import method

# Training settings that shape only the data each round receives (its count of rounds, the client datasets' passes
# and cap): no method's build reads them.
DATA_ONLY = frozenset({'total_rounds', 'client_epochs', 'max_elements_per_client'})
SEED = 'seed'
CAPACITY = 8

_built: 'collections.OrderedDict[tuple, tuple[method.Algorithm, evaluation.Evaluator]]' = collections.OrderedDict()
_reused = 0


def key(name: str, task_identity: tuple, training, element_spec, hparams: method.Hyperparameters,
        evaluator: evaluation.Evaluator, method_config, seeded: bool) -> tuple:
  """What a build of method `name` depends on (module docstring). `task_identity`: the task's name, settings, data
  directories and domains; `training`: the resolved training settings; `seeded`: whether the build reads the seed
  (the method's `SEEDED_BUILD`)."""
  left_out = DATA_ONLY if seeded else DATA_ONLY | {SEED}
  training_settings = tuple(sorted((field.name, repr(getattr(training, field.name)))
                                   for field in dataclasses.fields(training) if field.name not in left_out))
  shared = dataclasses.replace(hparams, server_step=None, **({} if seeded else {SEED: None}))
  return (name, repr(method_config), repr(shared), training_settings, task_identity, repr(element_spec),
          evaluator.structure())


def build(build_key: tuple, build_fn, evaluator: evaluation.Evaluator) -> tuple[method.Algorithm, bool]:
  """(the method of `build_key`, whether it was reused): the kept build, its evaluators rebound to `evaluator`'s
  data, or `build_fn()`'s, kept."""
  global _reused
  if build_key in _built:
    _reused += 1
    _built.move_to_end(build_key)
    algorithm, built_evaluator = _built[build_key]
    built_evaluator.rebind(evaluator)
    return algorithm, True
  algorithm = build_fn()
  _built[build_key] = (algorithm, evaluator)
  while len(_built) > CAPACITY:
    _built.popitem(last=False)
  return algorithm, False


def reused() -> int:
  """How many builds this process has reused."""
  return _reused


def clear() -> None:
  """Forgets every kept build."""
  _built.clear()
