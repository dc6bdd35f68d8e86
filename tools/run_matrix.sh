#!/usr/bin/env bash
# Installs what is missing, then runs a grid of experiments (experiment/matrix.py): every combination of its swept
# flags, as many runs at a time as the machine has cores; rerunning skips finished runs and resumes the others.
#
#   bash tools/run_matrix.sh GRID ROOT [matrix flags: --sweep=flag=v1,v2 --set=flag=value --jobs=N --dry_run]
#   bash tools/run_matrix.sh experiment/grids/fedevolve.toml /tmp/fedevolve --sweep=task=circle
set -euo pipefail
cd "$(dirname "$0")/.."
[[ $# -ge 2 ]] || { echo "usage: bash tools/run_matrix.sh GRID ROOT [matrix flags...]" >&2; exit 2; }
grid="$1" root="$2"
shift 2
bash tools/bootstrap.sh
PYTHONPATH=. .venv/bin/python -m experiment.matrix --grid="$grid" --root="$root" "$@"
