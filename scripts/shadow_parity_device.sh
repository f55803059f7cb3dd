#!/usr/bin/env bash
# Shadow parity on a GPU node (issue 23): N sampled bundles served by the CUDA backend,
# each re-extracted by the CPU reference and compared (docs/operations.md), with no fault:
# the goal is N = 1000 and 0 drifts. Run from a device bundle
# (/work/shared/tools/device-bundle.sh) holding spexd, spexctl and lib/libspexd_cuda.so:
#   scripts/shadow_parity_device.sh BUNDLE_DIR PSF.fits FRAME.fits [N (1000)]
# Every frame is sampled (--shadow_parity_fraction=1). Frames are short (GRID, default
# 100 A) so that a bundle's CPU check takes a fraction of a second on the node's cores
# (--shadow_parity_threads, default all but two); a new frame is sent whenever fewer than
# two checks wait, so nothing is skipped and the GPU is not the bottleneck. With
# FAULT=1 the server runs with SPEXD_TEST_CUDA_FAULTS=perturb_bundle_flux=BUNDLE (default
# 3), and the script expects drifts on that bundle only (the check working on the device).
# Prints one table row last; logs under $OUT (default ./shadow-parity-out).
set -uo pipefail
B=$(cd "$1" && pwd)
PSF=$(readlink -f "$2")
FRAME=$(readlink -f "$3")
N=${4:-1000}
GRID=${GRID:-6000.0,6100.0,0.8}
THREADS=${THREADS:-$(( $(nproc) > 4 ? $(nproc) - 2 : 2 ))}
FAULT=${FAULT:-0}
BUNDLE=${BUNDLE:-3}
OUT=${OUT:-$PWD/shadow-parity-out}
mkdir -p "$OUT"
DATA=$(dirname "$FRAME")
LOG=$OUT/spexd.log
T() { timeout -s KILL "$@"; }

env_args=()
[[ $FAULT == 1 ]] && env_args=(env "SPEXD_TEST_CUDA_FAULTS=perturb_bundle_flux=$BUNDLE")
"${env_args[@]}" "$B/run.sh" spexd --listen=127.0.0.1:0 --metrics_listen=127.0.0.1:0 --backend=cuda \
  --data_roots="$DATA" --shadow_parity_fraction=1 --shadow_parity_threads="$THREADS" 2>"$LOG" &
SPID=$!
trap 'kill -TERM $SPID 2>/dev/null; wait $SPID 2>/dev/null' EXIT
PORT=
for _ in $(seq 1 300); do
  PORT=$(grep -o '"event":"listening".*"port":[0-9]*' "$LOG" | grep -o '[0-9]*$' | head -1)
  [[ -n $PORT ]] && break
  sleep 0.1
done
MPORT=$(grep -o '"metrics_port":[0-9]*' "$LOG" | grep -o '[0-9]*$' | head -1)
[[ -n $PORT && -n $MPORT ]] || { echo "spexd did not start"; tail -20 "$LOG"; exit 1; }
for _ in $(seq 1 120); do
  T 10 "$B/run.sh" spexctl health --server "127.0.0.1:$PORT" >/dev/null 2>&1 && break
  sleep 0.5
done
scrape() {  # the /metrics text (no curl on the GPU machine)
  exec 3<>"/dev/tcp/127.0.0.1/$MPORT" && printf 'GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n' >&3 &&
    T 10 cat <&3
  exec 3<&-
}
count() {  # $1 = result: the sum over the series of spexd_shadow_parity_checks_total
  awk -v r="result=\"$1\"" '/^spexd_shadow_parity_checks_total\{/ && index($0, r) {s += $NF} END {printf "%d", s}' <<<"$2"
}
queue() { awk '/^spexd_shadow_parity_queue /{printf "%d", $NF}' <<<"$1"; }

t0=$(date +%s)
sent=0
failed_requests=0
text=
while :; do
  text=$(scrape)
  ok=$(count ok "$text"); drift=$(count drift "$text"); skipped=$(count skipped "$text")
  done_checks=$((ok + drift))
  (( done_checks >= N )) && break
  if (( sent - done_checks - skipped < 2 )) && (( sent < N + skipped + 50 )); then
    T 120 "$B/run.sh" spexctl extract --server "127.0.0.1:$PORT" --server-path -q --retries 1 \
      -i "$FRAME" -p "$PSF" -w "$GRID" -o "$OUT/frame.fits" >>"$OUT/spexctl.log" 2>&1 ||
      failed_requests=$((failed_requests + 1))
    sent=$((sent + 1))
  else
    sleep 0.1
  fi
  if (( $(date +%s) - t0 > ${MAX_SECONDS:-540} )); then
    echo "time limit (MAX_SECONDS=${MAX_SECONDS:-540}) reached"
    break
  fi
done
secs=$(( $(date +%s) - t0 ))
grep '"event":"shadow_parity_drift"' "$LOG" >"$OUT/drifts.log"
drift_bundles=$(grep -o '"bundle":[0-9]*' "$OUT/drifts.log" | sort | uniq -c | tr '\n' ' ')
echo "frames sent $sent (failed requests $failed_requests), checks ok $ok, drift $drift, skipped $skipped in ${secs} s"
[[ -s $OUT/drifts.log ]] && { echo "drifts by bundle: $drift_bundles"; head -3 "$OUT/drifts.log"; }
grep -E '"event":"shadow_parity_error"' "$LOG" | head -3
deviation=$(grep '^spexd_shadow_parity_deviation_bucket' <<<"$text" | tr '\n' ' ')
echo "deviation histogram: $deviation" >"$OUT/deviation.txt"
if [[ $FAULT == 1 ]]; then
  others=$(grep -v "\"bundle\":$BUNDLE," "$OUT/drifts.log" | wc -l)
  verdict=$([[ $drift -ge 1 && $others -eq 0 ]] && echo PASS || echo FAIL)
  echo "[row] shadow parity with perturb_bundle_flux=$BUNDLE | $((ok + drift)) checks, $drift drifts (all on bundle $BUNDLE: $([[ $others -eq 0 ]] && echo yes || echo no)) | $verdict"
else
  verdict=$([[ $((ok + drift)) -ge $N && $drift -eq 0 ]] && echo PASS || echo FAIL)
  echo "[row] shadow parity, no fault | $((ok + drift)) sampled bundles checked, $drift drifts, $skipped skipped | $verdict"
fi
[[ $verdict == PASS ]]
