#!/usr/bin/env bash
# Runs one of the results pages' comparison grids (experiment/grids/<NAME>.toml, through tools/run_matrix.sh: as many runs
# at a time as the machine has cores; finished runs are skipped, so rerunning resumes). The matrix ends with the
# report of the root (<root>/report/index.html) and prints its main table, the grid's [report] columns:
#   seed_000            pFedEM, FedAvg, FedEM, CFL, FedGMM under mixture_drift
#   seed_000_pretrained pFedEM with a frozen pretrained encoder, both GMM initializations, seeds 0-5
#   seed_000_separation seed_000's methods with the synthetic bases twice as far apart
#   seed_001            FedAvg, FedAvg+FT, FedRep, FedEvp, FedEvolve, evolving domains
#   seed_001_rotation   FedAvg, FedEvp, FedEvolve against the rotation step and an unexpected target rotation
#   seed_002_synthetic  every the Diurnal-or-Nocturnal paper method, linear shift, p in {0.25, 1, 4}
#   seed_002_digits     the Diurnal-or-Nocturnal paper methods on real handwriting (scikit-learn digits, night
# mirrored), p = 1   seed_003            ShiftEx, FedDrift, FedAvg, FedProx under windowed shift
#   seed_003_severity   ShiftEx and FedDrift at each corruption severity 1-5 (detection power, regime ARI)
#   seed_004            FedGMM and its baselines under dirichlet_mixture
#   privacy             Vanilla, FedTEM, FedTKM with TFF's DP-FedAvg aggregator at noise 0 / 0.5 / 1.0, and epsilon
# Matrix flags narrow or change the grid: --sweep=seed=0, --set=total_rounds=20, --jobs=1.
#
#   bash tools/run_table.sh NAME [OUTPUT_ROOT] [matrix flags...]      (default root: /tmp/<NAME>)
set -euo pipefail
cd "$(dirname "$0")/.."
names=(seed_000 seed_000_pretrained seed_000_separation seed_001 seed_001_rotation seed_002_synthetic seed_002_digits seed_003 seed_003_severity seed_004 privacy)
name="${1:-}"
if [[ ! " ${names[*]} " =~ " $name " ]]; then
  echo "usage: bash tools/run_table.sh {${names[*]}} [OUTPUT_ROOT] [matrix flags...]" >&2
  exit 2
fi
root="${2:-/tmp/$name}"
shift $(( $# < 2 ? $# : 2 ))
exec bash tools/run_matrix.sh "experiment/grids/$name.toml" "$root" "$@"
