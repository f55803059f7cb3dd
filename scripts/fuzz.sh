#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz/) with clang (ASan + UBSan) in build-fuzz/ and,
# for each, replays its regression inputs, then fuzzes it from its committed corpus (every
# corpus input runs first). Targets: gzip compressed preproc psf request exposure config
# upload (default all, in that order: the slowest first, so that FUZZ_JOBS keeps every
# core busy to the end).
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]   a campaign: each target fuzzes for SECONDS
#                                           (default 30), one after the other
#   FUZZ_RUNS=N scripts/fuzz.sh [TARGET...] N inputs per target (the corpus included) from a
#                                           fixed seed (FUZZ_SEED, 1) without address
#                                           randomisation: the same inputs on every run with
#                                           the same compiler and corpus (gzip's coverage
#                                           follows its threads), so CI cannot turn red at
#                                           random (.ci/run)
#   scripts/fuzz.sh --merge [TARGET...]     minimises the committed corpus together with what
#                                           campaigns added (libFuzzer -merge=1 into a fresh
#                                           directory: the smallest inputs that reach every
#                                           edge) and replaces tests/fuzz/corpus/<target>
#
# The committed corpus (tests/fuzz/corpus/<target>/) is where every run starts; new inputs
# go to ${FUZZ_WORK:-build-fuzz/corpus}/<target>, never into the repository, until --merge
# takes what adds coverage. Growing it: `scripts/fuzz.sh 1800 && scripts/fuzz.sh --merge`,
# then commit tests/fuzz/corpus (docs/reliability.md §2). FUZZ_JOBS=N runs N targets at a
# time (libFuzzer fuzzes on one thread; CI uses its 2 cores). A crash leaves its
# input in build-fuzz/artifacts/ and fails the script; commit it to
# tests/fuzz/regressions/<target>/ with the fix.
set -euo pipefail
cd "$(dirname "$0")/.."
ALL=(gzip compressed preproc psf request exposure config upload)
# Longest input per target: the FITS readers need whole 2880-byte records (the largest
# seed is 11 records); the text and protobuf targets' inputs are short, and a smaller bound
# keeps each input cheap and the corpus small.
declare -A MAX_LEN=([preproc]=65536 [psf]=65536 [compressed]=65536 [gzip]=65536
                    [request]=4096 [upload]=16384 [config]=4096 [exposure]=4096)
# Dictionaries (tests/fuzz/dict/): the card names, keywords and flag names a target's parser
# branches on, which mutation alone reaches slowly.
declare -A DICT=([preproc]=fits [psf]=fits [compressed]=fits [config]=config [exposure]=exposure)

mode=fuzz
if [[ ${1:-} == --merge ]]; then
  mode=merge
  shift
fi
secs=30
if [[ $mode == fuzz && ${1:-} =~ ^[0-9]+$ ]]; then
  secs=$1
  shift
fi
targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=("${ALL[@]}")
for t in "${targets[@]}"; do
  [[ -n ${MAX_LEN[$t]:-} ]] || { echo "scripts/fuzz.sh: no target '$t' (${ALL[*]})" >&2; exit 2; }
done
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

# libFuzzer's flags for target $1: its input bound and dictionary, the per-input limits.
flags() {
  local f=(-max_len="${MAX_LEN[$1]}" -timeout=20 -rss_limit_mb=2048)
  [[ -z ${DICT[$1]:-} ]] || f+=(-dict="tests/fuzz/dict/${DICT[$1]}.dict")
  echo "${f[@]}"
}

if [[ $mode == merge ]]; then
  for t in "${targets[@]}"; do
    corpus=tests/fuzz/corpus/$t
    fresh=$(mktemp -d "$BUILD_DIR/merge-$t.XXXXXX")
    mkdir -p "$WORK/$t"
    # shellcheck disable=SC2046
    # -use_counters=0: an input is kept for an edge it reaches first, not for reaching a
    # known edge more often; that keeps the committed corpus to a few MB.
    "$BUILD_DIR/tests/fuzz/${t}_fuzzer" -merge=1 -use_counters=0 $(flags "$t") "$fresh" "$corpus" "$WORK/$t" \
      >"$BUILD_DIR/merge-$t.log" 2>&1 || { tail -30 "$BUILD_DIR/merge-$t.log"; exit 1; }
    # Named seeds (make_seeds.py's and make_compressed_seeds' files) stay under their names:
    # unit tests and the seed makers read them by name. libFuzzer names what it keeps by its
    # SHA-1, so a kept copy of a named seed is left out.
    find "$corpus" -maxdepth 1 -type f -regextype posix-extended -regex '.*/[0-9a-f]{40}' -delete
    named=$(for f in "$corpus"/*; do if [[ -f $f ]]; then sha1sum <"$f" | cut -c1-40; fi; done)
    for f in "$fresh"/*; do
      grep -qx "$(basename "$f")" <<<"$named" || cp "$f" "$corpus"/
    done
    rm -rf "$fresh"
    echo "merge $t: $(ls "$corpus" | wc -l) inputs, $(du -sk "$corpus" | cut -f1) KiB"
  done
  exit 0
fi

# One target: its regression inputs replayed (the fuzzing run itself runs every corpus input
# first), then fuzzing; its log in $BUILD_DIR/fuzz-$t.log, the summary on stdout.
run_target() {
  local t=$1 corpus=tests/fuzz/corpus/$1 regress=tests/fuzz/regressions/$1
  local bin=$BUILD_DIR/tests/fuzz/${1}_fuzzer log=$BUILD_DIR/fuzz-$1.log status=0 budget
  mkdir -p "$WORK/$t"
  if compgen -G "$regress/*" >/dev/null; then
    echo "== fuzz $t: replay $(ls "$regress" | wc -l) regression inputs =="
    "$bin" -runs=0 "$regress"/* >"$log.replay" 2>&1 || status=$?
    echo "fuzz $t: $(grep -c '^Executed' "$log.replay") regression inputs ran"
    if [[ $status -ne 0 ]]; then
      tail -60 "$log.replay"
      echo "fuzz $t: a regression input FAILED (exit $status)"
      return 1
    fi
  fi
  local fixed=()
  if [[ -n ${FUZZ_RUNS:-} ]]; then
    # A fixed seed alone does not fix the inputs: Abseil's hash tables seed themselves from
    # an address, so with address randomisation the coverage, and with it the corpus a run
    # builds, differs from run to run; and the corpus directory is reloaded on a timer.
    budget=(-runs="$FUZZ_RUNS" -seed="${FUZZ_SEED:-1}" -reload=0)
    fixed=("${NO_ASLR[@]}")
    echo "== fuzz $t: ${FUZZ_RUNS} inputs from seed ${FUZZ_SEED:-1} =="
  else
    budget=(-max_total_time="$secs")
    echo "== fuzz $t: ${secs} s =="
  fi
  # The CPU time as well as the wall time: on a shared machine the wall time says little
  # about what the run costs an idle CI machine.
  local TIMEFORMAT="fuzz $t: %0R s wall, %0U s user + %0S s system CPU"
  # shellcheck disable=SC2046
  time { "${fixed[@]}" "$bin" "${budget[@]}" $(flags "$t") -print_final_stats=1 \
    -artifact_prefix="$BUILD_DIR/artifacts/${t}-" "$WORK/$t" "$corpus" >"$log" 2>&1 || status=$?; }
  grep -a -E '^#[0-9]+[[:space:]]+DONE|^stat::(number_of_executed_units|peak_rss_mb|new_units_added)' "$log" || true
  if [[ $status -ne 0 ]]; then
    tail -60 "$log"
    echo "fuzz $t: FAILED (exit $status); input in $BUILD_DIR/artifacts/"
    return 1
  fi
}

# Runs a command without address randomisation, where the kernel allows it.
NO_ASLR=(setarch "$(uname -m)" -R)
"${NO_ASLR[@]}" true 2>/dev/null || { echo "scripts/fuzz.sh: setarch -R refused: addresses randomised"; NO_ASLR=(); }

# FUZZ_JOBS targets at a time; each one's lines printed whole when it ends.
jobs_max=${FUZZ_JOBS:-1}
declare -A running=()
failed=0
reap() {
  local pid
  wait -n -p pid "${!running[@]}" || failed=1
  cat "$BUILD_DIR/fuzz-${running[$pid]}.out"
  unset "running[$pid]"
}
for t in "${targets[@]}"; do
  while [[ ${#running[@]} -ge $jobs_max ]]; do reap; done
  run_target "$t" >"$BUILD_DIR/fuzz-$t.out" 2>&1 &
  running[$!]=$t
done
while [[ ${#running[@]} -gt 0 ]]; do reap; done
exit "$failed"
