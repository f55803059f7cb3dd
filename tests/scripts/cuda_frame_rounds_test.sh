#!/usr/bin/env bash
# scripts/cuda_frame_rounds.sh on a stand-in bundle whose benchmark logs how it was called
# and reports a median by module: the rounds interleave the variants in the order given,
# each variant gets its module and faults, the table gives the medians over the rounds,
# their ratios to the first, the fastest warm frames and the medians of two frames in flight,
# a frame of other bytes (with its model or without) is named, and a failed CPU check fails
# the run. No GPU needed.
#   cuda_frame_rounds_test.sh [REPO_ROOT]
set -uo pipefail
ROOT=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
check() {  # check WHAT CONDITION...
  local what=$1
  shift
  if "$@"; then echo "ok: $what"; else echo "FAIL: $what"; fail=1; fi
}

mkdir -p "$T/bundle"
cat >"$T/bundle/run.sh" <<'EOF'
#!/bin/sh
here=$(cd "$(dirname "$0")" && pwd)
prog=$1; shift
exec "$here/$prog" "$@"
EOF
# The stand-in: 0.040 s with a module named fast*, 0.050 s otherwise, and two in flight at
# 24 (round 1) and 26 frames/s (round 2) with one, 20 otherwise; a module named bad* fails
# its CPU check; the dumped frame's bytes follow the faults.
cat >"$T/bundle/spexd_cuda_frame_bench" <<'EOF'
#!/usr/bin/env bash
json= dump= model=
while [[ $# -gt 0 ]]; do
  case $1 in --json) json=$2; shift ;; --dump) dump=$2; shift ;; --model) model=model ;; esac
  shift
done
m=${SPEXD_CUDA_MODULE:-own}
echo "$(basename "$m") ${SPEXD_TEST_CUDA_FAULTS:-none} ${json:+json}${dump:+dump}${model:+ model}" >>"$FAKE_LOG"
case $(basename "$m") in fast*) med=0.040 ;; *) med=0.050 ;; esac
case $(basename "$m") in fast*) fps=$([[ $json == *_1.json ]] && echo 24 || echo 26) ;; *) fps=20 ;; esac
case $(basename "$m") in bad*) ok=false ;; *) ok=true ;; esac
[[ -n $json ]] && echo "{\"median_seconds\": $med, \"run_seconds\": [$med, $(python3 -c "print($med - 0.001)")], \"inflight_frames_per_second\": $fps, \"cpu_check\": {\"ok\": $ok}}" >"$json"
[[ -n $dump ]] && printf 'frame %s %s' "${SPEXD_TEST_CUDA_FAULTS:-plain}" "$model" >"$dump"
exit 0
EOF
chmod +x "$T/bundle/run.sh" "$T/bundle/spexd_cuda_frame_bench"
touch "$T/fast.so" "$T/bad.so"
export FAKE_LOG=$T/calls.log

cd "$ROOT"
out=$(RUNS=3 scripts/cuda_frame_rounds.sh "$T/out" 2 old "$T/bundle" - - \
  new "$T/bundle" "$T/fast.so" - a100 "$T/bundle" "$T/fast.so" shared_memory_cap=166912 2>&1)
rc=$?
echo "$out"
check "exit 0 when every CPU check passed" test "$rc" -eq 0
want="own none json
fast.so none json
fast.so shared_memory_cap=166912 json
own none json
fast.so none json
fast.so shared_memory_cap=166912 json
own none dump model
own none dump
fast.so none dump model
fast.so none dump
fast.so shared_memory_cap=166912 dump model
fast.so shared_memory_cap=166912 dump"
check "rounds interleave the variants, then two dumps each" test "$(cat "$FAKE_LOG")" = "$want"
check "the first variant is the reference" grep -q '^old | 0.05000 (2 rounds) | 1.000 | 0.04900 | 20.00 | [0-9a-f]\{16\}/[0-9a-f]\{16\} identical$' <<<"$out"
check "the second's median, ratio, fastest frame and two in flight" grep -q '^new | 0.04000 (2 rounds) | 0.800 | 0.03900 | 25.00 | .* identical$' <<<"$out"
check "a frame of other bytes is named" grep -q '^a100 | 0.04000 (2 rounds) | 0.800 | .* DIFFERENT$' <<<"$out"

: >"$FAKE_LOG"
RUNS=3 scripts/cuda_frame_rounds.sh "$T/out2" 1 old "$T/bundle" - - bad "$T/bundle" "$T/bad.so" - >/dev/null 2>&1
check "a failed CPU check fails the run" test $? -eq 1
scripts/cuda_frame_rounds.sh "$T/out3" 1 old "$T/bundle" - >/dev/null 2>&1
check "a variant without its four fields is refused" test $? -eq 2

((fail == 0)) && echo "cuda_frame_rounds_test: ok"
exit $fail
