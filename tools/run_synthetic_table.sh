#!/usr/bin/env bash
# Runs every method on the synthetic task under the linear shift for p in {0.25, 1, 4} and seeds 0-2 (two runs at a
# time), then prints one table (mean +- standard error over seeds). Finished runs are skipped, so rerunning resumes.
#
#   bash tools/run_synthetic_table.sh [OUTPUT_ROOT] [extra run_experiment flags...]
set -euo pipefail
cd "$(dirname "$0")/.."
root="${1:-/tmp/periodic_shift_table}"
shift || true
bash tools/bootstrap.sh
bazel build //:run_experiment //experiment:summarize 2>/dev/null
methods="vanilla nds scsgd tshot_kmeans min_loss fedem fedtem fedtkm"
for method in $methods; do
  for p in 0.25 1 4; do
    # No-Dist-Shift draws clients without shift: one setting, whatever p.
    if [[ "$method" == nds && "$p" != 1 ]]; then continue; fi
    for seed in 0 1 2; do
      name="${method}_p${p}_s${seed}"
      [[ -f "$root/$name/summary.json" ]] && continue
      # No trailing blank: xargs -L would join the next line to this one.
      echo "--algorithm=$method --shift_p=$p --seed=$seed --root_output_dir=$root --experiment_name=$name${*:+ $*}"
    done
  done
done | xargs -P 2 -L 1 sh -c 'bazel-bin/run_experiment "$@" > /dev/null 2>&1 || echo "failed: $*"' run
bazel-bin/experiment/summarize --root="$root"
