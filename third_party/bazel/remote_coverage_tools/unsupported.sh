#!/bin/sh
echo "bazel coverage is not supported offline by this suite" >&2
exit 1
