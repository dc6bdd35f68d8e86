"""Runs one federated simulation under distribution shift: the flags of one `experiment.core.assembly.ExperimentConfig`.

    bazel run //:run_experiment -- --task=synthetic --algorithm=vanilla --shift_fn=linear --shift_p=4

Every flag is generated from a setting a module declares (`utils.settings.setting`): the run's own settings
(`experiment.core.assembly`: task, scenario and method choice, training, evaluation, outputs, workers), each task's
(`tasks.task`, `--<task>_<setting>`), each scenario's (`periodic_shift.scenario`, flags named as the settings; a
setting several scenarios share is one flag) and each method's (`algorithms.core.method`, `--<method>_<setting>`).
docs/flags.md lists them all. The run, its outputs and resuming are `experiment.core.assembly.run`'s; a bad value or
an unusable run directory ends the run with one line on stderr and exit status 2 before any data is loaded or model
built, a round with non-finite values with status 3, a lost worker with 4. Tests parse flags into their own
`flags.FlagValues` (`define_flags`, `experiment_config`, `run`); `run_arguments` runs one in the caller's
process (`run_series.py`, the grid runner's jobs).
"""

import dataclasses
import os
import sys
from typing import Optional, Sequence

# TensorFlow's C++ INFO and WARNING logs (here and in TFF's worker process, which inherits the environment) drown
# the progress lines; set TF_CPP_MIN_LOG_LEVEL=0 to see them.
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

from utils import stderr_filter

with stderr_filter.dropping(stderr_filter.IMPORT_NOISE):
  import tensorflow  # pylint: disable=unused-import,g-bad-import-order
stderr_filter.drop_unused_assert_reports()

from absl import app
from absl import flags

from algorithms import registry as algorithms
from algorithms.core import method
from experiment.core import assembly
from experiment.setups import registry as setups
from periodic_shift import scenarios
from tasks import registry as tasks
from utils import execution_context
from utils import settings as settings_lib

_DEFINE = {bool: flags.DEFINE_bool, int: flags.DEFINE_integer, float: flags.DEFINE_float, str: flags.DEFINE_string,
           list: flags.DEFINE_list}


def _flags_by_part() -> dict[str, list[settings_lib.Flag]]:
  """Every flag of the binary: each group of `assembly.ExperimentConfig`'s by the group's name, then 'task',
  'scenario' and 'method' settings (the registries' `flags()`)."""
  parts = {group: [settings_lib.flag_of(settings_class, field) for field in settings_lib.declared(settings_class)]
           for group, settings_class in assembly.GROUPS.items()}
  return {**{f'{group}_group': part for group, part in parts.items()}, 'task': tasks.flags(),
          'scenario': scenarios.flags(), 'method': algorithms.flags()}


def define_flags(flag_values: flags.FlagValues) -> None:
  """Defines every flag of the binary in `flag_values` (the binary's: absl's global FLAGS)."""
  for flag in (flag for part in _PARTS.values() for flag in part):
    default = list(flag.default) if flag.kind is list and flag.default is not None else flag.default
    _DEFINE[flag.kind](flag.name, default, flag.help, flag_values=flag_values)


_PARTS = _flags_by_part()
define_flags(flags.FLAGS)


def _values(flag_values: flags.FlagValues, part: str, only_set: bool = False, given: Optional[dict] = None) -> dict:
  """Flag name -> value (a list as a tuple) of the flags of `part`, a flag in `given` (the setup's values of flags
  the command line leaves unset) taking its value from there; with `only_set`, of those set on the command line or
  in `given`."""
  given = given or {}
  values = {}
  for flag in _PARTS[part]:
    if flag.name in given:
      values[flag.name] = given[flag.name]
    elif not only_set or flag_values[flag.name].present:
      value = flag_values[flag.name].value
      values[flag.name] = tuple(value) if isinstance(value, list) else value
  return values


def experiment_config(flag_values: flags.FlagValues = flags.FLAGS) -> assembly.ExperimentConfig:
  """The configuration parsed `flag_values` describe (an unknown task, scenario or method is left for
  `assembly.resolve` to refuse); raises ValueError (one line) for a set flag of a task other than `--task` or of a
  method other than `--algorithm`. With `--setup`, the flags the command line leaves unset take the setup's values."""
  setup_name = flag_values['setup'].value or None  # Empty: no setup, so a grid can sweep setups and none.
  declared = setups.get(setup_name) if setup_name is not None else None
  given = setups.unset_values(setup_name, lambda flag: flag_values[flag].present) if declared else {}
  groups = {name: group(**_values(flag_values, f'{name}_group', given=given))
            for name, group in assembly.GROUPS.items()}
  groups['setup'] = dataclasses.replace(groups['setup'], setup=setup_name, declared=declared)
  task, choice, algorithm = groups['task'].task, groups['scenario'], groups['method'].algorithm
  if task in tasks.TASKS:
    settings = tasks.settings_from(task, _values(flag_values, 'task', only_set=True, given=given))
    groups['task'] = dataclasses.replace(groups['task'], settings=settings)
  if choice.scenario in scenarios.SCENARIOS:
    settings = scenarios.settings_from(choice.scenario, _values(flag_values, 'scenario', given=given))
    groups['scenario'] = dataclasses.replace(choice, settings=settings)
  if algorithm in algorithms.METHODS:
    algorithms.check_set_flags(algorithm, _values(flag_values, 'method', only_set=True))
    module, values = algorithms.METHODS[algorithm].module, _values(flag_values, 'method')
    config = module.Config(**{field.name: values[flag]
                              for flag, field in method.settings(module.NAME, module.Config).items()})
    groups['method'] = dataclasses.replace(groups['method'], config=config)
  return assembly.ExperimentConfig(**groups)


def run(flag_values: flags.FlagValues) -> None:
  """The run parsed `flag_values` describe; on a bad value or a run that cannot go on, one line on stderr and exit
  with the error's status (SystemExit)."""
  try:
    config = experiment_config(flag_values)
  except ValueError as error:
    _fail(str(error))
  try:
    assembly.run(config)
    return
  except assembly.ExperimentError as error:
    message, status = str(error), error.status
  _fail(message, status)  # Outside the handler: the error's traceback (and the TFF objects it holds) is freed.


def run_arguments(args: Sequence[str]) -> int:
  """The run `args` (the binary's flags) describe, in this process, with flags of its own (absl's FLAGS untouched):
  its exit status as the binary's (0; 2 for a bad flag or value; 3, 4; 128 + signal when SIGTERM or SIGHUP stopped
  it). Its one-line error goes to stderr, as the binary's."""
  flag_values = flags.FlagValues()
  define_flags(flag_values)
  try:
    try:
      flag_values(['run_experiment', *args])
    except flags.Error as error:
      _fail(_first_line(error))
    run(flag_values)
    return 0
  except SystemExit as exit_:
    return exit_.code if isinstance(exit_.code, int) else 1


@execution_context.exits_with_signal_status
def main(argv):
  if len(argv) > 1:
    _fail(f'unexpected arguments: {" ".join(argv[1:])}')
  run(flags.FLAGS)


def _fail(message: str, status: int = 2) -> None:
  print(f'run_experiment: error: {message}', file=sys.stderr)
  sys.exit(status)


def parse_flags(argv: list[str]) -> list[str]:
  """absl's parsing of `argv` into FLAGS, with an unknown, mistyped or malformed flag ending the binary in one line,
  exit status 2, as every other bad value does (absl's own parser exits 1 with a usage banner)."""
  try:
    return flags.FLAGS(argv)
  except flags.Error as error:
    _fail(_first_line(error))


def _first_line(error: flags.Error) -> str:
  return str(error).splitlines()[0] if str(error) else type(error).__name__


if __name__ == '__main__':
  app.run(main, flags_parser=parse_flags)
