#!/usr/bin/env bash
# The CUDA IPC hand-off between two processes on one GPU: starts spexd with
# the CUDA backend on a unix socket, runs the producer example (examples/cuda_handoff/)
# on a small frame, and passes when the example's checks pass (bit-identical results,
# refusals). Exits 77 (ctest: skipped) without a GPU.
#   cuda_handoff_test.sh SPEXD EXAMPLE PSF [example flags...]
set -euo pipefail
spexd=$1 example=$2 psf=$3
shift 3
if ! "$example" --probe; then
  echo "SKIP: no CUDA device visible (the hand-off test needs a GPU shared by two processes)"
  exit 77
fi
work=$(mktemp -d)
trap 'kill "$server_pid" 2>/dev/null; wait "$server_pid" 2>/dev/null; rm -rf "$work"' EXIT
mkdir -p "$work/data/handoff"
cp "$psf" "$work/data/psf.fits"
sock="$work/spexd.sock"
"$spexd" --listen="unix://$sock" --metrics_listen= --data_roots="$work/data" --backend=cuda \
  --log_level=warning > "$work/spexd.log" 2>&1 &
server_pid=$!
for _ in $(seq 1 300); do
  [[ -S $sock ]] && break
  sleep 0.1
done
# The example waits for the server's warm-up (health SERVING) itself.
status=0
timeout -s KILL 500 "$example" --server="unix://$sock" --psf="$work/data/psf.fits" \
  --data_dir="$work/data/handoff" --fibers=0,50 --wave=5760,6760,0.8 --repeat=2 "$@" || status=$?
if [[ $status -ne 0 ]]; then
  echo "--- spexd log"; tail -50 "$work/spexd.log"
fi
exit $status
