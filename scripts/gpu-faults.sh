#!/usr/bin/env bash
# GPU fault runs, for a GPU machine: DIR is where spexd, spexctl, spexd_cuda_fault_tests and
# the CUDA module are (scripts/run_program.sh: a build tree, an install prefix or a bundle).
# Writes logs under $OUT (default ./gpu-faults-out) and prints a
# table last. Needs the test PSF and a preproc frame, in one directory (the server's data
# root: requests name them by path):
#   scripts/gpu-faults.sh DIR PSF.fits FRAME.fits
# 1. the backend's fault tests (out-of-memory, transient fault + retry, a failed patch
#    retried by the backend, sticky error);
# 2. the server with a sticky error: health, metric, log line, in-flight requests;
# 3. the server with an out-of-memory: RESOURCE_EXHAUSTED, then the next request succeeds
#    and the GPU memory it reports is back where a clean server's is;
# 4. compute-sanitizer racecheck on a full-size frame, in fibre slices.
set -uo pipefail
B=$(cd "$1" && pwd)
RUN=$(dirname "$(readlink -f "$0")")/run_program.sh
PSF=$(readlink -f "$2")
FRAME=$(readlink -f "$3")
OUT=${OUT:-$PWD/gpu-faults-out}
mkdir -p "$OUT"
DATA=$(dirname "$FRAME")
declare -a ROWS
row() { ROWS+=("$1|$2|$3"); echo "[row] $1 | $2 | $3" | tee -a "$OUT/summary.txt"; }
T() { timeout -s KILL "$@"; }

# GPU_FAULT_SECTIONS (default 1234) picks the sections to run, to save device time on a rerun.
SECTIONS=${GPU_FAULT_SECTIONS:-1234}
: >"$OUT/summary.txt"
if [[ $SECTIONS == *1* ]]; then
echo "== 1. backend fault tests" | tee -a "$OUT/summary.txt"
T 120 "$RUN" "$B" spexd_cuda_fault_tests >"$OUT/cuda_fault_tests.log" 2>&1
rc=$?
row "backend fault tests (OOM x3 points, transient+retry, patch retry, sticky)" \
    "$(grep -cE '^\[       OK \]' "$OUT/cuda_fault_tests.log") passed" "exit $rc"
grep -E '^\[ *(OK|FAILED|SKIPPED) *\]|\[fault\]|Failure' "$OUT/cuda_fault_tests.log" | tail -20
fi

start_server() {  # $1 = log, rest = extra flags; sets PORT and SPID
  local log=$1
  shift
  "$RUN" "$B" spexd --listen=127.0.0.1:0 --metrics_listen=127.0.0.1:0 --backend=cuda \
    --data_roots="$DATA" "$@" 2>"$log" &
  SPID=$!
  PORT=
  for _ in $(seq 1 300); do
    PORT=$(grep -o '"event":"listening".*"port":[0-9]*' "$log" | grep -o '[0-9]*$' | head -1)
    [[ -n $PORT ]] && break
    sleep 0.1
  done
  # Requests before the CUDA warm-up ends are refused (UNAVAILABLE "warming up").
  for _ in $(seq 1 120); do
    T 10 "$RUN" "$B" spexctl health --server "127.0.0.1:$PORT" >/dev/null 2>&1 && break
    sleep 0.5
  done
}
metrics() {  # $1 = server log; the /metrics text (no curl on the GPU machine)
  local mport
  mport=$(grep -o '"metrics_port":[0-9]*' "$1" | grep -o '[0-9]*$' | head -1)
  [[ -n $mport ]] || { echo "metrics port not found"; return; }
  exec 3<>"/dev/tcp/127.0.0.1/$mport" && printf 'GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n' >&3 &&
    T 10 cat <&3
  exec 3<&-
}
extract() {  # $1 = output; prints the exit status and the first error line
  T 120 "$RUN" "$B" spexctl extract -i "$FRAME" -p "$PSF" -w 6000.0,6100.0,0.8 -n 50 -q \
    --server "127.0.0.1:$PORT" --server-path --retries 1 -o "$1" 2>&1 | head -2
  return "${PIPESTATUS[0]}"
}

if [[ $SECTIONS == *2* ]]; then
echo "== 2. server with a sticky error at request 2" | tee -a "$OUT/summary.txt"
SPEXD_TEST_CUDA_FAULTS=sticky_at_request=2 start_server "$OUT/spexd-sticky.log"
extract "$OUT/sticky-1.fits" >"$OUT/sticky-1.txt"; r1=$?
pids=()
for i in 2 3 4; do
  (extract "$OUT/sticky-$i.fits" >"$OUT/sticky-$i.txt"; echo "exit $?" >>"$OUT/sticky-$i.txt") &
  pids+=($!)
done
wait "${pids[@]}"
sleep 1.5  # the server checks its backends' health, and publishes GPU memory, once a second
health=$(T 30 "$RUN" "$B" spexctl health --server "127.0.0.1:$PORT" 2>&1)
metric=$(metrics "$OUT/spexd-sticky.log" | grep -E '^spexd_backend_healthy|not found')
kill "$SPID"; wait "$SPID" 2>/dev/null
row "sticky: request 1" "exit $r1" "$(cat "$OUT/sticky-1.txt" | head -1)"
for i in 2 3 4; do row "sticky: concurrent request $i" "$(tail -1 "$OUT/sticky-$i.txt")" "$(head -1 "$OUT/sticky-$i.txt")"; done
row "sticky: health afterwards" "$health" ""
row "sticky: metric" "${metric:-metrics port not found}" ""
row "sticky: log lines" "$(grep -c backend_unhealthy "$OUT/spexd-sticky.log") backend_unhealthy" \
    "$(grep -o '"error":"injected sticky[^"]*"' "$OUT/spexd-sticky.log" | head -1)"

fi

if [[ $SECTIONS == *3* ]]; then
echo "== 3. server with an out-of-memory at its first device allocation" | tee -a "$OUT/summary.txt"
SPEXD_TEST_CUDA_FAULTS=oom_at_alloc=1 start_server "$OUT/spexd-oom.log"
extract "$OUT/oom-1.fits" >"$OUT/oom-1.txt"; o1=$?
extract "$OUT/oom-2.fits" >"$OUT/oom-2.txt"; o2=$?
sleep 1.5
gpu_oom=$(T 30 "$RUN" "$B" spexctl psf list --server "127.0.0.1:$PORT" 2>&1 | tail -2)
mem_oom=$(metrics "$OUT/spexd-oom.log" | grep -E '^spexd_gpu_memory_bytes')
kill "$SPID"; wait "$SPID" 2>/dev/null
start_server "$OUT/spexd-clean.log"
extract "$OUT/clean.fits" >"$OUT/clean.txt"; c1=$?
sleep 1.5
gpu_clean=$(T 30 "$RUN" "$B" spexctl psf list --server "127.0.0.1:$PORT" 2>&1 | tail -2)
mem_clean=$(metrics "$OUT/spexd-clean.log" | grep -E '^spexd_gpu_memory_bytes')
kill "$SPID"; wait "$SPID" 2>/dev/null
row "oom: first request" "exit $o1" "$(head -1 "$OUT/oom-1.txt")"
row "oom: next request" "exit $o2" "$(cmp -s "$OUT/oom-2.fits" "$OUT/clean.fits" && echo 'same file as a clean server' || echo 'differs from a clean server (checksum cards?)')"
row "oom: PSF list after (fault / clean)" "$(echo $gpu_oom)" "$(echo $gpu_clean)"
row "oom: GPU memory metric after (fault / clean)" "$(echo $mem_oom)" "$(echo $mem_clean)"
fi

if [[ $SECTIONS == *4* ]]; then
# racecheck slows the kernels by orders of magnitude (100 fibres x 2326 wavelengths did
# not finish in 150 s): the full-size frame is cut into RACE_SLICES, "specmin:nspec:wmin,wmax,dw"
# each, run side by side (racecheck's cost is mostly on the host, which has 16 cores).
RACE_SLICES=${RACE_SLICES:-"0:25:5760.0,5840.0,0.8 25:25:6600.0,6680.0,0.8 250:25:7540.0,7620.0,0.8 475:25:5760.0,5840.0,0.8"}
echo "== 4. compute-sanitizer racecheck on the full-size frame, slices: $RACE_SLICES" | tee -a "$OUT/summary.txt"
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
LD_LIBRARY_PATH=$("$RUN" "$B" --env); export LD_LIBRARY_PATH
SPEXCTL=$("$RUN" "$B" --path spexctl)
rpids=()
i=0
for slice in $RACE_SLICES; do
  IFS=: read -r s n w <<<"$slice"
  (T "${SLICE_SECONDS:-90}" "$CS" --tool racecheck --racecheck-report all \
    "$SPEXCTL" extract --local --backend cuda -i "$FRAME" -p "$PSF" -s "$s" -n "$n" -w "$w" -q \
    -o "$OUT/race-$i.fits" >"$OUT/racecheck-$i.log" 2>&1; echo "exit $?" >"$OUT/racecheck-$i.rc") &
  rpids+=($!)
  i=$((i + 1))
done
wait "${rpids[@]}"
i=0
for slice in $RACE_SLICES; do
  row "racecheck fibres:count:wavelengths $slice" "$(cat "$OUT/racecheck-$i.rc")" \
      "$(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY|hazard' "$OUT/racecheck-$i.log" | tail -1)"
  i=$((i + 1))
done
fi

echo
echo "what | result | detail"
for r in "${ROWS[@]}"; do echo "$r"; done
