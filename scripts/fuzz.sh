#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan) and runs each for SECONDS
# (default 30), after replaying its committed seeds and regression inputs.
#   scripts/fuzz.sh [SECONDS] [TARGET...]   targets: preproc psf compressed config request upload gzip (default all)
# With FUZZ_RUNS=N each target instead runs N inputs from a fixed seed (FUZZ_SEED, 1): the
# same inputs on every machine with the same compiler, so CI cannot turn red at random when
# a time-bounded run happens upon a new bug (long exploratory runs are local, with SECONDS).
# New corpus entries go to ${FUZZ_WORK:-build-fuzz/corpus}/<target>, not to the committed
# seeds. A crash leaves its input in build-fuzz/artifacts/ and fails the script; commit it
# to tests/fuzz/regressions/<target>/ with the fix.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-30}
shift || true
targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=(preproc psf compressed config request upload gzip)
BUILD_DIR=${FUZZ_BUILD_DIR:-build-fuzz}
WORK=${FUZZ_WORK:-$BUILD_DIR/corpus}
export CCACHE_BASEDIR=$PWD CCACHE_NOHASHDIR=1
if [[ ! -f $BUILD_DIR/CMakeCache.txt ]]; then
  CC=clang CXX=clang++ cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DSPEXD_WITH_CUDA=OFF -DSPEXD_BUILD_TESTS=OFF \
    -DSPEXD_BUILD_FUZZERS=ON -DSPEXD_SANITIZE=fuzzer-no-link,address,undefined >/dev/null
fi
cmake --build "$BUILD_DIR" -j "${JOBS:-$(nproc)}" --target "${targets[@]/%/_fuzzer}"
mkdir -p "$BUILD_DIR/artifacts"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
# Third-party leaks only, each with its reason (tests/sanitizers/lsan.supp).
export LSAN_OPTIONS="suppressions=$PWD/tests/sanitizers/lsan.supp ${LSAN_OPTIONS:-}"
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
for t in "${targets[@]}"; do
  seeds=tests/fuzz/corpus/$t
  regress=tests/fuzz/regressions/$t
  mkdir -p "$WORK/$t"
  echo "== fuzz $t: replay seeds and regressions =="
  inputs=("$seeds"/*)
  [[ -d $regress ]] && inputs+=("$regress"/*)
  "$BUILD_DIR/tests/fuzz/${t}_fuzzer" -runs=0 "${inputs[@]}" 2>&1 | tail -2
  if [[ -n ${FUZZ_RUNS:-} ]]; then
    budget=(-runs="$FUZZ_RUNS" -seed="${FUZZ_SEED:-1}")
    echo "== fuzz $t: ${FUZZ_RUNS} inputs from seed ${FUZZ_SEED:-1} =="
  else
    budget=(-max_total_time="$secs")
    echo "== fuzz $t: ${secs} s =="
  fi
  # -max_len covers the largest seed (FITS files are multiples of 2880 bytes).
  log=$BUILD_DIR/fuzz-$t.log
  status=0
  "$BUILD_DIR/tests/fuzz/${t}_fuzzer" "${budget[@]}" -max_len=65536 -timeout=20 \
    -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$BUILD_DIR/artifacts/${t}-" \
    "$WORK/$t" "$seeds" >"$log" 2>&1 || status=$?
  grep -E '^#[0-9]+ +DONE|^stat::(number_of_executed_units|peak_rss_mb|new_units_added)' "$log" || true
  if [[ $status -ne 0 ]]; then
    tail -60 "$log"
    echo "fuzz $t: FAILED (exit $status); input in $BUILD_DIR/artifacts/"
    exit 1
  fi
done
