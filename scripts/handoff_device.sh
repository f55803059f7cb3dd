#!/usr/bin/env bash
# On the GPU machine in one call: the CUDA IPC hand-off against path
# input on a full r frame, both timed in the same run. Starts spexd (CUDA backend) on a
# unix socket, runs spexd-handoff-example (simulates the frame, extracts it by path and
# through regions in and out, checks the spectra bit for bit, the GPU refusals), prints the
# server's stage-by-stage breakdown of both ways, and FAILS unless the hand-off's median
# time per frame is at most MAX_RATIO x the path's. Exit 0 only if every check passed.
#
#   scripts/handoff_device.sh DIR OUT_DIR PSF
#     DIR         where spexd, spexd-handoff-example and the CUDA module are
#                 (scripts/run_program.sh: a build tree, an install prefix or a bundle)
#     OUT_DIR     example.txt (full output), spexd.log, handoff.json, summary.txt
#     PSF         e.g. tests/data/psf-r0-00051060.fits
#   Environment: MAX_RATIO (0.6), REPEAT (10), FIBERS (0,500), WAVE (5760.0,7620.0,0.8),
#   SPEXD_ARGS (extra spexd flags).
#   e.g. scripts/handoff_device.sh build handoff-out tests/data/psf-r0-00051060.fits
set -uo pipefail
[[ $# -eq 3 ]] || { sed -n '2,17p' "$0"; exit 2; }
RUN=$(dirname "$(readlink -f "$0")")/run_program.sh
B=$(cd "$1" && pwd) || exit 2
mkdir -p "$2"
OUT=$(cd "$2" && pwd)
PSF=$(readlink -f "$3")
MAX_RATIO=${MAX_RATIO:-0.6}
REPEAT=${REPEAT:-10}
FIBERS=${FIBERS:-0,500}
WAVE=${WAVE:-5760.0,7620.0,0.8}
TMP=$(mktemp -d -t spexd-handoff-XXXXXX)
SPID=

# shellcheck disable=SC2317  # called by the EXIT trap
cleanup() {
  if [[ -n $SPID ]] && kill -0 "$SPID" 2>/dev/null; then
    kill -TERM "$SPID" 2>/dev/null
    sleep 2
    kill -KILL "$SPID" 2>/dev/null
    wait "$SPID" 2>/dev/null
  fi
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The command line of a program in DIR (scripts/run_program.sh), into the array named $2.
# shellcheck disable=SC2034  # cmd is a nameref
find_exe() {
  local name=$1
  local -n cmd=$2
  "$RUN" "$B" --path "$name" >/dev/null || exit 2
  cmd=("$RUN" "$B" "$name")
}
find_exe spexd SPEXD
find_exe spexd-handoff-example EXAMPLE

if ! "${EXAMPLE[@]}" --probe >/dev/null 2>&1; then
  echo "SKIP: no CUDA device visible" | tee "$OUT/summary.txt"
  exit 77
fi
mkdir -p "$TMP/data/handoff"
cp "$PSF" "$TMP/data/psf.fits"
sock="$TMP/spexd.sock"
# shellcheck disable=SC2086  # SPEXD_ARGS is a list of flags
"${SPEXD[@]}" --listen="unix://$sock" --metrics_listen= --data_roots="$TMP/data" --backend=cuda \
  --log_level=warning ${SPEXD_ARGS:-} >"$OUT/spexd.log" 2>&1 &
SPID=$!
for _ in $(seq 1 300); do
  [[ -S $sock ]] && break
  sleep 0.1
done
status=0
timeout -s KILL 540 "${EXAMPLE[@]}" --server="unix://$sock" --psf="$TMP/data/psf.fits" \
  --data_dir="$TMP/data/handoff" --fibers="$FIBERS" --wave="$WAVE" --repeat="$REPEAT" \
  --max_region_ratio="$MAX_RATIO" --json="$OUT/handoff.json" >"$OUT/example.txt" 2>&1 || status=$?
{
  echo "handoff_device: $(date -u +%FT%TZ), fibres $FIBERS, $REPEAT timed runs each way, max ratio $MAX_RATIO"
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  grep -E '^(FAIL|median|path input|CUDA regions|saved|server-side|  )' "$OUT/example.txt"
  grep -E 'of the path.s time' "$OUT/example.txt"
  echo "checks failed: $(grep -c '^FAIL' "$OUT/example.txt"), example exit status $status"
} | tee "$OUT/summary.txt"
if [[ $status -ne 0 ]]; then
  echo "--- example output (tail)"; tail -20 "$OUT/example.txt"
  echo "--- spexd log (tail)"; tail -20 "$OUT/spexd.log"
fi
exit $status
