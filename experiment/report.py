"""Writes a report of a root of runs: tables, plots and one index.html (`experiment/reporting/report_writer.py`).

    bazel run //experiment:report -- --root=/tmp/fedevolve
    python -m experiment.report --root=/tmp/fedevolve --output=/tmp/fedevolve_report
    bazel run //experiment:report -- --root=/tmp/fedevolve --columns=target_server_accuracy,target_accuracy --percent

The main table is printed too: the results tables of docs/results/ are this output.

It reads the runs' config.json, metrics.csv and summary.json only, so it works on a copy of the run directories
and while runs are going on (tables from the finished ones, plots from everything written so far).
"""

import os
import sys

from absl import app
from absl import flags

from experiment.reporting import report_writer
# TFF, which the report's metric names import, makes a worker manager at import whose deletion at interpreter exit
# prints a traceback; this module's exit handler disarms it first.
from utils import execution_context  # pylint: disable=unused-import

_ROOT = flags.DEFINE_string('root', None, 'Directory whose sub-directories are runs (a matrix root).')
_OUTPUT = flags.DEFINE_string('output', None, 'Report directory. Default: <root>/report.')
_COLUMNS = flags.DEFINE_list('columns', None, 'Metrics of the main table, in order (default: every one that '
                             'applies), e.g. target_server_accuracy,target_accuracy.')
_PERCENT = flags.DEFINE_bool('percent', False, 'Accuracies in percent with two decimals.')
_PRINT = flags.DEFINE_bool('print', True, 'Print the main table (markdown) before saying where the report is.')


def main(argv):
  if len(argv) > 1 or not _ROOT.value:
    print('report: error: give --root=DIR (a directory of runs) and no other arguments.', file=sys.stderr)
    sys.exit(2)
  root = report_writer.working_path(_ROOT.value)
  output = report_writer.working_path(_OUTPUT.value) if _OUTPUT.value else os.path.join(root, 'report')
  report_writer.write_and_say('report', root, output, columns=_COLUMNS.value, percent=_PERCENT.value,
                              show_table=_PRINT.value)


if __name__ == '__main__':
  app.run(main)
