#!/usr/bin/env bash
# Installs what is missing, then runs every test target with Bazel. The last line is the count of test targets,
# "N passed, N failed"; the exit status is 0 only if every target passed.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash tools/bootstrap.sh || exit 1

# Every test file is a target, and the targets tagged manual (the short tests' own, which //tests:fast_tests and
# //tests:short_tests run) run only when named, so each must be in a group of tests/BUILD's FAST_TEST_GROUPS or
# SHORT_TEST_GROUPS: one that is not would never run.
files=$(git ls-files '*_test.py' | sed -E 's|^(.*)/([^/]+)\.py$|//\1:\2|' | sort)
targets=$(bazel query --noshow_progress 'tests(//...)' 2>/dev/null | sort)
unbundled=$(comm -23 <(bazel query --noshow_progress 'attr(tags, manual, tests(//...))' 2>/dev/null | sed 's/$/_lib/' | sort) \
                     <(bazel query --noshow_progress 'deps(//tests:fast_tests + //tests:short_tests)' 2>/dev/null | sort))
missing="$(comm -23 <(echo "$files") <(echo "$targets")) ${unbundled//_lib/}"
if [ -n "${missing// /}" ]; then
  echo "Tests that would not run (no target, or in no group of tests/BUILD's FAST_TEST_GROUPS or SHORT_TEST_GROUPS): $missing"
  echo "0 passed, 1 failed"
  exit 1
fi
total=$(bazel query --noshow_progress 'tests(//...) except attr(tags, manual, //...)' 2>/dev/null | wc -l)
log=$(mktemp)
bazel test //... "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
passed=$(grep -cE '^//[^ ]+ +(\(cached\) )?PASSED in' "$log")
rm -f "$log"
echo "$passed passed, $((total - passed)) failed"
exit "$status"
