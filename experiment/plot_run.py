"""The report's plots and table for one run, also while it is running (`experiment/report_writer.py`).

    bazel run //experiment:plot_run -- --run=/tmp/periodic_shift/synthetic_vanilla_linear_p1_T32_s0
"""

import os
import sys

from absl import app
from absl import flags

from experiment import report_writer

_RUN = flags.DEFINE_string('run', None, 'A run directory (with config.json and metrics.csv).')
_OUTPUT = flags.DEFINE_string('output', None, 'Where the plots go. Default: <run>/plots.')


def main(argv):
  if len(argv) > 1 or not _RUN.value:
    print('plot_run: error: give --run=DIR (a run directory) and no other arguments.', file=sys.stderr)
    sys.exit(2)
  base = os.environ.get('BUILD_WORKING_DIRECTORY', os.getcwd())
  run = os.path.normpath(os.path.join(base, _RUN.value))
  output = os.path.join(base, _OUTPUT.value) if _OUTPUT.value else os.path.join(run, 'plots')
  try:
    files = report_writer.write(os.path.dirname(run), output, only=os.path.basename(run))
  except report_writer.ReportError as error:
    print(f'plot_run: error: {error}', file=sys.stderr)
    sys.exit(2)
  print(f'plot_run: {len(files)} files in {output}; open {os.path.join(output, "index.html")}')


if __name__ == '__main__':
  app.run(main)
