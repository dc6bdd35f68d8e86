"""Test targets beside the modules they test, and bundles of short tests that share one process
(tests/bundled_tests.py)."""

def unit_test(name, size = "small", deps = [], data = []):
    """`<name>.py`, a test beside the module it tests: a target of its own, which runs when named (`bazel test
    //algorithms/core:kmeans_test`), and a library that a bundle of short tests (`bundled_py_tests`) runs.

    Args:
      name: The test file without .py.
      size: Size of its own target.
      deps: What it imports.
      data: Files it reads.
    """
    native.py_test(
        name = name,
        size = size,
        srcs = [name + ".py"],
        data = data,
        tags = ["manual"],
        deps = deps,
    )
    native.py_library(
        name = name + "_lib",
        testonly = True,
        srcs = [name + ".py"],
        data = data,
        deps = deps,
        visibility = ["//tests:__pkg__"],
    )

def _module(label):
    """The Python module of a `unit_test` label: //algorithms/core:kmeans_test -> algorithms.core.kmeans_test."""
    package, _, target = label[2:].partition(":")
    return package.replace("/", ".") + "." + target

def bundled_py_tests(name, groups, size = "large", tags = []):
    """Each group of `unit_test` targets as one target that runs their files in one process, one after another.

    Args:
      name: Prefix of the groups' targets, `<name>_1` ... `<name>_<len(groups)>`, and the test_suite of them all.
      groups: Lists of `unit_test` labels, "//<package>:<name>".
      size: Size of each group's target.
      tags: Tags of each group's target (`slow`: left out of the fast tier).
    """
    for index, group in enumerate(groups):
        native.py_test(
            name = "%s_%d" % (name, index + 1),
            size = size,
            srcs = ["bundled_tests.py"],
            args = ["--bundled_tests=" + ",".join([_module(label) for label in group])],
            main = "bundled_tests.py",
            tags = tags,
            deps = ["//utils:execution_context"] + [label + "_lib" for label in group],
        )
    native.test_suite(name = name, tests = ["%s_%d" % (name, index + 1) for index in range(len(groups))])
