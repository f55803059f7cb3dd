#!/usr/bin/env bash
# deploy/slurm/spexd-extract.sbatch under a real Slurm: the test starts a one-node cluster
# of its own (munged, slurmctld, slurmd: tests/deploy/slurm_cluster.sh), submits the
# unmodified script with sbatch (CPU mode: no GPUs here), and checks
#  1. a frame list of four frames: the job COMPLETED with exit 0, every frame bit-identical
#     to `spexctl extract --local` of the same input, spexd drained and exited 0;
#  2. the time-limit path: `scancel --batch --signal=TERM` mid-run (what the script's
#     --signal=B:TERM@120 sends): the batch script forwards the signal, the workers stop,
#     spexd drains and exits 0, the job reports the frames left undone (exit != 0);
#  3. a plain `scancel` mid-run (SIGTERM to every process of the job, SIGKILL after
#     KillWait): spexd still drains and exits 0.
# Skips (exit 77) only where the daemons cannot run: not root, the packages absent, or no
# cgroup filesystem (slurmd refuses to start without one).
# The per-node step without Slurm (second node's share, ...) is tests/deploy/slurm_step_test.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
BUILD_DIR=${BUILD_DIR:-build}
source tests/deploy/lib.sh
source tests/deploy/slurm_cluster.sh
need_binaries
SCRIPT=$ROOT/deploy/slurm/spexd-extract.sbatch
if ! slurm_usable; then
  echo "SKIP: no Slurm here ($SLURM_WHY); deploy_slurm_step still runs the script's steps without it"
  exit 77
fi

WORK=$(mktemp -d -t spexd-slurm-XXXXXX)
cleanup() {
  local rc=$?
  slurm_stop
  if [[ $rc -ne 0 ]]; then  # what the jobs and daemons said
    local f
    for f in "$WORK"/job-*.out "$WORK"/out*/spexd-node0.log; do
      [[ -f $f ]] && { echo "---- $f"; tail -n 40 "$f"; }
    done
    slurm_logs
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT

make_case "$WORK/data" 0,25 11
"$SPEXCTL" extract --local -q -i "$WORK/data/preproc-11.fits" -p "$WORK/data/psf.fits" \
  -o "$WORK/ref.fits" -w "$CASE_WAVELENGTH" -s 0 -n 25 >/dev/null
mkdir -p "$WORK/bin"
ln -s "$SPEXD" "$WORK/bin/spexd"
ln -s "$SPEXCTL" "$WORK/bin/spexctl"

slurm_start "$WORK/slurm"
NODE=$(hostname -s)
CPUS=$(scontrol show node "$NODE" -o | tr ' ' '\n' | sed -n 's/^CPUTot=//p')

# The job's settings travel in the environment (sbatch's default --export=ALL).
export SPEXD_BIN=$WORK/bin DATA_ROOTS=$WORK/data SPEXD_BACKEND=cpu WORKERS=2 DRAIN_SECONDS=20
export EXTRACT_ARGS="-w $CASE_WAVELENGTH -s 0 -n 25"
# frame_list FILE OUT N: N copies of the case, outputs OUT/frame-1.fits ...
frame_list() {
  local i
  for ((i = 1; i <= $3; ++i)); do
    echo "$WORK/data/preproc-11.fits $WORK/data/psf.fits $2/frame-$i.fits"
  done >"$1"
}
# submit NAME LIST OUT: the repository's script as it is, with the flags a site adds on the
# command line (here: one node, this machine's CPUs, no GPUs, the output under WORK).
submit() {
  FRAME_LIST=$2 OUT_DIR=$3 SPEXD_PORT=$(port_pair) slurm_submit --job-name="$1" --nodes=1 \
    --cpus-per-task="$CPUS" --gpus-per-node=0 --chdir="$WORK" --output="$WORK/job-%j.out" \
    "$SCRIPT"
  JOB=$SLURM_LAST_JOB
  say "submitted $1 as job $JOB"
}
state() { slurm_job_field "$JOB" JobState; }
# until_frame OUT: the job runs and its first frame is written (the cancel then hits work).
until_frame() {
  local i
  for ((i = 0; i < 600; ++i)); do
    [[ -e $1/frame-1.fits ]] && return 0
    slurm_job_done "$JOB" && fail "job $JOB ended ($(state)) before its first frame"
    sleep 0.2
  done
  fail "job $JOB: no frame after two minutes ($(state))"
}
# drained OUT: spexd's log shows the drain and its exit 0 (a SIGKILL leaves no exit line).
drained() {
  grep -q '"event":"drained"' "$1/spexd-node0.log" || fail "job $JOB: spexd did not drain"
  grep -q '"event":"exit","code":0' "$1/spexd-node0.log" || fail "job $JOB: spexd did not exit 0"
}
# step_saw_exit: the step's own report of spexd's exit status in the job's output (not
# checked after a plain scancel, which also stops srun, the step's output channel).
step_saw_exit() {
  grep -q "node 0: spexd exited with 0" "$WORK/job-$JOB.out" || fail "job $JOB: spexd did not exit 0"
}

say "1. a frame list of four frames, to completion"
frame_list "$WORK/frames1.txt" "$WORK/out1" 4
submit spexd-complete "$WORK/frames1.txt" "$WORK/out1"
slurm_wait_job "$JOB" 240 || fail "job $JOB did not end within four minutes ($(state))"
cat "$WORK/job-$JOB.out"
[[ $(state) == COMPLETED ]] || fail "job $JOB ended $(state), not COMPLETED"
[[ $(slurm_job_field "$JOB" ExitCode) == 0:0 ]] || fail "job $JOB exit $(slurm_job_field "$JOB" ExitCode)"
grep -q "backend cpu" "$WORK/job-$JOB.out" || fail "spexd did not run in CPU mode"
for i in 1 2 3 4; do
  python3 tests/deploy/fits_compare.py "$WORK/out1/frame-$i.fits" "$WORK/ref.fits" FLUX IVAR MASK ||
    fail "frame $i differs from the local extraction"
done
drained "$WORK/out1"
step_saw_exit
grep -q "spexd-extract: step exited with 0" "$WORK/job-$JOB.out" || fail "the step did not exit 0"

say "2. time limit: scancel --batch --signal=TERM mid-run (as --signal=B:TERM@120 does)"
frame_list "$WORK/frames2.txt" "$WORK/out2" 12
submit spexd-timelimit "$WORK/frames2.txt" "$WORK/out2"
until_frame "$WORK/out2"
scancel --batch --signal=TERM "$JOB"
slurm_wait_job "$JOB" 120 || fail "job $JOB did not end after the signal ($(state))"
cat "$WORK/job-$JOB.out"
grep -q "SIGTERM, stopping workers and draining spexd" "$WORK/job-$JOB.out" ||
  fail "the signal did not reach the step"
drained "$WORK/out2"
step_saw_exit
[[ $(state) == FAILED ]] || fail "job $JOB ended $(state): frames were left undone, FAILED expected"
echo "frames done before the signal: $(ls "$WORK"/out2/frame-*.fits | wc -l) of 12"

say "3. plain scancel mid-run (SIGTERM to every process of the job)"
frame_list "$WORK/frames3.txt" "$WORK/out3" 12
submit spexd-scancel "$WORK/frames3.txt" "$WORK/out3"
until_frame "$WORK/out3"
scancel "$JOB"
slurm_wait_job "$JOB" 120 || fail "job $JOB did not end after scancel ($(state))"
cat "$WORK/job-$JOB.out"
drained "$WORK/out3"
[[ $(state) == CANCELLED ]] || fail "job $JOB ended $(state), not CANCELLED"
echo "frames done before scancel: $(ls "$WORK"/out3/frame-*.fits | wc -l) of 12"

slurm_stop
say "slurm_test: PASS (sbatch on a one-node Slurm, CPU mode; the Apptainer variant not run)"
