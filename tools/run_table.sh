#!/usr/bin/env bash
# Runs one of the README's comparison grids (experiment/grids/<NAME>.toml, through tools/run_matrix.sh: as many runs
# at a time as the machine has cores; finished runs are skipped, so rerunning resumes), then prints its table:
#   seed_000            pFedEM, FedAvg, FedEM, CFL under mixture_drift             tools/pfedem_table.py
#   seed_001            FedAvg, FedAvg+FT, FedRep, FedEvp, FedEvolve, evolving     tools/evolving_table.py
#   seed_002_synthetic  every seed 002 method, linear shift, p in {0.25, 1, 4}     experiment/summarize.py
#   seed_004            FedGMM and its baselines under dirichlet_mixture           tools/fedgmm_table.py
# Matrix flags narrow or change the grid: --sweep=seed=0, --set=total_rounds=20, --set=rotation_step=5 (seed 001's
# Figure 3a), --set=target_extra_rotation=30 (its Table 7), --jobs=1.
#
#   bash tools/run_table.sh NAME [OUTPUT_ROOT] [matrix flags...]      (default root: /tmp/<NAME>)
set -uo pipefail
cd "$(dirname "$0")/.."
declare -A tables=([seed_000]=tools/pfedem_table.py [seed_001]=tools/evolving_table.py
                   [seed_002_synthetic]=experiment/summarize.py [seed_004]=tools/fedgmm_table.py)
name="${1:-}"
if [[ -z "$name" || -z "${tables[$name]:-}" ]]; then
  echo "usage: bash tools/run_table.sh {${!tables[*]}} [OUTPUT_ROOT] [matrix flags...]" >&2
  exit 2
fi
root="${2:-/tmp/$name}"
shift $(( $# < 2 ? $# : 2 ))
bash tools/run_matrix.sh "experiment/grids/$name.toml" "$root" "$@"
status=$?
PYTHONPATH=. .venv/bin/python "${tables[$name]}" --root="$root"
exit "$status"
