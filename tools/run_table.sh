#!/usr/bin/env bash
# Runs one of the results pages' comparison grids (experiment/grids/<NAME>.toml, through tools/run_matrix.sh: as many runs
# at a time as the machine has cores; finished runs are skipped, so rerunning resumes). The matrix ends with the
# report of the root (<root>/report/index.html) and prints its main table, the grid's [report] columns:
#   pfedem              pFedEM, FedAvg, FedEM, CFL, FedGMM under mixture_drift
#   pfedem_pretrained   pFedEM with a frozen pretrained encoder, both GMM initializations, seeds 0-5
#   pfedem_separation   the pfedem grid's methods with the synthetic bases twice as far apart
#   pfedem_frozen_encoder  pFedEM with a frozen pretrained encoder as Algorithm 1 prints it and with each departure
#   pfedem_gaussian     pFedEM (both predictions), FedAvg, FedEM where the bases are Gaussian components, K = 3
#   fedevolve           FedAvg, FedAvg+FT, FedRep, FedEvp, FedEvolve under evolving domains
#   fedevolve_rotation  FedAvg, FedEvp, FedEvolve against the rotation step and an unexpected target rotation
#   fedevolve_towers    FedEvolve's distance (squared / Euclidean) and tower initialization (tied / independent)
#   fedevp_circle       FedEvp on Circle at the task's client rate and at half of it
#   fedevolve_emnist    FedAvg, FedEvp, FedEvolve at their defaults and the other server step, EMNIST-layout digits
#                       (needs --set=cache_dir=DIR)
#   fedevolve_emnist_packed  FedEvp on mixed batches there: server step, alignment, distance (--set=cache_dir=DIR)
#   diurnal_synthetic   every method of the Diurnal-or-Nocturnal paper, linear shift, p in {0.25, 1, 4}
#   diurnal_digits      the Diurnal-or-Nocturnal paper's methods on real handwriting (scikit-learn digits, night
#                       mirrored), p = 1
#   fedtkm_orientation  FedTKM as Eq. 11-13 and with prior-anchored labels on synthetic (p 0.25 / 1 / 4), mirrored
#                       digits and EMNIST-layout digits with a turned night (needs --set=cache_dir=DIR)
#   shiftex             ShiftEx, FedDrift, FedAvg, FedProx under windowed shift
#   shiftex_severity    ShiftEx and FedDrift at each corruption severity 1-5 (detection power, regime ARI)
#   fedgmm              FedGMM and its baselines under dirichlet_mixture
#   fedgmm_toy          FedGMM and its baselines on the FedGMM paper's one-dimensional toy (its Figure 1)
#   server_step         each method whose paper averages, with averaging and with FedAdam, on real digits
#   privacy             Vanilla, FedTEM, FedTKM with TFF's DP-FedAvg aggregator at noise 0 / 0.5 / 1.0, and epsilon
# Matrix flags narrow or change the grid: --sweep=seed=0, --set=total_rounds=20, --jobs=1.
#
#   bash tools/run_table.sh NAME [OUTPUT_ROOT] [matrix flags...]      (default root: /tmp/<NAME>)
set -euo pipefail
cd "$(dirname "$0")/.."
names=(pfedem pfedem_pretrained pfedem_separation pfedem_frozen_encoder pfedem_gaussian fedevolve fedevolve_rotation fedevolve_towers fedevp_circle fedevolve_emnist fedevolve_emnist_packed diurnal_synthetic diurnal_digits fedtkm_orientation shiftex shiftex_severity fedgmm fedgmm_toy server_step privacy)
name="${1:-}"
if [[ ! " ${names[*]} " =~ " $name " ]]; then
  echo "usage: bash tools/run_table.sh {${names[*]}} [OUTPUT_ROOT] [matrix flags...]" >&2
  exit 2
fi
root="${2:-/tmp/$name}"
shift $(( $# < 2 ? $# : 2 ))
exec bash tools/run_matrix.sh "experiment/grids/$name.toml" "$root" "$@"
