"""Test targets that share one process (tests/bundled_tests.py)."""

def _unique(labels):
    return sorted({label: None for label in labels}.keys())

def bundled_py_tests(name, groups, size = "large"):
    """Each test file of `groups` as a target of its own that runs only when named, and each group as one target.

    Args:
      name: Prefix of the groups' targets, `<name>_1` ... `<name>_<len(groups)>`, and the test_suite of them all.
      groups: Dicts of test file name without .py -> dict(size = ..., deps = [...], data = [...]) of its own
        target; a group's files run in one process, one after another.
      size: Size of each group's target.
    """
    for group in groups:
        for test, attributes in group.items():
            native.py_test(
                name = test,
                size = attributes["size"],
                srcs = [test + ".py"],
                data = attributes.get("data", []),
                tags = ["manual"],
                deps = attributes.get("deps", []),
            )
    for index, group in enumerate(groups):
        native.py_test(
            name = "%s_%d" % (name, index + 1),
            size = size,
            srcs = ["bundled_tests.py"] + [test + ".py" for test in group],
            args = ["--bundled_tests=" + ",".join(group.keys())],
            data = _unique([label for attributes in group.values() for label in attributes.get("data", [])]),
            main = "bundled_tests.py",
            deps = _unique(["//utils:execution_context"] +
                           [label for attributes in group.values() for label in attributes.get("deps", [])]),
        )
    native.test_suite(name = name, tests = ["%s_%d" % (name, index + 1) for index in range(len(groups))])
