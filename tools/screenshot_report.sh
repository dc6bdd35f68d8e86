#!/usr/bin/env bash
# A PNG of a report's index.html as a browser renders it (headless Debian Chromium, offline), to check that the
# page, its tables and its plots render:
#   bash tools/screenshot_report.sh REPORT_DIR [OUTPUT_PNG] [WIDTHxHEIGHT]    (default: REPORT_DIR/screenshot.png,
#                                                                              1400x4000)
# Installs Debian's chromium when it is missing.
set -euo pipefail
report="${1:?usage: bash tools/screenshot_report.sh REPORT_DIR [OUTPUT_PNG] [WIDTHxHEIGHT]}"
output="${2:-$report/screenshot.png}"
size="${3:-1400x4000}"
[[ -f "$report/index.html" ]] || { echo "screenshot_report: error: no index.html in $report" >&2; exit 2; }
if ! command -v chromium >/dev/null; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y chromium >/dev/null
fi
profile="$(mktemp -d)"
trap 'rm -rf "$profile"' EXIT
chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking \
  --disable-component-update --disable-sync --user-data-dir="$profile" --hide-scrollbars \
  --window-size="${size/x/,}" --screenshot="$(realpath -m "$output")" "file://$(realpath "$report")/index.html" \
  2>/dev/null
echo "screenshot_report: $output"
