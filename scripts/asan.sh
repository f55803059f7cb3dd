#!/usr/bin/env bash
# AddressSanitizer + UndefinedBehaviorSanitizer pass (CI; docs/reliability.md §1). Builds
# the whole project without CUDA, which also proves that everything but cuda/ stands alone
# (docs/design.md: server -> core <- cuda), and runs the tests of the core, server, client
# and integration (chaos included) on it. Left to the plain build: the deploy tests (shell
# scripts around the container, Slurm and Kubernetes files), the GPU tests (they skip
# without a GPU anyway) and the Python client's tests (below).
set -euo pipefail
cd "$(dirname "$0")/.."
export BUILD_DIR=${ASAN_BUILD_DIR:-build-asan}
scripts/install-deps.sh
scripts/build.sh -DSPEXD_WITH_CUDA=OFF -DSPEXD_SANITIZE=address,undefined
# verify_asan_link_order=0: the chaos tests LD_PRELOAD their file-system fault library
# (tests/integration/fs_fault_preload.c) in front of the ASan runtime; that is harmless.
export ASAN_OPTIONS="verify_asan_link_order=0:detect_leaks=1:abort_on_error=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
export LSAN_OPTIONS="suppressions=$PWD/tests/sanitizers/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
cd "$BUILD_DIR"
# The tests that scrape /metrics over HTTP (MetricsTest, the demo) run here: the HTTP server
# is ours (server/platform/metrics_http.cc). The python and desispec labels run in the plain
# pass only. Their clients are Python, which ASan does not see; the server paths they reach
# are the RPCs the integration tests drive from C++ here; and under ASan their time is the
# CPU backend's frames (python.exposure 8 s plain, 50 s here): a third of this pass's test
# time for numerics the core tests check here already.
ctest --output-on-failure -j "${JOBS:-$(nproc)}" --timeout 900 -LE '^(deploy|gpu|desispec|python)$'
