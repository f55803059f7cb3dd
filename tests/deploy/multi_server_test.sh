#!/usr/bin/env bash
# Several servers behind one client target: three spexd on loopback, pipeline workers
# (spexctl) pointed at `ipv4:127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3` (round robin). Each
# server's /metrics must show its share of the frames. One server is killed (SIGKILL) while
# it extracts; the clients restart those frames on the others and every frame arrives,
# bit-identical to a local extraction of the same input.
#   tests/deploy/multi_server_test.sh        (BUILD_DIR=build; run by ctest)
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
BUILD_DIR=${BUILD_DIR:-build}
source tests/deploy/lib.sh
need_binaries

WORKERS=3
FRAMES_PER_WORKER=4
WORK=$(mktemp -d -t spexd-multi-XXXXXX)
PIDS=()
cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT

say "inputs: three simulated frames (25 fibres) and their local extractions"
for seed in 1 2 3; do
  make_case "$WORK/data" 0,25 "$seed"
  "$SPEXCTL" extract --local -q --threads 1 -i "$WORK/data/preproc-$seed.fits" -p "$WORK/data/psf.fits" \
    -o "$WORK/ref-$seed.fits" -w "$CASE_WAVELENGTH" -s 0 -n 25 >/dev/null
done

say "three spexd (CPU backend, one thread each)"
ADDRS=()
MADDRS=()
for i in 0 1 2; do
  port=$(free_port)
  mport=$(free_port)
  "$SPEXD" --listen="127.0.0.1:$port" --metrics_listen="127.0.0.1:$mport" --backend=cpu \
    --cpu_threads=1 --data_roots="$WORK/data" --drain_seconds=5 2>"$WORK/spexd-$i.log" &
  PIDS+=($!)
  disown $!  # no job-control notice when it is killed
  ADDRS+=("127.0.0.1:$port")
  MADDRS+=("127.0.0.1:$mport")
done
for i in 0 1 2; do
  wait_serving "${ADDRS[$i]}" 30 || { cat "$WORK/spexd-$i.log"; fail "server $i not serving"; }
done
TARGET="ipv4:$(IFS=,; echo "${ADDRS[*]}")"
echo "target $TARGET"

ok_frames() {  # ExtractFrame calls that finished OK on server $1 (its /metrics)
  local v
  v=$(metric "$(scrape "${MADDRS[$1]}")" 'spexd_requests_total{code="OK",rpc="ExtractFrame"}')
  echo "${v:-0}"
}
inflight() {
  local v
  v=$(metric "$(scrape "${MADDRS[$1]}")" 'spexd_inflight_requests')
  echo "${v:-0}"
}

say "$WORKERS workers x $FRAMES_PER_WORKER frames through the one target"
worker() {  # each frame with its own spexctl process, as a pipeline would run them
  local w=$1 k seed
  for ((k = 0; k < FRAMES_PER_WORKER; ++k)); do
    seed=$(((w + k) % 3 + 1))
    "$SPEXCTL" extract --server "$TARGET" --server-path -q --retries 6 \
      -i "$WORK/data/preproc-$seed.fits" -p "$WORK/data/psf.fits" \
      -o "$WORK/out-$w-$k.fits" -w "$CASE_WAVELENGTH" -s 0 -n 25 >"$WORK/client-$w-$k.log" 2>&1 ||
      { echo "worker $w frame $k failed:"; cat "$WORK/client-$w-$k.log"; return 1; }
    echo "$seed" >"$WORK/out-$w-$k.seed"
  done
}
CLIENTS=()
for ((w = 0; w < WORKERS; ++w)); do
  worker "$w" &
  CLIENTS+=($!)
done

# Kill server 1 once it has finished a frame and is working on another.
VICTIM=1
killed_after=
for _ in $(seq 1 600); do  # bounded: 120 s
  done_v=$(ok_frames $VICTIM)
  if [[ $done_v -ge 1 && $(inflight $VICTIM) -ge 1 ]]; then
    killed_after=$done_v
    kill -KILL "${PIDS[$VICTIM]}"
    say "killed server $VICTIM (SIGKILL) with a frame in flight, after $killed_after frames OK"
    break
  fi
  sleep 0.2
done
[[ -n $killed_after ]] || fail "server $VICTIM never had a frame in flight after finishing one"

failed=0
for c in "${CLIENTS[@]}"; do wait "$c" || failed=1; done
[[ $failed -eq 0 ]] || fail "a worker lost a frame"

say "every frame arrived and equals the local extraction"
n=0
for ((w = 0; w < WORKERS; ++w)); do
  for ((k = 0; k < FRAMES_PER_WORKER; ++k)); do
    seed=$(cat "$WORK/out-$w-$k.seed")
    python3 tests/deploy/fits_compare.py "$WORK/out-$w-$k.fits" "$WORK/ref-$seed.fits" \
      FLUX IVAR MASK >/dev/null || fail "frame $w-$k differs from the local extraction"
    n=$((n + 1))
  done
done
total=$((WORKERS * FRAMES_PER_WORKER))
[[ $n -eq $total ]] || fail "$n of $total frames"

share0=$(ok_frames 0)
share2=$(ok_frames 2)
echo "frames per server (ExtractFrame OK in each /metrics): server0 $share0, server1 $killed_after (then killed), server2 $share2"
restarted=$(cat "$WORK"/client-*.log | grep -c 'restarting the frame' || true)
[[ $share0 -ge 1 && $share2 -ge 1 && $killed_after -ge 1 ]] || fail "a server took no frames"
[[ $((share0 + share2 + killed_after)) -ge $total ]] || fail "the servers' counts miss frames"
say "multi_server_test: PASS ($total frames, every server took a share, one killed mid-frame; $restarted frames restarted by their client)"
