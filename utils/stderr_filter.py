"""Drops known noise that TensorFlow's C++ side prints to stderr while it is imported.

TensorFlow 2.14's wheel registers its CUDA plugins (cuDNN, cuFFT, cuBLAS) twice at import, and each second
registration logs an ERROR line ("Unable to register cuDNN factory: ... already been registered", tensorflow#62075)
even on a machine without a GPU; TF_CPP_MIN_LOG_LEVEL=2, which keeps real errors, does not silence them. A binary
promises that a bad flag ends in one line on stderr, so it imports TensorFlow inside `dropping(IMPORT_NOISE)`: the
file descriptor 2 goes to a temporary file while the block runs, and every line that matches none of the patterns is
written back to stderr afterwards, in order.
"""

import contextlib
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
