#!/usr/bin/env bash
# Seed 004's synthetic comparison (Table 2 row "Synthetic", Table 5's unseen clients) at this machine's scale: the
# gaussian_mixture task (300 clients x 3 components, d = 32) under dirichlet_mixture (pi_c ~ Dir(0.4), 60/20/20
# splits, 20% unseen clients), 30 clients per round, 150 rounds; FedGMM (M1 = M2 = 3), FedAvg (single-branch
# Vanilla), FedEM (3 components, client weights kept across rounds), FedProx (mu = 1), FedAvg+ (one epoch of local
# tuning) and Local (20 local epochs, about the 18.75 rounds a client takes part in), seeds 0-2, two runs at a time;
# then the table of tools/fedgmm_table.py. Finished runs are skipped, so rerunning resumes.
#
#   bash tools/run_fedgmm_table.sh [OUTPUT_ROOT] [extra run_experiment flags...]
set -euo pipefail
cd "$(dirname "$0")/.."
root="${1:-/tmp/fedgmm_table}"
shift || true
bash tools/bootstrap.sh
declare -A settings=([fedgmm]="" [vanilla_single]="" [fedem]="--num_branches=3 --fedem_client_state" [fedprox]=""
                     [fedavg_plus]="" [local]="")
for seed in 0 1 2; do
  for method in fedgmm vanilla_single fedem fedprox fedavg_plus local; do
    name="${method}_s${seed}"
    [[ -f "$root/$name/summary.json" ]] && continue
    # No trailing blank: xargs -L would join the next line to this one.
    line="--algorithm=$method --task=gaussian_mixture --scenario=dirichlet_mixture --unseen_fraction=0.2"
    line+=" --clients_per_round=30 --total_rounds=150 --rounds_per_eval=50 --seed=$seed"
    line+=" --root_output_dir=$root --experiment_name=$name"
    echo "$line${settings[$method]:+ ${settings[$method]}}${*:+ $*}"
  done
done | xargs -P 2 -L 1 sh -c 'PYTHONPATH=. TF_CPP_MIN_LOG_LEVEL=3 .venv/bin/python run_experiment.py "$@" > /dev/null 2>&1 || echo "failed: $*"' run
.venv/bin/python tools/fedgmm_table.py --root="$root"
