#!/usr/bin/env bash
# Every check a CUDA backend change must pass on a GPU machine, in one run:
#   1. spexd_cuda_math_tests, spexd_cuda_tests and spexd_cuda_fault_tests;
#   2. compute-sanitizer: memcheck (the sanitizer, edge-window and non-finite frames; the
#      poisoned-allocation fault tests), racecheck (the sanitizer frames), and initcheck,
#      whose reports inside cuBLAS's own kernels are counted but not failed (its DGEMM reads
#      past what spexd writes, never into a result), any other one fails;
#   3. the warm-frame benchmark, RUNS (3) runs of 9 frames and two in flight, with the CPU
#      check of bundles 0 and 19.
#
#   scripts/cuda_device_checks.sh DIR OUT_DIR
#     DIR         where spexd_cuda_math_tests, spexd_cuda_tests, spexd_cuda_fault_tests,
#                 spexd_cuda_frame_bench and the CUDA module are (scripts/run_program.sh: a
#                 build tree configured with -DSPEXD_BUILD_TESTS=ON -DSPEXD_BUILD_BENCHMARKS=ON,
#                 or a bundle)
#     OUT_DIR     logs and the benchmark's JSON files
#   Environment: RUNS (3); SPEXD_CUDA_MODULE as for any run (another module to check).
#   Run from the repository's root (the PSF is tests/data's). Exit 0 when every step passed.
set -uo pipefail
[[ $# -eq 2 ]] || { sed -n '2,19p' "$0"; exit 2; }
B=$(cd "$1" && pwd) || exit 2
RUN=$(dirname "$(readlink -f "$0")")/run_program.sh
OUT=$2
mkdir -p "$OUT"
RUNS=${RUNS:-3}
fail=0
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
# run NAME CMD...: the command's log in OUT/NAME.log and a line of its gtest/sanitizer summary.
run() {
  local name=$1 s=$SECONDS rc
  shift
  "$@" >"$OUT/$name.log" 2>&1
  rc=$?
  ((rc == 0)) || fail=1
  echo "$name rc=$rc $((SECONDS - s))s $(grep -E '^\[  (PASSED|FAILED) |ERROR SUMMARY|RACECHECK SUMMARY' \
    "$OUT/$name.log" | tr '\n' ' ')"
}
san() { compute-sanitizer "$@"; }
run math "$RUN" "$B" spexd_cuda_math_tests
run cuda "$RUN" "$B" spexd_cuda_tests
run fault "$RUN" "$B" spexd_cuda_fault_tests
run memcheck san --tool memcheck --leak-check full "$RUN" "$B" spexd_cuda_tests \
  --gtest_filter='*CudaSanitizer*:*EdgeWindows*:*NonFinite*'
run memcheck_poison san --tool memcheck "$RUN" "$B" spexd_cuda_fault_tests --gtest_filter='*Poisoned*'
run racecheck san --tool racecheck "$RUN" "$B" spexd_cuda_tests --gtest_filter='*CudaSanitizer*'
# initcheck: every report names its kernel on the line after it; cuBLAS's are tolerated.
san --tool initcheck --print-limit 1000000 "$RUN" "$B" spexd_cuda_tests \
  --gtest_filter='*CudaSanitizer*' >"$OUT/initcheck.log" 2>&1
ic_rc=$?
ic_all=$(grep -c 'Uninitialized' "$OUT/initcheck.log")
ic_ours=$(grep -A1 'Uninitialized' "$OUT/initcheck.log" | grep -E '^=+ +at ' | grep -vc 'cublas')
if ((ic_ours > 0)) || ! grep -qE '^\[  PASSED  \]' "$OUT/initcheck.log"; then
  fail=1
  grep -A1 'Uninitialized' "$OUT/initcheck.log" | grep -E '^=+ +at ' | grep -v cublas | sort | uniq -c | head
fi
echo "initcheck rc=$ic_rc: $ic_all reports, $ic_ours outside cuBLAS's kernels"
gzip -f "$OUT/initcheck.log"
for r in $(seq "$RUNS"); do
  j=$OUT/frame_$r.json
  if "$RUN" "$B" spexd_cuda_frame_bench --runs 9 --json "$j" >"$OUT/frame_$r.log" 2>&1; then
    python3 - "$j" "$r" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
c = d.get("cpu_check", {})
print("frame run %s: median %.5f p90 %.5f, two in flight %s frames/s | check flux %.3g ivar %.3g R %.3g"
      % (sys.argv[2], d["median_seconds"], d["p90_seconds"], d.get("inflight_frames_per_second"),
         c.get("flux", -1), c.get("ivar", -1), c.get("rdiag", -1)))
PY
  else
    fail=1
    echo "frame run $r FAILED"
    tail -5 "$OUT/frame_$r.log"
  fi
done
exit $fail
