#!/usr/bin/env bash
# The README's test command: installs missing dependencies, builds everything and runs
# the whole test suite with CTest. GPU tests skip (with a message) without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh "$@"
cd "${BUILD_DIR:-build}"
ctest --output-on-failure -j "${JOBS:-$(nproc)}" --timeout 900
