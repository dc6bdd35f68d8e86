"""Drops known noise that TensorFlow's C++ side prints to stderr while it is imported.

TensorFlow 2.14's wheel registers its CUDA plugins (cuDNN, cuFFT, cuBLAS) twice at import, and each second
registration logs an ERROR line ("Unable to register cuDNN factory: ... already been registered", tensorflow#62075)
even on a machine without a GPU; TF_CPP_MIN_LOG_LEVEL=2, which keeps real errors, does not silence them. A binary
promises that a bad flag ends in one line on stderr, so it imports TensorFlow inside `dropping(IMPORT_NOISE)`: the
file descriptor 2 goes to a temporary file while the block runs, and every line that matches none of the patterns is
written back to stderr afterwards, in order.

TFF 0.87's secure aggregators check their bounds with `tf.debugging.assert_less_equal` in graph mode and never use
the op it returns (`tensorflow_federated/python/aggregators/primitives.py`, `discretization.py`), so TensorFlow's
`tf_should_use` logs a 12-line ERROR for each such op when its graph is freed: 264 lines for Vanilla over 4 rounds
under `--aggregator=secure`, for a run that succeeded. `drop_unused_assert_reports` installs a filter on TensorFlow's
logger that drops exactly these records (from `tf_should_use`, about an unused `assert_less_equal` op); every other
record, of `tf_should_use` too, still goes out.
"""

import contextlib
import logging
import os
import sys
import tempfile
from typing import Sequence

IMPORT_NOISE = ('Unable to register cuDNN factory', 'Unable to register cuFFT factory',
                'Unable to register cuBLAS factory')


@contextlib.contextmanager
def dropping(patterns: Sequence[str]):
  """Runs the block with stderr (the file descriptor, so C++ output too) captured, then writes back every captured
  line that contains none of `patterns`."""
  sys.stderr.flush()
  saved = os.dup(2)
  with tempfile.TemporaryFile() as captured:
    os.dup2(captured.fileno(), 2)
    try:
      yield
    finally:
      sys.stderr.flush()
      os.dup2(saved, 2)
      os.close(saved)
      captured.seek(0)
      kept = [line for line in captured.read().decode(errors='replace').splitlines(keepends=True)
              if not any(pattern in line for pattern in patterns)]
      sys.stderr.write(''.join(kept))
      sys.stderr.flush()


class _UnusedAssertReports(logging.Filter):
  """Drops `tf_should_use`'s report of an unused `assert_less_equal` op (the module docstring)."""

  def filter(self, record: logging.LogRecord) -> bool:
    if not record.pathname.endswith('tf_should_use.py'):
      return True
    message = record.getMessage()
    return not ('Object was never used' in message and "tf.Operation 'assert_less_equal" in message)


_UNUSED_ASSERTS = _UnusedAssertReports()


def drop_unused_assert_reports() -> None:
  """Installs the filter on TensorFlow's logger (once; later calls change nothing)."""
  logger = logging.getLogger('tensorflow')
  if _UNUSED_ASSERTS not in logger.filters:
    logger.addFilter(_UNUSED_ASSERTS)
