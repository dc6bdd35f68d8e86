#!/usr/bin/env bash
# Installs what is missing, then runs the default experiment (vanilla on the synthetic task under linear shift).
# Extra arguments are passed to run_experiment.py; outputs go to ./output/<experiment_name>/.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash tools/bootstrap.sh
exec bazel run //:run_experiment -- --root_output_dir="$PWD/output" "$@"
