#!/usr/bin/env bash
# The host's CPU cost of served frames (tests/bench/host_cost_bench.cc): makes the inputs
# with the project's simulator (spexd-sim) and gzip, then runs spexd_host_cost_bench for
# every served mode and the exposure job, and writes its JSON record.
#
#   scripts/host_cost.sh BIN_DIR RECORD.json [BENCH ARGS...]
#     BIN_DIR   where spexd-sim, spexctl and spexd_host_cost_bench are: a build tree (build/,
#               the programs in client/ and tests/bench/) or a device bundle (all in one
#               folder, run through its run.sh)
#     RECORD    the JSON record (docs/benchmarks/spexd_host_cost_bench-SLUG.json)
#   Environment: WORK (/dev/shm/spexd_host_cost: inputs and outputs, tmpfs), BACKEND
#   (replay; cuda on the GPU machine), CLIENTS (2), FRAMES (3), PETALS (1: frames per arm of
#   the exposure job), NSPEC (500), PSF_DIR (a folder holding the b0 and z0
#   PSFs for the exposure's b and z frames; without it the exposure is of r frames only),
#   GZIP_LEVEL (6, as desispec's Python gzip writes preprocs), MODES (all); in a bundle,
#   BENCH and SPEXCTL (the names of the programs to run, for two builds in one bundle) and
#   SPEXD_CUDA_MODULE (the CUDA module of BENCH's build, which must be that build's);
#   R_PSF (tests/data/psf-r0-00051060.fits: the r frames' PSF); PERF (a perf binary: each
#   mode's timed frames sampled on the whole host, cpu-clock with DWARF call graphs, and
#   their CPU by pass in WORK/passes-MODE.txt, scripts/perf_passes.py; PERF_FREQ, 199 Hz).
# Prints a line per mode; spexd's log goes to WORK/spexd.log.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${1:?BIN_DIR}; RECORD=${2:?RECORD.json}; shift 2
BIN=$(cd "$BIN" && pwd)
WORK=${WORK:-/dev/shm/spexd_host_cost}
BACKEND=${BACKEND:-replay} CLIENTS=${CLIENTS:-2} FRAMES=${FRAMES:-3} PETALS=${PETALS:-1}
NSPEC=${NSPEC:-500} GZIP_LEVEL=${GZIP_LEVEL:-6} MODES=${MODES:-all}
PSF_DIR=${PSF_DIR:-}
if [[ -x $BIN/spexd_host_cost_bench ]]; then  # a device bundle
  # BENCH, SPEXCTL: other builds' programs in the same bundle (an A/B in one bundle).
  run=("$BIN/run.sh"); sim=spexd-sim; bench=${BENCH:-spexd_host_cost_bench}
  spexctl=$BIN/${SPEXCTL:-spexctl}
else
  run=(); sim=$BIN/client/spexd-sim; bench=$BIN/tests/bench/spexd_host_cost_bench
  spexctl=$BIN/client/spexctl
fi
mkdir -p "$WORK/in"
R_PSF=${R_PSF:-tests/data/psf-r0-00051060.fits}
cp "$R_PSF" "$WORK/in/psf-r.fits"
make_frame() {  # ARM PSF: WORK/in/preproc-ARM.fits and .fits.gz, kept between runs
  local arm=$1 psf=$2 out=$WORK/in/preproc-$1.fits
  if [[ ! -f $out.gz ]]; then
    "${run[@]}" $sim --psf="$psf" --out="$out" --fibers=0,$NSPEC --seed=3 --hot_pixels=50 \
      --camera="${arm}0" >/dev/null
    gzip -"$GZIP_LEVEL" -k -f "$out"
  fi
}
make_frame r "$WORK/in/psf-r.fits"
arms=(--arm "$WORK/in/psf-r.fits=$WORK/in/preproc-r.fits")
if [[ -f $PSF_DIR/psf-b0-synth.fits && -f $PSF_DIR/psf-z0-synth.fits ]]; then
  for arm in b z; do
    cp "$PSF_DIR/psf-${arm}0-synth.fits" "$WORK/in/psf-$arm.fits"
    make_frame $arm "$WORK/in/psf-$arm.fits"
    arms+=(--arm "$WORK/in/psf-$arm.fits=$WORK/in/preproc-$arm.fits")
  done
fi
profile=()
if [[ -n ${PERF:-} ]]; then
  marker=$WORK/timed
  rm -f "$marker" "$WORK"/perf-*.data "$WORK"/passes-*.txt
  profile=(--timed-marker "$marker")
fi
# sample_modes PID: while the bench runs, one perf recording of the whole host per timed part
# (the bench's marker file names the mode), into WORK/perf-MODE.data.
sample_modes() {
  local pid=$1 mode perf_pid
  while kill -0 "$pid" 2>/dev/null; do
    if [[ -f $marker ]]; then
      mode=$(<"$marker")
      "$PERF" record -q -a -e cpu-clock -F "${PERF_FREQ:-199}" --call-graph dwarf,32768 \
        -o "$WORK/perf-$mode.data" >/dev/null 2>&1 &
      perf_pid=$!
      while [[ -f $marker ]] && kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
      kill -INT "$perf_pid" 2>/dev/null
      wait "$perf_pid" 2>/dev/null || true
    fi
    sleep 0.05
  done
}
"${run[@]}" $bench --backend "$BACKEND" --psf "$WORK/in/psf-r.fits" \
  --frame "$WORK/in/preproc-r.fits" --frame-gz "$WORK/in/preproc-r.fits.gz" "${arms[@]}" \
  --petals "$PETALS" --clients "$CLIENTS" --frames "$FRAMES" --nspec "$NSPEC" --modes "$MODES" \
  --work "$WORK/run" --spexctl "$spexctl" --record "$RECORD" "${profile[@]}" "$@" \
  2>"$WORK/spexd.log" &
bench_pid=$!
[[ -n ${PERF:-} ]] && sample_modes "$bench_pid"
wait "$bench_pid" ||
  { echo "host_cost: failed; the end of spexd's log ($WORK/spexd.log):" >&2; tail -5 "$WORK/spexd.log" >&2; exit 1; }
# Each recording by pass, against its mode's host CPU a frame in the record.
for data in "$WORK"/perf-*.data; do
  [[ -f $data ]] || continue
  mode=${data##*/perf-}
  mode=${mode%.data}
  cpu=$(python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))
print(next((f["value"] for f in r["figures"] if f["name"] == sys.argv[2] + "_cpu_s_per_frame"), 0))' \
    "$RECORD" "$mode")
  "$PERF" script -i "$data" 2>/dev/null |
    scripts/perf_passes.py --cpu-s-per-frame "$cpu" >"$WORK/passes-$mode.txt"
  echo "host_cost: $mode by pass: $WORK/passes-$mode.txt"
done
