#!/usr/bin/env bash
# GPU fault runs (issue 10), for the GPU machine: run from a device bundle
# (/work/shared/tools/device-bundle.sh) that holds spexd, spexctl, spexd_cuda_tests and
# lib/libspexd_cuda.so. Writes logs under $OUT (default ./gpu-faults-out) and prints a
# table last. Needs the test PSF and a preproc frame, in one directory (the server's data
# root: requests name them by path):
#   scripts/gpu-faults.sh BUNDLE_DIR PSF.fits FRAME.fits
# 1. the backend's fault tests (out-of-memory, transient fault + retry, sticky error);
# 2. the server with a sticky error: health, metric, log line, in-flight requests;
# 3. the server with an out-of-memory: RESOURCE_EXHAUSTED, then the next request succeeds
#    and the GPU memory it reports is back where a clean server's is;
# 4. compute-sanitizer racecheck on a full-size frame, in fibre slices.
set -uo pipefail
B=$(cd "$1" && pwd)
PSF=$(readlink -f "$2")
FRAME=$(readlink -f "$3")
OUT=${OUT:-$PWD/gpu-faults-out}
mkdir -p "$OUT"
DATA=$(dirname "$FRAME")
declare -a ROWS
row() { ROWS+=("$1|$2|$3"); echo "[row] $1 | $2 | $3" | tee -a "$OUT/summary.txt"; }
T() { timeout -s KILL "$@"; }

echo "== 1. backend fault tests" | tee "$OUT/summary.txt"
T 120 "$B/run.sh" spexd_cuda_tests --gtest_filter='CudaFault*' >"$OUT/cuda_fault_tests.log" 2>&1
rc=$?
row "backend fault tests (OOM x3 points, transient+retry, sticky)" \
    "$(grep -cE '^\[       OK \]' "$OUT/cuda_fault_tests.log") passed" "exit $rc"
grep -E '^\[ *(OK|FAILED|SKIPPED) *\]|\[fault\]|Failure' "$OUT/cuda_fault_tests.log" | tail -20

start_server() {  # $1 = log, rest = extra flags; sets PORT and SPID
  local log=$1
  shift
  "$B/run.sh" spexd --listen=127.0.0.1:0 --metrics_listen=127.0.0.1:0 --backend=cuda \
    --data_roots="$DATA" "$@" 2>"$log" &
  SPID=$!
  PORT=
  for _ in $(seq 1 300); do
    PORT=$(grep -o '"event":"listening".*"port":[0-9]*' "$log" | grep -o '[0-9]*$' | head -1)
    [[ -n $PORT ]] && break
    sleep 0.1
  done
}
extract() {  # $1 = output; prints the exit status and the first error line
  T 120 "$B/run.sh" spexctl extract -i "$FRAME" -p "$PSF" -w 6000.0,6100.0,0.8 -n 50 -q \
    --server "127.0.0.1:$PORT" --server-path --retries 1 -o "$1" 2>&1 | head -2
  return "${PIPESTATUS[0]}"
}

echo "== 2. server with a sticky error at request 2" | tee -a "$OUT/summary.txt"
SPEXD_TEST_CUDA_FAULTS=sticky_at_request=2 start_server "$OUT/spexd-sticky.log"
extract "$OUT/sticky-1.fits" >"$OUT/sticky-1.txt"; r1=$?
pids=()
for i in 2 3 4; do
  (extract "$OUT/sticky-$i.fits" >"$OUT/sticky-$i.txt"; echo "exit $?" >>"$OUT/sticky-$i.txt") &
  pids+=($!)
done
wait "${pids[@]}"
health=$(T 30 "$B/run.sh" spexctl health --server "127.0.0.1:$PORT" 2>&1)
MPORT=$(grep -o '"metrics_port":[0-9]*' "$OUT/spexd-sticky.log" | grep -o '[0-9]*$' | head -1)
metric=$( [[ -n $MPORT ]] && T 10 curl -s "http://127.0.0.1:$MPORT/metrics" | grep '^spexd_backend_healthy' )
kill "$SPID"; wait "$SPID" 2>/dev/null
row "sticky: request 1" "exit $r1" "$(cat "$OUT/sticky-1.txt" | head -1)"
for i in 2 3 4; do row "sticky: concurrent request $i" "$(tail -1 "$OUT/sticky-$i.txt")" "$(head -1 "$OUT/sticky-$i.txt")"; done
row "sticky: health afterwards" "$health" ""
row "sticky: metric" "${metric:-metrics port not found}" ""
row "sticky: log lines" "$(grep -c backend_unhealthy "$OUT/spexd-sticky.log") backend_unhealthy" \
    "$(grep -o '"error":"injected sticky[^"]*"' "$OUT/spexd-sticky.log" | head -1)"

echo "== 3. server with an out-of-memory at its first device allocation" | tee -a "$OUT/summary.txt"
SPEXD_TEST_CUDA_FAULTS=oom_at_alloc=1 start_server "$OUT/spexd-oom.log"
extract "$OUT/oom-1.fits" >"$OUT/oom-1.txt"; o1=$?
extract "$OUT/oom-2.fits" >"$OUT/oom-2.txt"; o2=$?
gpu_oom=$(T 30 "$B/run.sh" spexctl list --server "127.0.0.1:$PORT" 2>&1 | tail -3)
kill "$SPID"; wait "$SPID" 2>/dev/null
start_server "$OUT/spexd-clean.log"
extract "$OUT/clean.fits" >"$OUT/clean.txt"; c1=$?
gpu_clean=$(T 30 "$B/run.sh" spexctl list --server "127.0.0.1:$PORT" 2>&1 | tail -3)
kill "$SPID"; wait "$SPID" 2>/dev/null
row "oom: first request" "exit $o1" "$(head -1 "$OUT/oom-1.txt")"
row "oom: next request" "exit $o2" "$(cmp -s "$OUT/oom-2.fits" "$OUT/clean.fits" && echo 'same file as a clean server' || echo 'differs from a clean server (checksum cards?)')"
row "oom: PSF list after (fault / clean)" "$(echo $gpu_oom)" "$(echo $gpu_clean)"

echo "== 4. compute-sanitizer racecheck, full-size frame in slices of 100 fibres" | tee -a "$OUT/summary.txt"
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
export LD_LIBRARY_PATH=$("$B/run.sh" --env)
for s in 0 100 200 300 400; do
  T "${SLICE_SECONDS:-50}" "$CS" --tool racecheck --racecheck-report all \
    "$B/spexctl" extract --local --backend cuda -i "$FRAME" -p "$PSF" -s "$s" -n 100 -q \
    -o "$OUT/race-$s.fits" >"$OUT/racecheck-$s.log" 2>&1
  rc=$?
  row "racecheck fibres $s-$((s + 99)) (all wavelengths)" "exit $rc" \
      "$(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY|hazard' "$OUT/racecheck-$s.log" | tail -1)"
done

echo
echo "what | result | detail"
for r in "${ROWS[@]}"; do echo "$r"; done
