#!/usr/bin/env bash
# The README's test command: installs the test tools (scripts/install-deps.sh --tests, without
# recommended packages), builds everything, tests included (also in a build directory that
# scripts/demo.sh configured without them), and runs the whole test suite with CTest. The
# tests install and fetch nothing themselves. GPU tests skip (with a message) without a GPU, and tests
# that need DESI's large reference data (SPEXD_SHARED_DATA_DIR) skip (with a message) where it
# is absent; the closing lines list every skip and why (scripts/skip_report.py).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
scripts/install-deps.sh --tests
scripts/build.sh -DSPEXD_BUILD_TESTS=ON "$@"
cd "${BUILD_DIR:-build}"
log=$(mktemp)
status=0
# The JUnit report keeps every test's output (the passed ones' whole, where Python's
# unittest names the tests it skipped inside a module that passed) for the skip report.
junit=$PWD/Testing/Temporary/junit.xml
rm -f "$junit"
ctest --output-on-failure --no-tests=error -j "${JOBS:-$(nproc)}" --timeout 900 \
  --output-junit "$junit" --test-output-size-passed 4194304 | tee "$log" || status=$?
# ctest hides the output of skipped tests: list every skip and why (gtest's message, a
# script's SKIP line, unittest's skipped tests and sub-tests), then repeat ctest's summary
# so that it stays the closing line.
if [[ -f $junit ]]; then
  reasons=$(/usr/bin/python3 "$ROOT/scripts/skip_report.py" "$junit" || true)
  if [[ -n $reasons ]]; then
    echo
    echo "$reasons"
  fi
fi
summary=$(grep -E '^[0-9]+% tests passed' "$log" || true)
rm -f "$log"
if [[ -n $summary ]]; then
  echo
  echo "$summary"
fi
exit "$status"
