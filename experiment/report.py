"""Writes a report of a root of runs: tables, plots and one index.html (`experiment/report_writer.py`).

    bazel run //experiment:report -- --root=/tmp/seed_001
    python -m experiment.report --root=/tmp/seed_001 --output=/tmp/seed_001_report

It reads the runs' config.json, metrics.csv and summary.json only, so it works on a copy of the run directories
and while runs are going on (tables from the finished ones, plots from everything written so far).
"""

import os
import sys

from absl import app
from absl import flags

from experiment import report_writer

_ROOT = flags.DEFINE_string('root', None, 'Directory whose sub-directories are runs (a matrix root).')
_OUTPUT = flags.DEFINE_string('output', None, 'Report directory. Default: <root>/report.')


def main(argv):
  if len(argv) > 1 or not _ROOT.value:
    print('report: error: give --root=DIR (a directory of runs) and no other arguments.', file=sys.stderr)
    sys.exit(2)
  root = report_writer.working_path(_ROOT.value)
  output = report_writer.working_path(_OUTPUT.value) if _OUTPUT.value else os.path.join(root, 'report')
  report_writer.write_and_say('report', root, output)


if __name__ == '__main__':
  app.run(main)
