"""Several test files in one process: the suite's short tests share one start-up of Python, TensorFlow and TFF.

Starting a test process costs seconds (importing TensorFlow and TFF), more than most unit tests take. `tests/BUILD`
lists the short test files in groups (`FAST_TEST_GROUPS`, `SHORT_TEST_GROUPS`), most of them beside the module they test: each is a
`unit_test` (tests/defs.bzl), a target of its own that runs alone (`bazel test //algorithms/core:kmeans_test`) but not
in `bazel test //...`, and each group is one target that runs its files here, one after another:
`--bundled_tests=algorithms.core.kmeans_test,...` names the modules. A group is a target rather than a shard, so that a
class's `setUpClass` runs once, not once per shard.

TFF's execution context is installed once for all of them, as the files that execute computations do in their own
`__main__`. A file belongs in the bundle only if it holds no process-wide state of its own: tests of the process
itself (its exit, signals and worker processes) keep their own targets.
"""

import importlib
import unittest

from absl import flags
from absl.testing import absltest

from utils import execution_context

_BUNDLED_TESTS = flags.DEFINE_list('bundled_tests', None, 'Test modules to run, by module name '
                                   '(algorithms.core.kmeans_test).')


class _BundleLoader(unittest.TestLoader):
  """Loads the test cases of every bundled module in place of `__main__`'s (which holds none)."""

  def loadTestsFromModule(self, module, *args, **kwargs):  # pylint: disable=invalid-name
    del module  # This file's own module: no test cases.
    return self.suiteClass([super(_BundleLoader, self).loadTestsFromModule(importlib.import_module(name),
                                                                           *args, **kwargs)
                            for name in _BUNDLED_TESTS.value])


if __name__ == '__main__':
  flags.mark_flag_as_required('bundled_tests')
  execution_context.install()
  absltest.main(testLoader=_BundleLoader())
