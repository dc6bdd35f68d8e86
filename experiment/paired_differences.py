"""Prints the paired differences between a method and each baseline over seeds, per setting of a root's runs
(`experiment.reporting.paired_differences`: mean, standard error, 95% t interval and verdict per figure).

  bazel run //experiment:paired_differences -- --root=/tmp/shiftex --method=shiftex \
      --figures=window_drop,window_recovery_rounds,window_max_accuracy,test_mixture_accuracy
"""

import sys

from absl import app
from absl import flags

from experiment.reporting import paired_differences
from experiment.reporting import report_writer
from experiment.reporting import run_results

_ROOT = flags.DEFINE_string('root', None, 'A directory of runs (a grid\'s root).')
_METHOD = flags.DEFINE_string('method', None, 'The method compared (as the report names it).')
_BASELINES = flags.DEFINE_list('baselines', None, 'The baselines (default: every other method of a setting).')
_FIGURES = flags.DEFINE_list('figures', ['test_mixture_accuracy'], 'Table figures (the report\'s column names).')


def main(argv):
  if len(argv) > 1 or not _ROOT.value or not _METHOD.value:
    print('paired_differences: error: give --root=DIR and --method=NAME, and no other arguments.', file=sys.stderr)
    sys.exit(2)
  rows = paired_differences.paired_rows(run_results.load(report_writer.working_path(_ROOT.value)), _METHOD.value,
                                        _FIGURES.value, _BASELINES.value)
  print(paired_differences.markdown(rows, _METHOD.value))


if __name__ == '__main__':
  app.run(main)
