#!/usr/bin/env bash
# The README's test command: installs the test tools (scripts/install-deps.sh --tests, without
# recommended packages), builds everything, tests included (also in a build directory that
# scripts/demo.sh configured without them), and runs the whole test suite with CTest. The
# tests install and fetch nothing themselves. GPU tests skip (with a message) without a GPU, and tests
# that need DESI's large reference data (SPEXD_SHARED_DATA_DIR) skip (with a message) where it is absent.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --tests
scripts/build.sh -DSPEXD_BUILD_TESTS=ON "$@"
cd "${BUILD_DIR:-build}"
log=$(mktemp)
status=0
ctest --output-on-failure --no-tests=error -j "${JOBS:-$(nproc)}" --timeout 900 | tee "$log" || status=$?
# ctest hides the output of skipped tests: list why they skipped (gtest's message follows
# its "Skipped" line), then repeat ctest's summary so that it stays the closing line.
if [[ -f Testing/Temporary/LastTest.log ]]; then
  reasons=$(grep -A1 -E '^[^ ]+:[0-9]+: Skipped$' Testing/Temporary/LastTest.log |
            grep -vE 'Skipped$|^--$' | sort | uniq -c | sort -rn || true)
  if [[ -n $reasons ]]; then
    echo
    echo "Why tests skipped (count, reason):"
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
