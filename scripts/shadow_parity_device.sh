#!/usr/bin/env bash
# Shadow parity on a GPU node: N sampled bundles served by the CUDA backend,
# each re-extracted by the CPU reference and compared (docs/operations.md), with no fault:
# the goal is N = 1000 and 0 drifts. DIR is where spexd, spexctl and the CUDA module are
# (scripts/run_program.sh: a build tree, an install prefix or a bundle):
#   scripts/shadow_parity_device.sh DIR PSF.fits FRAME.fits [N (1000)]
# Every frame is sampled (--shadow_parity_fraction=1) and one of its bundles, picked at
# random, is checked. Frames are short: each request takes one of GRIDS (100 A windows
# spread over the r band, so that the bundles checked differ in rows, trace shapes and
# sky) with EXTRACT_ARGS (default all 500 fibres: 20 bundles to pick from), so that a
# bundle's CPU check takes a fraction of a second on the node's cores
# (--shadow_parity_threads = THREADS, default all but two). Up to CLIENTS (2) requests run
# at a time, and a new one starts only while fewer than two sampled frames are unsettled
# (the check queue's size), so that no check is skipped and the checks (nice 19) are not
# starved by decoding frames whose checks would be skipped anyway.
# With FAULT=1 the server runs with SPEXD_TEST_CUDA_FAULTS=perturb_bundle_flux=BUNDLE
# (default 3, a plan index), and the script expects drifts on that bundle only (the check
# working on the device); use N = 20 or so, and EXTRACT_ARGS="-s 0 -n 100" (4 bundles).
# BACKEND=cpu runs the same flow without a GPU (SPEXD_TEST_CPU_FAULTS for FAULT=1), to
# check the script itself. Stops at N checks or after MAX_SECONDS (540). Prints one "[row]" line last; logs under
# $OUT (default ./shadow-parity-out). Exit 0 when the verdict is PASS.
set -uo pipefail
B=$(cd "$1" && pwd)
RUN=$(dirname "$(readlink -f "$0")")/run_program.sh
PSF=$(readlink -f "$2")
FRAME=$(readlink -f "$3")
N=${4:-1000}
GRIDS=${GRIDS:-5800,5900,0.8 6000,6100,0.8 6150.4,6250.4,0.8 6320,6420,0.8 6500,6600,0.8 \
6681.6,6781.6,0.8 6850,6950,0.8 7040,7140,0.8 7230.4,7330.4,0.8 7440,7540,0.8}
read -r -a GRID_LIST <<<"$GRIDS"
EXTRACT_ARGS=${EXTRACT_ARGS:--s 0 -n 500}
read -r -a EXTRA <<<"$EXTRACT_ARGS"
THREADS=${THREADS:-$(( $(nproc) > 4 ? $(nproc) - 2 : 2 ))}
CLIENTS=${CLIENTS:-2}
FAULT=${FAULT:-0}
BUNDLE=${BUNDLE:-3}
MAX_SECONDS=${MAX_SECONDS:-540}
OUT=${OUT:-$PWD/shadow-parity-out}
mkdir -p "$OUT"
DATA=$(dirname "$FRAME")
[[ $(dirname "$PSF") == "$DATA" ]] || DATA+=",$(dirname "$PSF")"  # requests name both by path
LOG=$OUT/spexd.log
TMP=$(mktemp -d -t spexd-shadow-XXXXXX)
T() { timeout -s KILL "$@"; }

BACKEND=${BACKEND:-cuda}
env_args=()
[[ $FAULT == 1 ]] && env_args=(env "SPEXD_TEST_${BACKEND^^}_FAULTS=perturb_bundle_flux=$BUNDLE")
"${env_args[@]}" "$RUN" "$B" spexd --listen=127.0.0.1:0 --metrics_listen=127.0.0.1:0 --backend="$BACKEND" \
  --data_roots="$DATA" --shadow_parity_fraction=1 --shadow_parity_threads="$THREADS" 2>"$LOG" &
SPID=$!
declare -a SLOT_PID
cleanup() {
  local p
  for p in "${SLOT_PID[@]}"; do [[ -n $p ]] && kill -KILL "$p" 2>/dev/null; done
  kill -TERM "$SPID" 2>/dev/null
  wait "$SPID" 2>/dev/null
  rm -rf "$TMP"
}
trap cleanup EXIT
PORT=
for _ in $(seq 1 300); do
  PORT=$(grep -o '"event":"listening".*"port":[0-9]*' "$LOG" | grep -o '[0-9]*$' | head -1)
  [[ -n $PORT ]] && break
  sleep 0.1
done
MPORT=$(grep -o '"metrics_port":[0-9]*' "$LOG" | grep -o '[0-9]*$' | head -1)
[[ -n $PORT && -n $MPORT ]] || { echo "[row] shadow parity | spexd did not start | FAIL"; tail -20 "$LOG"; exit 1; }
for _ in $(seq 1 120); do  # requests before the CUDA warm-up ends are refused
  T 10 "$RUN" "$B" spexctl health --server "127.0.0.1:$PORT" >/dev/null 2>&1 && break
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
hist_mean() {  # $1 = histogram name: _sum / _count over the series
  awk -v n="$1" '$1 ~ "^"n"_sum" {s += $NF} $1 ~ "^"n"_count" {c += $NF} END {if (c) printf "%.3f", s / c; else printf "-"}' <<<"$2"
}

# One request in slot $1 with grid number $2 (background; its PID goes to SLOT_PID).
send() {
  local slot=$1 grid=${GRID_LIST[$(( $2 % ${#GRID_LIST[@]} ))]}
  T 120 "$RUN" "$B" spexctl extract --server "127.0.0.1:$PORT" --server-path -q --retries 1 \
    -i "$FRAME" -p "$PSF" -w "$grid" "${EXTRA[@]}" -o "$TMP/frame-$slot.fits" \
    >>"$OUT/spexctl.log" 2>&1 || echo x >>"$TMP/failed"
}

t0=$(date +%s)
sent=0 ok=0 drift=0 skipped=0 text=
while :; do
  text=$(scrape)
  ok=$(count ok "$text"); drift=$(count drift "$text"); skipped=$(count skipped "$text")
  (( ok + drift >= N )) && break
  (( $(date +%s) - t0 > MAX_SECONDS )) && { echo "time limit (MAX_SECONDS=$MAX_SECONDS) reached"; break; }
  if [[ -f $TMP/failed ]] && (( $(wc -l <"$TMP/failed") >= 5 && ok + drift + skipped == 0 )); then
    echo "requests fail, none checked: $(tail -1 "$OUT/spexctl.log")"
    break
  fi
  started=0
  for ((s = 0; s < CLIENTS; ++s)); do
    p=${SLOT_PID[$s]:-}
    [[ -n $p ]] && kill -0 "$p" 2>/dev/null && continue
    # Frames whose checks are queued, running or not yet offered: at most 2, the check
    # queue's size, so none is skipped while one check runs and the next frame is served
    # (failed requests and checks that could not run count as settled).
    settled=$((ok + drift + skipped + $(cat "$TMP/failed" 2>/dev/null | wc -l) +
               $(grep -c '"event":"shadow_parity_error"' "$LOG")))
    (( sent - settled < 2 )) || break
    send "$s" "$sent" &
    SLOT_PID[$s]=$!
    sent=$((sent + 1))
    started=1
  done
  (( started )) || sleep 0.1
done
for p in "${SLOT_PID[@]}"; do [[ -n $p ]] && wait "$p" 2>/dev/null; done
SLOT_PID=()
secs=$(( $(date +%s) - t0 ))
failed_requests=$( [[ -f $TMP/failed ]] && wc -l <"$TMP/failed" || echo 0)
grep '"event":"shadow_parity_drift"' "$LOG" >"$OUT/drifts.log"
drift_bundles=$(grep -o '"bundle":[0-9]*' "$OUT/drifts.log" | sort | uniq -c | tr '\n' ' ')
check_s=$(hist_mean spexd_shadow_parity_seconds "$text")
echo "frames sent $sent (failed requests $failed_requests), checks ok $ok, drift $drift, skipped $skipped in ${secs} s (mean check ${check_s} s)"
[[ -s $OUT/drifts.log ]] && { echo "drifts by bundle: $drift_bundles"; head -3 "$OUT/drifts.log"; }
grep -E '"event":"shadow_parity_error"' "$LOG" | head -3
grep '^spexd_shadow_parity_deviation_bucket' <<<"$text" >"$OUT/deviation.txt"
printf '%s\n' "$text" >"$OUT/metrics.txt"  # the last scrape
if [[ $FAULT == 1 ]]; then
  others=$(grep -vc "\"bundle\":$BUNDLE," "$OUT/drifts.log")
  verdict=$([[ $drift -ge 1 && $others -eq 0 && $ok -ge 1 ]] && echo PASS || echo FAIL)
  echo "[row] shadow parity with perturb_bundle_flux=$BUNDLE | $((ok + drift)) checks: $drift drifts (all on bundle $BUNDLE: $([[ $others -eq 0 ]] && echo yes || echo no)), $ok ok | $verdict"
else
  verdict=$([[ $((ok + drift)) -ge $N && $drift -eq 0 ]] && echo PASS || echo FAIL)
  note=
  (( ok + drift < N )) && note=" (fewer than $N: time limit)"
  echo "[row] shadow parity, no fault | $((ok + drift)) sampled bundles checked$note, $drift drifts, $skipped skipped, ${check_s} s a check | $verdict"
fi
[[ $verdict == PASS ]]
