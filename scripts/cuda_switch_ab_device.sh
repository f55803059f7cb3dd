#!/usr/bin/env bash
# A/B of one CUDA environment switch on the GPU machine, in one call: the GPU
# tests with the switch set, then the warm-frame benchmark interleaved without and with it
# (the same module), each run's median and p90, the CPU check of bundles 0 and 19 (each
# array's largest deviation from the CPU backend, of its maximum) and the stage medians.
#
#   scripts/cuda_switch_ab_device.sh BUNDLE_DIR OUT_DIR NAME=VALUE [ROUNDS]
#     BUNDLE_DIR  a device bundle (device-bundle.sh) with spexd_cuda_frame_bench and, when
#                 present, spexd_cuda_tests, spexd_cuda_fault_tests, spexd_cuda_math_tests
#     OUT_DIR     the benchmark JSON files and logs
#   Environment: SKIP_TESTS=1 runs only the benchmark (e.g. when the switch is
#   SPEXD_CUDA_MODULE=<an older module>, whose tests ran before); MEMCHECK=1 runs compute-sanitizer memcheck of the GPU tests' sanitizer
#   subset with the switch set; INFLIGHT=1 adds two frames in flight per side at the end;
#   DUMP=1 compares a warm frame's outputs (--model --dump) of both sides by SHA-256 (the
#   changes that must move no arithmetic); NCU_KERNELS=REGEX times the named kernels and
#   counts their warp instructions on both sides (Nsight Compute, one launch each after the
#   cold frame's).
#   Run from the repository's root (the PSF is tests/data's). Exit 0 when every step passed.
set -uo pipefail
[[ $# -ge 3 ]] || { sed -n '2,16p' "$0"; exit 2; }
B=$(cd "$1" && pwd) || exit 2
OUT=$2; mkdir -p "$OUT"
SWITCH=$3 ROUNDS=${4:-3}
fail=0
nvidia-smi -L
for t in spexd_cuda_math_tests spexd_cuda_tests spexd_cuda_fault_tests; do
  [[ -x $B/$t && -z ${SKIP_TESTS:-} ]] || continue
  env "$SWITCH" "$B/run.sh" "$t" >"$OUT/$t.log" 2>&1
  rc=$?; ((rc == 0)) || fail=1
  echo "$t ($SWITCH) rc=$rc $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/$t.log" | tr '\n' ' ')"
done
if [[ -n ${MEMCHECK:-} && -z ${SKIP_TESTS:-} && -x $B/spexd_cuda_tests ]]; then
  env "$SWITCH" compute-sanitizer --tool memcheck --leak-check full "$B/run.sh" spexd_cuda_tests \
    --gtest_filter='*CudaSanitizer*:*EdgeWindows*:*NonFinite*:CudaParity.CaseA*' >"$OUT/memcheck.log" 2>&1
  rc=$?; ((rc == 0)) || fail=1
  echo "memcheck ($SWITCH) rc=$rc $(grep 'ERROR SUMMARY' "$OUT/memcheck.log" | tail -1)"
fi
summary() {  # one line of a frame benchmark's JSON
  python3 - "$1" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
c = d.get("cpu_check", {})
st = d.get("stage_median_seconds", {})
print("median %.5f p90 %.5f | check flux %.3g ivar %.3g rdiag %.3g chi2pix %.3g | %s" % (
    d["median_seconds"], d["p90_seconds"], c.get("flux", -1), c.get("ivar", -1), c.get("rdiag", -1),
    c.get("chi2pix", -1), " ".join("%s %.2f" % (k, 1e3 * v) for k, v in sorted(st.items()))))
PY
}
if [[ -n ${DUMP:-} ]]; then
  for side in base switch; do
    envs=(); [[ $side == switch ]] && envs=("$SWITCH")
    env "${envs[@]}" "$B/run.sh" spexd_cuda_frame_bench --runs 2 --inflight 0 --model \
      --dump "$OUT/dump_$side.bin" --check-bundles "" >"$OUT/dump_$side.log" 2>&1 || fail=1
    sha256sum <"$OUT/dump_$side.bin" | cut -c1-16 >"$OUT/dump_$side.sha"
    echo "dump $side: $(cat "$OUT/dump_$side.sha")"
  done
  if cmp -s "$OUT/dump_base.bin" "$OUT/dump_switch.bin"; then echo "dump: identical"; else echo "dump: DIFFERS"; fi
  rm -f "$OUT"/dump_*.bin
fi
if [[ -n ${NCU_KERNELS:-} ]]; then
  NCU=${NCU:-$(command -v ncu || echo /usr/local/cuda/bin/ncu)}
  nk=$(awk -F'|' '{print NF}' <<<"$NCU_KERNELS")
  for side in base switch; do
    envs=(); [[ $side == switch ]] && envs=("$SWITCH")
    env "${envs[@]}" "$NCU" --kernel-name "regex:$NCU_KERNELS" --launch-skip "$((2 * nk))" \
      --launch-count "$nk" --metrics gpu__time_duration.sum,smsp__inst_executed.sum \
      "$B/run.sh" spexd_cuda_frame_bench --runs 1 --inflight 0 --check-bundles "" \
      >"$OUT/ncu_$side.log" 2>&1 || fail=1
    awk -v side="$side" '/\([0-9]+, [0-9]+, [0-9]+\)x\(/ {name=$1}
      /gpu__time_duration.sum/ {t=$NF " " $(NF-1)}
      /smsp__inst_executed.sum/ {print "ncu " side ": " name " " t ", " $NF " warp instructions"}' "$OUT/ncu_$side.log"
  done
fi
for r in $(seq "$ROUNDS"); do
  for side in base switch; do
    envs=(); [[ $side == switch ]] && envs=("$SWITCH")
    j=$OUT/frame_${side}_$r.json
    if env "${envs[@]}" "$B/run.sh" spexd_cuda_frame_bench --runs 9 --inflight 0 --json "$j" \
        >"$OUT/frame_${side}_$r.log" 2>&1; then
      echo "frame $side round $r: $(summary "$j")"
    else
      fail=1; echo "frame $side round $r FAILED"; tail -5 "$OUT/frame_${side}_$r.log"
    fi
  done
done
if [[ -n ${INFLIGHT:-} ]]; then
  for side in base switch; do
    envs=(); [[ $side == switch ]] && envs=("$SWITCH")
    j=$OUT/inflight_$side.json
    env "${envs[@]}" "$B/run.sh" spexd_cuda_frame_bench --runs 3 --inflight 2 --check-bundles "" \
      --json "$j" >/dev/null 2>&1 || fail=1
    echo "two in flight $side: $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["inflight_frames_per_second"])' "$j" 2>&1) frames/s"
  done
fi
exit $fail
