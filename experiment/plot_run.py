"""The report's plots and table for one run, also while it is running (`experiment/reporting/report_writer.py`).

    bazel run //experiment:plot_run -- --run=/tmp/periodic_shift/synthetic_vanilla_linear_p1_T32_s0
"""

import os
import sys

from absl import app
from absl import flags

from experiment.reporting import report_writer

_RUN = flags.DEFINE_string('run', None, 'A run directory (with config.json and metrics.csv).')
_OUTPUT = flags.DEFINE_string('output', None, 'Where the plots go. Default: <run>/plots.')


def main(argv):
  if len(argv) > 1 or not _RUN.value:
    print('plot_run: error: give --run=DIR (a run directory) and no other arguments.', file=sys.stderr)
    sys.exit(2)
  run = report_writer.working_path(_RUN.value)
  output = report_writer.working_path(_OUTPUT.value) if _OUTPUT.value else os.path.join(run, 'plots')
  report_writer.write_and_say('plot_run', os.path.dirname(run), output, only=os.path.basename(run))


if __name__ == '__main__':
  app.run(main)
