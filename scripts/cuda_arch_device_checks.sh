#!/usr/bin/env bash
# shellcheck disable=SC2046  # modenv prints NAME=VALUE words, split on purpose
# The CUDA module's architecture paths on one GPU machine (an H100), in one device call:
#   new    this build's module (sm_80, sm_90, sm_100 SASS and compute_100 PTX): the H100
#          runs its sm_90 code;
#   ptx80  the same sources built for compute_80 PTX only, which the driver compiles for the
#          H100, so every __CUDA_ARCH__ == 800 branch runs, with the planner's shared memory
#          capped at the A100's 166912 bytes (SPEXD_TEST_CUDA_FAULTS=shared_memory_cap);
#   old    the module the sm_90 output must match byte for byte (optional).
# For new and ptx80: the GPU tests, the fault tests, the warm r frame (times, CPU check) and
# its --model --dump; for old the dump. STEPS selects (default: bench tests); "memcheck"
# runs compute-sanitizer memcheck on both.
# MODULES picks the bench's modules (default: new ptx80 old).
#   scripts/cuda_arch_device_checks.sh BUNDLE_DIR OUT_DIR
#     BUNDLE_DIR  a device bundle (../shared/tools/device-bundle.sh -m lib/spexd/libspexd_cuda.so)
#                 with the CUDA test binaries and spexd_cuda_frame_bench, plus
#                 modules/ptx80/libspexd_cuda.so (-DCMAKE_CUDA_ARCHITECTURES=80-virtual, the
#                 same SPEXD_BUILD_TOKEN), optionally modules/old/libspexd_cuda.so and its
#                 own bench as spexd_cuda_frame_bench_old
#   Run from the repository root (the PSF is tests/data's).
set -uo pipefail
B=$(cd "$1" && pwd) || exit 2
OUT=$2
mkdir -p "$OUT"
STEPS=${STEPS:-bench tests}
export CUDA_CACHE_MAXSIZE=4294967296 CUDA_CACHE_PATH=/tmp/spexd-jit-cache
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
run() {
  local name=$1 s=$SECONDS rc
  shift
  timeout "${STEP_TIMEOUT:-300}" "$@" >"$OUT/$name.log" 2>&1
  rc=$?
  echo "$name rc=$rc $((SECONDS - s))s $(grep -E '^\[  (PASSED|FAILED) |ERROR SUMMARY|^\[  FAILED  \] [A-Z]' \
    "$OUT/$name.log" | head -8 | tr '\n' ' ')" | tee -a "$OUT/summary.txt"
}
cap=shared_memory_cap=166912
mod_new=$B/lib/libspexd_cuda.so
mod_80=$B/modules/ptx80/libspexd_cuda.so
mod_old=$B/modules/old/libspexd_cuda.so
modenv() {  # modenv new|ptx80|old: the module (and ptx80's cap) as NAME=VALUE words for env
  case $1 in
    new) echo "SPEXD_CUDA_MODULE=$mod_new" ;;
    ptx80) echo "SPEXD_CUDA_MODULE=$mod_80 SPEXD_TEST_CUDA_FAULTS=$cap" ;;
    old) echo "SPEXD_CUDA_MODULE=$mod_old" ;;
  esac
}
for step in $STEPS; do
  case $step in
    tests)
      run math "$B/run.sh" spexd_cuda_math_tests
      for m in new ptx80; do
        run "cuda_$m" env $(modenv $m) "$B/run.sh" spexd_cuda_tests
        run "fault_$m" env $(modenv $m) "$B/run.sh" spexd_cuda_fault_tests
      done ;;
    bench)
      for m in ${MODULES:-new ptx80 old}; do
        [[ $m == old && ! -f $mod_old ]] && continue
        bench=spexd_cuda_frame_bench
        [[ $m == old ]] && bench=spexd_cuda_frame_bench_old  # the old module's own build
        run "dump_$m" env $(modenv $m) "$B/run.sh" $bench --runs 1 --model --dump "$OUT/dump_$m.bin" \
          --json "$OUT/dump_$m.json"
        run "frame_$m" env $(modenv $m) "$B/run.sh" $bench --runs 9 --check --json "$OUT/frame_$m.json"
        python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print('  %s median %.5f p90 %.5f min %.5f inflight %.2f device_bytes %d stages %s' % (sys.argv[2], d['median_seconds'], d['p90_seconds'], d['min_seconds'], d['inflight_frames_per_second'], d['device_bytes'], {k: round(v * 1e3, 2) for k, v in d['stage_median_seconds'].items()}))" "$OUT/frame_$m.json" "$m" 2>&1 | tee -a "$OUT/summary.txt"
        cp "$OUT/frame_$m.json" "$OUT/frame_${m}_$SECONDS.json" 2>/dev/null
      done
      python3 - "$OUT" <<'PY' | tee -a "$OUT/summary.txt"
import json, os, sys, hashlib
out = sys.argv[1]
for m in ("new", "ptx80", "old"):
    p = os.path.join(out, "frame_%s.json" % m)
    if os.path.exists(p):
        d = json.load(open(p))
        c = d.get("cpu_check", {})
        print("frame %s: median %.5f p90 %.5f inflight %s | cpu check flux %.3g ivar %.3g R %.3g"
              % (m, d["median_seconds"], d["p90_seconds"], d.get("inflight_frames_per_second"),
                 c.get("flux", -1), c.get("ivar", -1), c.get("rdiag", -1)))
dumps = {}
for m in ("new", "ptx80", "old"):
    p = os.path.join(out, "dump_%s.bin" % m)
    if os.path.exists(p):
        b = open(p, "rb").read()
        dumps[m] = b
        print("dump %s: %d bytes sha256 %s" % (m, len(b), hashlib.sha256(b).hexdigest()))
if "old" in dumps and "new" in dumps:
    print("sm_90 output byte-identical to the old module's:", dumps["old"] == dumps["new"])
if "new" in dumps and "ptx80" in dumps and len(dumps["new"]) == len(dumps["ptx80"]):
    import array, math
    a = array.array("d", dumps["new"]); b = array.array("d", dumps["ptx80"])
    top = max((abs(x) for x in a if math.isfinite(x)), default=0.0)
    worst = max((abs(x - y) for x, y in zip(a, b) if math.isfinite(x) and math.isfinite(y)), default=0.0)
    nonfin = sum(1 for x, y in zip(a, b) if math.isfinite(x) != math.isfinite(y))
    same = sum(1 for x, y in zip(a, b) if x == y or (x != x and y != y))
    print("ptx80 vs new: %d of %d doubles identical, largest difference %.3g (%.3g of the largest value), %d finite/non-finite mismatches"
          % (same, len(a), worst, worst / top if top else 0.0, nonfin))
PY
      rm -f "$OUT"/dump_*.bin ;;
    memcheck)
      for m in new ptx80; do
        run "memcheck_$m" env $(modenv $m) compute-sanitizer --tool memcheck --leak-check full "$B/run.sh" \
          spexd_cuda_tests --gtest_filter='*CudaSanitizer*:*EdgeWindows*:*NonFinite*'
        run "memcheck_poison_$m" env $(modenv $m) compute-sanitizer --tool memcheck "$B/run.sh" \
          spexd_cuda_fault_tests --gtest_filter='*Poisoned*'
      done ;;
  esac
done
cat "$OUT/summary.txt"
