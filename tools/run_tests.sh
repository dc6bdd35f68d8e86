#!/usr/bin/env bash
# Installs what is missing, then runs every test target with Bazel. The last line is the count of test targets,
# "N passed, N failed"; the exit status is 0 only if every target passed.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash tools/bootstrap.sh || exit 1

# Targets tagged manual (the short tests' own targets, which //tests:short_tests runs) run only when named.
total=$(bazel query --noshow_progress 'tests(//...) except attr(tags, manual, //...)' 2>/dev/null | wc -l)
log=$(mktemp)
bazel test //... "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
passed=$(grep -cE '^//[^ ]+ +(\(cached\) )?PASSED in' "$log")
rm -f "$log"
echo "$passed passed, $((total - passed)) failed"
exit "$status"
