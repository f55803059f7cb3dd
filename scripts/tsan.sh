#!/usr/bin/env bash
# ThreadSanitizer pass (CI): builds only the server and integration test binaries (and
# the spexd/spexctl they spawn) with -fsanitize=thread, CUDA off, and runs the tests
# where threads meet: the scheduler, the PSF cache, and the integration tests of
# concurrent clients, cancellation, deadlines, full queues, drain and the chaos tests.
# The other integration tests (TLS, reflection, metrics scraping, bad requests) exercise
# single-threaded paths of our code plus gRPC internals, which TSan cannot judge here
# (Debian's gRPC is not instrumented): they run in the ASan+UBSan build instead.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${TSAN_BUILD_DIR:-build-tsan}
export CCACHE_BASEDIR=$PWD CCACHE_NOHASHDIR=1
if [[ ! -f $BUILD_DIR/CMakeCache.txt ]]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSPEXD_WITH_CUDA=OFF \
    -DSPEXD_SANITIZE=thread >/dev/null
fi
cmake --build "$BUILD_DIR" -j "${JOBS:-$(nproc)}" --target spexd_server_tests spexd_integration_tests
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$PWD/tests/sanitizers/tsan.supp ${TSAN_OPTIONS:-}"
subset='^(SchedulerTest|PsfCacheTest|PsfCacheServiceTest|LifecycleTest|DrainTest|ChaosTest)\.|EightConcurrentClients'
cd "$BUILD_DIR"
ctest --output-on-failure -j "${JOBS:-$(nproc)}" --timeout 600 -R "$subset"
