#!/usr/bin/env bash
# Seed 001's comparison at this machine's scale: FedAvg (single-branch Vanilla), FedAvg+FT (fedavg_plus: one epoch
# of fine-tuning on the client's sources), FedRep (per-client heads), FedEvp and FedEvolve under evolving_domains, 20 clients (the seed's), 10
# per round, batches of 128 (FedEvolve's and FedEvp's in-batch prototypes need several examples per class and
# stage), Dirichlet label skew alpha in {inf, 1.0, 0.1}, seeds 0-2, on
#   synthetic: the rotated-digits stand-in (no EMNIST files here), 12 domains 15 degrees apart (RMNIST's), 60 rounds;
#   circle:    the seed's 30 domains on the half circle, 60 rounds;
# two runs at a time (set JOBS), then the table of tools/evolving_table.py. Finished runs are skipped, so rerunning
# resumes; TASKS and METHODS restrict the tasks and methods (e.g. TASKS=synthetic METHODS=fedrep).
#
#   bash tools/run_evolving_table.sh [OUTPUT_ROOT] [extra run_experiment flags...]
set -euo pipefail
cd "$(dirname "$0")/.."
root="${1:-/tmp/evolving_table}"
shift || true
bash tools/bootstrap.sh
declare -A settings=([synthetic]="--num_domains=12 --rotation_step=15"
                     [circle]="--num_domains=30 --rotation_step=6.2069")
for task in ${TASKS:-synthetic circle}; do
  for alpha in inf 1.0 0.1; do
    for seed in 0 1 2; do
      for method in ${METHODS:-vanilla_single fedavg_plus fedrep fedevp fedevolve}; do
        name="${task}_${method}_a${alpha}_s${seed}"
        [[ -f "$root/$name/summary.json" ]] && continue
        # No trailing blank: xargs -L would join the next line to this one.
        line="--algorithm=$method --task=$task --scenario=evolving_domains ${settings[$task]} --num_clients=20"
        line+=" --dirichlet_alpha=$alpha --clients_per_round=10 --client_batch_size=128 --total_rounds=60"
        line+=" --rounds_per_eval=30 --seed=$seed --root_output_dir=$root --experiment_name=$name"
        echo "$line${*:+ $*}"
      done
    done
  done
done | xargs -P "${JOBS:-2}" -L 1 sh -c 'PYTHONPATH=. TF_CPP_MIN_LOG_LEVEL=3 .venv/bin/python run_experiment.py "$@" > /dev/null 2>&1 || echo "failed: $*"' run
PYTHONPATH=. .venv/bin/python tools/evolving_table.py --root="$root"
