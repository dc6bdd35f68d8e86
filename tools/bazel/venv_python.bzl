"""A Python toolchain whose interpreter is the project's virtual environment, .venv/bin/python3.

Bazel's default Python toolchain runs the first `python3` on PATH, which differs between `bazel run`, `bazel test`
and users' shells. This repository rule resolves the absolute path of the workspace's .venv once and registers it
as the only Python 3 runtime, so every py_binary and py_test runs with the pinned environment.
"""

_BUILD = """
load("@bazel_tools//tools/python:toolchain.bzl", "py_runtime_pair")

py_runtime(
    name = "python3_runtime",
    interpreter_path = "{interpreter}",
    python_version = "PY3",
    stub_shebang = "#!{interpreter}",
)

py_runtime_pair(
    name = "runtime_pair",
    py3_runtime = ":python3_runtime",
)

toolchain(
    name = "toolchain",
    toolchain = ":runtime_pair",
    toolchain_type = "@bazel_tools//tools/python:toolchain_type",
)
"""

def _venv_python_impl(repository_ctx):
    workspace_root = repository_ctx.path(Label("//:WORKSPACE")).dirname
    interpreter = "%s/.venv/bin/python3" % workspace_root
    repository_ctx.file("WORKSPACE", "workspace(name = \"%s\")\n" % repository_ctx.name)
    repository_ctx.file("BUILD", _BUILD.format(interpreter = interpreter))

venv_python = repository_rule(
    implementation = _venv_python_impl,
    local = True,
)
