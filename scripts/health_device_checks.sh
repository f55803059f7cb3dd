#!/usr/bin/env bash
# Every GPU check of the numerical health and shadow parity in one run:
#   1. spexd_cuda_tests --gtest_filter='*Health*:*Perturb*': the CUDA condition estimates
#      and health numbers against the CPU backend's, and the injected 1e-6 perturbation
#      (SPEXD_TEST_CUDA_FAULTS=perturb_bundle_flux) flagged by the parity comparison;
#   2. the same fault through a served spexd: the shadow check flags it, on that bundle
#      only, in the metric and the log (scripts/shadow_parity_device.sh FAULT=1);
#   3. served throughput, spexd_rpc_bench --backend cuda at --shadow-parity-fraction 0 and
#      0.01, alternated (0, 0.01, 0, 0.01) on one simulated r frame: goal within 2 %;
#   4. shadow parity without a fault over PARITY_N (1000) sampled bundles: goal 0 drifts
#      (scripts/shadow_parity_device.sh), with the time left (it runs last).
#
#   scripts/health_device_checks.sh DIR DATA_DIR
#     DIR         where spexd, spexctl, spexd-sim, spexd_cuda_tests, spexd_rpc_bench,
#                 spexd_health_summary_bench and the CUDA module are (scripts/run_program.sh:
#                 a build tree configured with -DSPEXD_BUILD_TESTS=ON
#                 -DSPEXD_BUILD_BENCHMARKS=ON, an install prefix, or a bundle)
#     DATA_DIR    a writable directory: the r PSF (PSF, default DATA_DIR/psf-r0-00051060.fits,
#                 else tests/data's) and the simulated 500-fibre r frame (FRAME, default
#                 DATA_DIR/preproc-r-500.fits, written with spexd-sim when absent; 136 MB)
#   Environment: OUT (logs; default ./health-device-out), SECTIONS (1234), PARITY_N (1000),
#   BENCH_REPEATS (10 frames per client, 2 clients in flight), TOTAL_SECONDS (570: the
#   parity run gets what is left of it).
# Prints a table last ("[row] check | result | verdict"); exit 0 when every section passed.
set -uo pipefail
[[ $# -eq 2 ]] || { sed -n '2,27p' "$0"; exit 2; }
START=$(date +%s)
B=$(cd "$1" && pwd) || exit 2
mkdir -p "$2" && DATA=$(cd "$2" && pwd) || exit 2
HERE=$(cd "$(dirname "$0")" && pwd)
RUN=$HERE/run_program.sh
OUT=${OUT:-$PWD/health-device-out}
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd)
SECTIONS=${SECTIONS:-1234}
PARITY_N=${PARITY_N:-1000}
BENCH_REPEATS=${BENCH_REPEATS:-10}
TOTAL_SECONDS=${TOTAL_SECONDS:-570}
PSF=${PSF:-$DATA/psf-r0-00051060.fits}
[[ -f $PSF ]] || PSF=$HERE/../tests/data/psf-r0-00051060.fits
PSF=$(readlink -f "$PSF")
FRAME=${FRAME:-$DATA/preproc-r-500.fits}
T() { timeout -s KILL "$@"; }
declare -a ROWS
FAILED=0
row() {  # check | result | PASS/FAIL
  ROWS+=("[row] $1 | $2 | $3")
  echo "[row] $1 | $2 | $3" >>"$OUT/summary.txt"
  [[ $3 == FAIL ]] && FAILED=1
  return 0
}
: >"$OUT/summary.txt"
{ echo "host $(uname -n), $(nproc) cpus, $(date -u +%FT%TZ)"
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  grep -h git_sha "$B"/MANIFEST.txt 2>/dev/null | head -1; } | tee -a "$OUT/summary.txt"

if [[ ! -f $FRAME && ( $SECTIONS == *2* || $SECTIONS == *3* || $SECTIONS == *4* ) ]]; then
  echo "== simulating $FRAME (500 fibres, r grid, seed 1)"
  T 300 "$RUN" "$B" spexd-sim --psf="$PSF" --out="$FRAME" --fibers=0,500 \
    --wavelength=5760.0,7620.0,0.8 --seed=1 >"$OUT/spexd-sim.log" 2>&1 ||
    { echo "spexd-sim failed: $(tail -2 "$OUT/spexd-sim.log")"; exit 1; }
fi
FRAME=$(readlink -f "$FRAME")

if [[ $SECTIONS == *1* ]]; then
  echo "== 1. spexd_cuda_tests '*Health*:*Perturb*'"
  T 240 "$RUN" "$B" spexd_cuda_tests --gtest_filter='*Health*:*Perturb*' >"$OUT/cuda_tests.log" 2>&1
  rc=$?
  passed=$(grep -cE '^\[ +OK \]' "$OUT/cuda_tests.log")
  failed=$(grep -cE '^\[ +FAILED \] [A-Za-z]' "$OUT/cuda_tests.log")
  skipped=$(grep -cE '^\[ +SKIPPED \] [A-Za-z]' "$OUT/cuda_tests.log")
  grep -E '^\[health\]|Failure|^\[ +(OK|FAILED|SKIPPED) +\]' "$OUT/cuda_tests.log" | head -12
  row "spexd_cuda_tests *Health*:*Perturb*" "$passed passed, $failed failed, $skipped skipped (exit $rc)" \
    "$([[ $rc == 0 && $passed -ge 2 && $failed == 0 && $skipped == 0 ]] && echo PASS || echo FAIL)"
fi

if [[ $SECTIONS == *2* ]]; then
  echo "== 2. served fault: perturb_bundle_flux=3 flagged by the shadow check"
  OUT=$OUT/fault FAULT=1 BUNDLE=3 EXTRACT_ARGS="-s 0 -n 100" MAX_SECONDS=90 \
    "$HERE/shadow_parity_device.sh" "$B" "$PSF" "$FRAME" 20 >"$OUT/fault.log" 2>&1
  rc=$?
  line=$(grep '^\[row\]' "$OUT/fault.log" | tail -1)
  result=$(cut -d'|' -f2 <<<"$line" | sed 's/^ *//; s/ *$//')
  log_lines=$(grep -c '"event":"shadow_parity_drift"' "$OUT/fault/spexd.log" 2>/dev/null)
  row "served fault flagged (metric + log)" "${result:-no result}; $log_lines drift log lines" \
    "$([[ $rc == 0 && ${log_lines:-0} -ge 1 ]] && echo PASS || echo FAIL)"
  # The health metrics on a GPU server, with the worker's GPU ordinal as their gpu label.
  missing=
  for family in spexd_patch_condition_bucket spexd_patch_problems_total spexd_frame_mask_bins_total \
      spexd_frame_chi2pix_median_bucket spexd_frame_worst_condition_bucket spexd_shadow_parity_checks_total \
      spexd_shadow_parity_deviation_bucket; do
    grep -qE "^$family\{.*backend=\"cuda\".*gpu=\"[0-9]+\"|^$family\{.*gpu=\"[0-9]+\".*backend=\"cuda\"" \
      "$OUT/fault/metrics.txt" 2>/dev/null || missing+=" $family"
  done
  for family in spexd_shadow_parity_queue spexd_shadow_parity_seconds_count; do
    grep -q "^$family" "$OUT/fault/metrics.txt" 2>/dev/null || missing+=" $family"
  done
  row "health metrics on the GPU server (backend=cuda, gpu=N)" "${missing:+missing:}${missing:-all 9 families}" \
    "$([[ -z $missing ]] && echo PASS || echo FAIL)"
fi

if [[ $SECTIONS == *3* ]]; then
  echo "== 3. served throughput, shadow parity fraction 0 vs 0.01"
  declare -A STEADY
  for run in a b; do
    for f in 0 0.01; do
      json=$OUT/rpc_bench_${f}_$run.json
      T 200 "$RUN" "$B" spexd_rpc_bench --backend cuda --fibers 500 --repeats "$BENCH_REPEATS" \
        --inflight 2 --frame "$FRAME" --psf "$PSF" --shadow-parity-fraction "$f" \
        >"$json" 2>"$OUT/rpc_bench_${f}_$run.log"
      s=$(grep -o '"steady_per_frame_inflight_s":[0-9.]*' "$json" | cut -d: -f2)
      sp=$(grep -o '"shadow_parity":{[^}]*}' "$json")
      echo "fraction $f run $run: steady ${s:-?} s/frame; $sp" | tee -a "$OUT/summary.txt"
      if [[ -n $s ]]; then
        STEADY[$f]="${STEADY[$f]:-} $s"
      else
        bench_failed=1
        tail -3 "$OUT/rpc_bench_${f}_$run.log"
      fi
    done
  done
  # The health summary's host cost per r frame (both server paths), against the frame time.
  T 60 "$RUN" "$B" spexd_health_summary_bench >"$OUT/health_summary_bench.json" 2>&1
  median() { grep -o "\"$1\":{\"median\":[0-9.e-]*" "$OUT/health_summary_bench.json" | grep -o '[0-9.e-]*$'; }
  hs_a=$(awk -v x="$(median assembled_s)" 'BEGIN { if (x != "") printf "%.2f", 1e3 * x }')
  hs_s=$(awk -v x="$(median streamed_s)" 'BEGIN { if (x != "") printf "%.2f", 1e3 * x }')
  if [[ ${bench_failed:-0} == 1 ]]; then
    row "served throughput, fraction 0.01 vs 0" "a run gave no result (rpc_bench_*.log)" FAIL
  else
    read -r m0 m1 pct < <(awk -v a="${STEADY[0]}" -v b="${STEADY[0.01]}" 'BEGIN {
      n = split(a, x, " "); for (i = 1; i <= n; ++i) s0 += x[i]; s0 /= n
      n = split(b, y, " "); for (i = 1; i <= n; ++i) s1 += y[i]; s1 /= n
      printf "%.4f %.4f %+.2f\n", s0, s1, 100 * (s1 / s0 - 1) }')
    row "served throughput, fraction 0.01 vs 0 (rpc_bench, 2 in flight, means of 2 runs)" \
      "$m0 vs $m1 s/frame: ${pct} %" "$(awk -v p="$pct" 'BEGIN { print (p + 0 <= 2.0) ? "PASS" : "FAIL" }')"
    row "health summary, host ms per r frame (spexd_health_summary_bench; streaming task, off the GPU's path)" \
      "assembled frame ${hs_a:-?} ms, streamed frame ${hs_s:-?} ms; $(awk -v a="${hs_a:-0}" -v s="${hs_s:-0}" \
      -v f="$m0" 'BEGIN { printf "%.2f %% / %.2f %% of the frame time", a / 10 / f, s / 10 / f }')" INFO
  fi
fi

if [[ $SECTIONS == *4* ]]; then
  left=$(( TOTAL_SECONDS - ($(date +%s) - START) - 45 ))  # server start and stop
  echo "== 4. shadow parity, no fault: $PARITY_N sampled bundles (at most $left s)"
  if (( left < 60 )); then
    row "shadow parity, no fault" "not run: $left s left (rerun with SECTIONS=4)" FAIL
  else
    OUT=$OUT/parity MAX_SECONDS=$left "$HERE/shadow_parity_device.sh" "$B" "$PSF" "$FRAME" \
      "$PARITY_N" >"$OUT/parity.log" 2>&1
    rc=$?
    line=$(grep '^\[row\]' "$OUT/parity.log" | tail -1)
    grep -E '^(frames sent|drifts by bundle)' "$OUT/parity.log"
    result=$(cut -d'|' -f2,3 <<<"$line" | sed 's/^ *//; s/ *$//')
    row "shadow parity, no fault ($PARITY_N bundles, 0 drifts)" "${result:-no result}" \
      "$([[ $rc == 0 ]] && echo PASS || echo FAIL)"
  fi
fi

echo "== numerical health device checks ($(( $(date +%s) - START )) s; logs in $OUT)"
printf '%s\n' "${ROWS[@]}"
exit "$FAILED"
