#!/usr/bin/env bash
# A DESI exposure as DESI has it, on a GPU machine: 30 preprocs `.fits.gz` (10 petals x the
# b, r and z cameras, each frame with its own PSF) -> 30 frames `.fits.gz`, in one
# `spexctl exposure` job against one spexd, timed end to end (spexctl's start to its exit)
# cold once, then warm (the same job again, --overwrite).
#
#   scripts/exposure_gz_device.sh DIR PSF_DIR [OUT_DIR]
#     DIR      where spexd, spexctl, spexd-sim and the CUDA module are (scripts/run_program.sh:
#              a build tree, an install prefix, or a bundle, or its .tar.gz)
#     PSF_DIR  holds psf-b0-synth.fits, psf-r0-00051060.fits and psf-z0-synth.fits
#     OUT_DIR  log and summary (default: $OUT, else exposure_gz-out)
#   WARM (3): warm repeats; WORK (/dev/shm/exposure_gz): inputs and outputs (tmpfs);
#   SIM_JOBS (8): simulations at a time (2 threads each); FIBERS (500) and BACKEND (cuda):
#   a smaller CPU run of the same script off the GPU machine. REUSE=1: keep WORK's 30
#   inputs when a run of the same FIBERS left them (another build timed on the same
#   preprocs and PSFs, without simulating again). PERF (a perf binary):
#   the warm jobs sampled on every process of the host, the profile by process and symbol
#   in OUT_DIR/perf-warm.txt.
#
# Inputs are made there with the project's simulator: petal p's PSF for camera c is
# c's PSF with its traces moved by a different whole or half pixel per petal (spexd-sim
# --shift_traces, core/sim/psf_stand_in.h: distinct files, so 30 PSFs as in production),
# and its preproc is simulated through that PSF on the camera's DESI grid (spexd-sim's
# default: b 3600.0-5800.0, r 5760.0-7620.0, z 7520.0-9824.0, dw 0.8), 500 fibres, Poisson
# and read noise, 50 HOT pixels, then gzipped at level 9 (desispec writes its .fits.gz through
# astropy's gzip.GzipFile, level 9). Each frame-list line carries its camera's -w and
# --psferr (b 0.04, r and z 0.01), as desi_proc runs desi_extract_spectra.
# ~1-2 min to simulate and compress on 16 cores, then ~30 s for the jobs.
set -euo pipefail
BUNDLE=${1:?a build tree, an install prefix, a bundle or its .tar.gz} PSF_DIR=${2:?folder with the b0, r0, z0 PSFs}
OUT_DIR=${3:-${OUT:-exposure_gz-out}}
RUN=$(dirname "$(readlink -f "$0")")/run_program.sh
WARM=${WARM:-3} WORK=${WORK:-/dev/shm/exposure_gz} SIM_JOBS=${SIM_JOBS:-8}
FIBERS=${FIBERS:-500} BACKEND=${BACKEND:-cuda}
if [[ $BUNDLE == *.tar.gz ]]; then
  unpacked=$(mktemp -d)
  tar -C "$unpacked" -xzf "$BUNDLE"
  BUNDLE=$(echo "$unpacked"/*)
fi
BUNDLE=$(cd "$BUNDLE" && pwd)
PSF_DIR=$(cd "$PSF_DIR" && pwd)
mkdir -p "$OUT_DIR"
OUT_DIR=$(cd "$OUT_DIR" && pwd)
log=$OUT_DIR/exposure_gz.log
REUSE=${REUSE:-0}
if [[ $REUSE == 1 && -f $WORK/inputs-$FIBERS.done ]]; then
  rm -f "$WORK"/frame-*.fits.gz
else
  REUSE=0
  rm -rf "$WORK"
fi
mkdir -p "$WORK"
gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 || true)
echo "host $(uname -n), $(nproc) cpus, GPU: ${gpu_name:-none}; commit ${SPEXD_GIT_SHA:-unknown}" | tee "$log"

declare -A BASE=([b]=psf-b0-synth.fits [r]=psf-r0-00051060.fits [z]=psf-z0-synth.fits)
declare -A GRID=([b]=3600.0,5800.0,0.8 [r]=5760.0,7620.0,0.8 [z]=7520.0,9824.0,0.8)
declare -A PSFERR=([b]=0.04 [r]=0.01 [z]=0.01)
for c in b r z; do [[ -f $PSF_DIR/${BASE[$c]} ]] || { echo "no $PSF_DIR/${BASE[$c]}" >&2; exit 2; }; done

# --- 30 inputs: one line per frame for xargs, then the frame list.
expid=00012345
jobs=$WORK/sim-jobs.txt
: >"$jobs"
: >"$WORK/frames.txt"
for p in 0 1 2 3 4 5 6 7 8 9; do
  # Petal p's trace offsets (pixels): (0,0), (0.5,0), (0,0.5), (1,0), (0,1), ...
  step=$(awk -v k=$p 'BEGIN { print 0.5 * int((k + 1) / 2) }')
  if ((p % 2 == 1)); then dx=$step dy=0; else dx=0 dy=$step; fi
  for c in b r z; do
    cam=$c$p
    echo "$c $cam $dx,$dy $((1000 + 10 * p + ${#c}))" >>"$jobs"
    echo "$WORK/preproc-$cam-$expid.fits.gz $WORK/psf-$cam-$expid.fits $WORK/frame-$cam-$expid.fits.gz" \
      "-w ${GRID[$c]} --psferr ${PSFERR[$c]}" >>"$WORK/frames.txt"
  done
done
simulate() {  # ARM CAMERA SHIFT SEED
  local c=$1 cam=$2 shift=$3 seed=$4
  "$RUN" "$BUNDLE" spexd-sim --psf="$PSF_DIR/${BASE[$c]}" --shift_traces="$shift" \
    --psf_out="$WORK/psf-$cam-$expid.fits" --out="$WORK/preproc-$cam-$expid.fits" \
    --fibers=0,$FIBERS --seed="$seed" --hot_pixels=50 --camera="$cam" --threads=2 >/dev/null
  gzip -9 -f "$WORK/preproc-$cam-$expid.fits"
}
export -f simulate
export RUN BUNDLE PSF_DIR WORK expid FIBERS
export BASE_b=${BASE[b]} BASE_r=${BASE[r]} BASE_z=${BASE[z]}
elapsed() { awk -v a="$1" -v b="${2:-$(date +%s.%N)}" 'BEGIN { printf "%.3f", b - a }'; }
t0=$(date +%s.%N)
# (associative arrays do not cross into xargs' shells: the base names go by variable)
if [[ $REUSE == 0 ]]; then
  xargs -P "$SIM_JOBS" -L 1 bash -c 'declare -A BASE=([b]=$BASE_b [r]=$BASE_r [z]=$BASE_z); simulate "$@"' _ \
    <"$jobs" 2>>"$log"
fi
n_in=$(ls "$WORK"/preproc-*.fits.gz | wc -l)
printf 'inputs: %d preprocs .fits.gz (%s) and %d PSFs in %.1f s\n' "$n_in" \
  "$(du -ch "$WORK"/preproc-*.fits.gz | tail -1 | cut -f1)" "$(ls "$WORK"/psf-*.fits | wc -l)" \
  "$(elapsed "$t0")" | tee -a "$log"
((n_in == 30)) || { echo "expected 30 inputs" >&2; exit 1; }
touch "$WORK/inputs-$FIBERS.done"

# --- One spexd on the GPU; the frame list by server paths.
"$RUN" "$BUNDLE" spexd --listen=127.0.0.1:0 --metrics_listen=127.0.0.1:0 --backend="$BACKEND" \
  --data_roots="$WORK" --output_roots="$WORK" --psf_cache_bytes=$((64 << 30)) --max_queue=64 \
  2>"$OUT_DIR/spexd.log" &
spexd_pid=$!
trap 'kill $spexd_pid 2>/dev/null || true' EXIT
port=
for _ in $(seq 600); do
  port=$(grep -o '"event":"listening".*"port":[0-9]*' "$OUT_DIR/spexd.log" 2>/dev/null |
         grep -o '"port":[0-9]*' | head -1 | cut -d: -f2 || true)
  [[ -n $port ]] && break
  kill -0 $spexd_pid 2>/dev/null || { cat "$OUT_DIR/spexd.log" >&2; exit 1; }
  sleep 0.1
done
[[ -n $port ]] || { echo "spexd did not start" >&2; exit 1; }
# Warm-up (one backend per worker, on every GPU) ends when health turns SERVING.
for _ in $(seq 240); do
  "$RUN" "$BUNDLE" spexctl health --server "127.0.0.1:$port" >/dev/null 2>&1 && break
  sleep 0.5
done

run_job() {  # LABEL: one exposure job, wall time from spexctl's start to its exit
  local label=$1 t_start t_end
  rm -f "$WORK"/frame-*.fits.gz
  t_start=$(date +%s.%N)
  timeout -s KILL 300 "$RUN" "$BUNDLE" spexctl exposure --server "127.0.0.1:$port" -n "$FIBERS" \
    --overwrite --priority realtime "$WORK/frames.txt" >"$OUT_DIR/exposure-$label.txt" 2>&1
  t_end=$(date +%s.%N)
  local n_out
  n_out=$(ls "$WORK"/frame-*.fits.gz 2>/dev/null | wc -l)
  printf '%-6s %7.3f s  %d frames .fits.gz written  (%s)\n' "$label" "$(elapsed "$t_start" "$t_end")" \
    "$n_out" "$(tail -1 "$OUT_DIR/exposure-$label.txt")" | tee -a "$log"
}
echo "exposure: 30 frames (10 b, 10 r, 10 z, 30 PSFs, $FIBERS fibres, $BACKEND backend)," \
  ".fits.gz in and out, one spexctl exposure job" | tee -a "$log"
run_job cold
if [[ -n ${PERF:-} ]]; then
  "$PERF" record -q -F 499 -g -a -o "$OUT_DIR/perf-warm.data" >/dev/null 2>&1 &
  perf_pid=$!
fi
for i in $(seq "$WARM"); do run_job "warm$i"; done
if [[ -n ${PERF:-} ]]; then
  kill -INT "$perf_pid" 2>/dev/null; wait "$perf_pid" 2>/dev/null || true
  { "$PERF" report -i "$OUT_DIR/perf-warm.data" --no-children --sort comm,dso,sym -g none \
      --percent-limit 0.2 2>&1
    "$PERF" report -i "$OUT_DIR/perf-warm.data" --no-children --sort comm -g none 2>&1
  } | grep -v '^$' >"$OUT_DIR/perf-warm.txt"
  rm -f "$OUT_DIR/perf-warm.data"
fi

# --- The outputs are whole gzip streams of desispec frames, one per camera's grid.
bad=0
for f in "$WORK"/frame-*.fits.gz; do
  gzip -t "$f" || { echo "corrupt $f" | tee -a "$log"; bad=$((bad + 1)); }
done
declare -A NWAVE=([b]=2751 [r]=2326 [z]=2881)
for c in b r z; do
  f=$WORK/frame-${c}0-$expid.fits.gz
  # FLUX is the primary HDU: its first NAXIS1 is the grid's length.
  nw=$(zcat "$f" | head -c 2880 | grep -ao 'NAXIS1  = *[0-9]*' | grep -o '[0-9]*$' || true)
  echo "frame-${c}0: $(stat -c %s "$f") bytes, FLUX NAXIS1 $nw (expected ${NWAVE[$c]})" | tee -a "$log"
  [[ $nw == "${NWAVE[$c]}" ]] || bad=$((bad + 1))
done
echo "bad outputs: $bad; logs in $OUT_DIR" | tee -a "$log"
((bad == 0))
