"""Runs one federated simulation under distribution shift: the flags of one `experiment.core.assembly.ExperimentConfig`.

    bazel run //:run_experiment -- --task=synthetic --algorithm=vanilla --shift_fn=linear --shift_p=4

Every flag is generated from a setting a module declares (`utils.settings.setting`): the run's own settings
(`experiment.core.assembly`: task, scenario and method choice, training, evaluation, outputs, workers), each scenario's
(`periodic_shift.scenario`, flags named as the settings; a setting several scenarios share is one flag) and each
method's (`algorithms.core.method`, `--<method>_<setting>`). docs/flags.md lists them all. The run, its outputs and
resuming are `experiment.core.assembly.run`'s; a bad value or an unusable run directory ends the run with one line on
stderr and exit status 2 before any data is loaded or model built, a round with non-finite values with status 3, a
lost worker with 4.
"""

import collections
import dataclasses
import os
import sys

# TensorFlow's C++ INFO and WARNING logs (here and in TFF's worker process, which inherits the environment) drown
# the progress lines; set TF_CPP_MIN_LOG_LEVEL=0 to see them.
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

from absl import app
from absl import flags

from algorithms import registry as algorithms
from algorithms.core import method
from experiment.core import assembly
from periodic_shift import scenarios
from utils import execution_context
from utils import settings as settings_lib

_DEFINE = {bool: flags.DEFINE_bool, int: flags.DEFINE_integer, float: flags.DEFINE_float, str: flags.DEFINE_string,
           list: flags.DEFINE_list}


def _define(settings_class) -> dict:
  """A flag per setting of `settings_class` (`utils.settings`), named as the setting: flag name -> holder."""
  defined = {}
  for field in settings_lib.declared(settings_class):
    kind = settings_lib.flag_type(settings_class, field)
    default = list(field.default) if kind is list else field.default
    defined[field.name] = _DEFINE[kind](field.name, default, field.metadata['help'])
  return defined


def _define_scenario_flags() -> dict:
  """A flag per scenario setting, named as the setting: flag name -> holder. A setting several scenarios declare
  (`--num_clients`) is one flag whose default, None, leaves each scenario its own."""
  owners = collections.defaultdict(list)
  for name, settings_class, field in scenarios.declared_settings():
    owners[field.name].append((name, settings_class, field))
  defined = {}
  for flag, declared in owners.items():
    name, settings_class, field = declared[0]
    kind = settings_lib.flag_type(settings_class, field)
    assert all(settings_lib.flag_type(c, f) is kind for _, c, f in declared), f'--{flag} has two types.'
    if len(declared) == 1:
      default, help_text = field.default, f'{name}: {field.metadata["help"]}'
    else:
      default = None
      help_text = '; '.join(f'{name}: {field.metadata["help"]} Default {field.default}.' for name, _, field in declared)
    defined[flag] = _DEFINE[kind](flag, list(default) if kind is list else default, help_text)
  return defined


def _define_method_flags() -> dict:
  """A flag per setting of every method module's Config: flag name -> holder; a flag two methods declare (FedTEM's
  and FedTKM's `--prior`) is defined once."""
  defined, defaults = {}, {}
  for module in algorithms.MODULES:
    for flag, field in method.settings(module.NAME, module.Config).items():
      if flag in defined:
        assert defaults[flag] == field.default, f'--{flag} has two defaults.'
        continue
      kind = settings_lib.flag_type(module.Config, field)
      defined[flag], defaults[flag] = _DEFINE[kind](flag, field.default, field.metadata['help']), field.default
  return defined


_GROUP_FLAGS = {name: _define(group) for name, group in assembly.GROUPS.items()}
_SCENARIO_FLAGS = _define_scenario_flags()
_METHOD_FLAGS = _define_method_flags()


def _value(holder):
  return tuple(holder.value) if isinstance(holder.value, list) else holder.value


def experiment_config() -> assembly.ExperimentConfig:
  """The configuration the flags describe (an unknown scenario or method is left for `assembly.resolve` to refuse)."""
  groups = {name: group(**{field: _value(holder) for field, holder in _GROUP_FLAGS[name].items()})
            for name, group in assembly.GROUPS.items()}
  choice, algorithm = groups['scenario'], groups['method'].algorithm
  if choice.scenario in scenarios.SCENARIOS:
    values = {flag: _value(holder) for flag, holder in _SCENARIO_FLAGS.items()}
    groups['scenario'] = dataclasses.replace(choice, settings=scenarios.settings_from(choice.scenario, values))
  if algorithm in algorithms.METHODS:
    module = algorithms.METHODS[algorithm].module
    config = module.Config(**{field.name: _METHOD_FLAGS[flag].value
                              for flag, field in method.settings(module.NAME, module.Config).items()})
    groups['method'] = dataclasses.replace(groups['method'], config=config)
  groups['training'] = dataclasses.replace(groups['training'], window_rounds=_SCENARIO_FLAGS['window_rounds'].value)
  return assembly.ExperimentConfig(**groups)


@execution_context.exits_with_signal_status
def main(argv):
  if len(argv) > 1:
    _fail(f'unexpected arguments: {" ".join(argv[1:])}')
  try:
    assembly.run(experiment_config())
    return
  except assembly.ExperimentError as error:
    message, status = str(error), error.status
  _fail(message, status)  # Outside the handler: the error's traceback (and the TFF objects it holds) is freed.


def _fail(message: str, status: int = 2) -> None:
  print(f'run_experiment: error: {message}', file=sys.stderr)
  sys.exit(status)


if __name__ == '__main__':
  app.run(main)
