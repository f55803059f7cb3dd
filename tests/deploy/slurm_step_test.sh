#!/usr/bin/env bash
# deploy/slurm/spexd-extract.sbatch without Slurm: `bash -n`, then a dry run of its per-node
# step (server + workers) on loopback, as node 1 of 2 (it must take lines 2 and 4 of the
# frame list only; outputs bit-identical to a local extraction; spexd drained, exit 0),
# then the job-end path: SIGTERM to the step mid-run stops the workers and spexd still
# drains and exits 0. It runs everywhere (no daemons needed) and covers what a one-node
# Slurm cannot: a second node's share of the list. tests/deploy/slurm_test.sh submits the
# script to a real Slurm; neither runs the Apptainer variant.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
BUILD_DIR=${BUILD_DIR:-build}
source tests/deploy/lib.sh
need_binaries
SCRIPT=deploy/slurm/spexd-extract.sbatch
bash -n "$SCRIPT"
echo "bash -n: ok"

WORK=$(mktemp -d -t spexd-slurm-XXXXXX)
STEP=
cleanup() {
  if [[ -n $STEP ]]; then kill -TERM "$STEP" 2>/dev/null || true; wait "$STEP" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT
make_case "$WORK/data" 0,25 11
"$SPEXCTL" extract --local -q -i "$WORK/data/preproc-11.fits" -p "$WORK/data/psf.fits" \
  -o "$WORK/ref.fits" -w "$CASE_WAVELENGTH" -s 0 -n 25 >/dev/null
bindir=$WORK/bin
mkdir -p "$bindir"
ln -s "$SPEXD" "$bindir/spexd"
ln -s "$SPEXCTL" "$bindir/spexctl"
run_step() {  # run_step OUT_DIR FRAME_LIST NODEID NNODES (in a subshell: it execs the step)
  exec env SPEXD_BIN="$bindir" FRAME_LIST="$2" OUT_DIR="$1" DATA_ROOTS="$WORK/data" \
    EXTRACT_ARGS="-w $CASE_WAVELENGTH -s 0 -n 25" WORKERS=2 SPEXD_PORT="$(port_pair)" \
    DRAIN_SECONDS=20 SLURM_NODEID="$3" SLURM_NNODES="$4" SLURM_GPUS_ON_NODE=1 \
    bash "$SCRIPT" node
}

say "node step, node 1 of 2, four frames in the list"
for i in 1 2 3 4; do echo "$WORK/data/preproc-11.fits $WORK/data/psf.fits $WORK/out1/frame-$i.fits"; done \
  >"$WORK/data/frames.txt"
run_step "$WORK/out1" "$WORK/data/frames.txt" 1 2 | tee "$WORK/step1.log"
[[ ! -e $WORK/out1/frame-1.fits && ! -e $WORK/out1/frame-3.fits ]] || fail "node 1 took node 0's frames"
for i in 2 4; do
  python3 tests/deploy/fits_compare.py "$WORK/out1/frame-$i.fits" "$WORK/ref.fits" FLUX IVAR MASK ||
    fail "frame $i differs from the local extraction"
done
grep -q "spexd exited with 0" "$WORK/step1.log" || fail "spexd did not exit 0"
grep -q '"event":"drained"' "$WORK/out1/spexd-node1.log" || fail "spexd did not drain"

say "job end: SIGTERM to the step while it works"
for i in 1 2 3 4 5 6 7 8; do echo "$WORK/data/preproc-11.fits $WORK/data/psf.fits $WORK/out2/frame-$i.fits"; done \
  >"$WORK/data/frames2.txt"
run_step "$WORK/out2" "$WORK/data/frames2.txt" 0 1 >"$WORK/step2.log" 2>&1 &
STEP=$!
for _ in $(seq 1 300); do [[ -e $WORK/out2/frame-1.fits ]] && break; sleep 0.2; done
[[ -e $WORK/out2/frame-1.fits ]] || { cat "$WORK/step2.log"; fail "no frame done before the signal"; }
kill -TERM "$STEP"
rc=0
wait "$STEP" || rc=$?
STEP=
cat "$WORK/step2.log"
[[ $rc -ne 0 ]] || fail "the step reported success although frames were left undone"
grep -q "spexd exited with 0" "$WORK/step2.log" || fail "spexd did not exit 0 after SIGTERM"
grep -q '"event":"drained"' "$WORK/out2/spexd-node0.log" || fail "spexd did not drain"
done_frames=$(ls "$WORK"/out2/frame-*.fits | wc -l)
echo "frames done before the job end: $done_frames of 8"
say "slurm_step_test: PASS (the Apptainer variant not run)"
