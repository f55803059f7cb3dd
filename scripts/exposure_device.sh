#!/usr/bin/env bash
# On a GPU machine: a warm 30-frame, 30-PSF exposure submitted as one job
# (ExtractExposure, the server writing every frame) against the same exposure as 30
# concurrent single-frame clients, on 1 GPU and on 2 when the machine has them
# (spexd_exposure_bench, `.fits` in and out).
#
#   scripts/exposure_device.sh DIR DATA_DIR [OUT_DIR] [GPU_COUNTS]
#     DIR         where spexd_exposure_bench and the CUDA module are (scripts/run_program.sh:
#                 a build tree configured with -DSPEXD_BUILD_BENCHMARKS=ON, an install
#                 prefix, or a bundle, or its .tar.gz)
#     DATA_DIR    holds the b, r and z PSFs psf-b0-*.fits, psf-r0-*.fits, psf-z0-*.fits
#                 (psf-b0-synth, psf-r0-00051060, psf-z0-synth); each is the base of 30 / N
#                 shifted stand-ins, so 10 b, 10 r and 10 z frames, each camera extracted on
#                 its own DESI grid and psferr
#     OUT_DIR     JSON and log (default: $OUT, else exposure_device-out)
#     GPU_COUNTS  e.g. "1 2" (default: 1, and 2 when two GPUs are visible)
#   FRAMES (30), PASSES (3: one cold, two warm), MODES ("one multi") set the runs; WORK
#   (/dev/shm): where the frames are written, tmpfs as for the throughput runs (a disk's
#   fsync of 30 frame files committed at once would be measured instead of the service);
#   BENCH_ARGS (extra bench flags, e.g. "--backends-per-gpu 2");
#   STREAMERS ("0 2") the spexd --streamers_per_worker values tried for the one-job mode (0:
#   the default, 4 per GPU worker): the server encodes and writes every frame file on those
#   threads.
set -euo pipefail
BUNDLE=${1:?a build tree, an install prefix, a bundle or its .tar.gz} DATA_DIR=${2:?the folder of the b0, r0 and z0 PSFs}
OUT_DIR=${3:-${OUT:-exposure_device-out}}
RUN=$(dirname "$(readlink -f "$0")")/run_program.sh
if [[ $BUNDLE == *.tar.gz ]]; then
  unpacked=$(mktemp -d)
  tar -C "$unpacked" -xzf "$BUNDLE"
  BUNDLE=$(echo "$unpacked"/*)
fi
ngpu=$(nvidia-smi -L 2>/dev/null | wc -l)
GPU_COUNTS=${4:-$( ((ngpu >= 2)) && echo "1 2" || echo 1)}
FRAMES=${FRAMES:-30} PASSES=${PASSES:-3} MODES=${MODES:-one multi} STREAMERS=${STREAMERS:-0 2}
mkdir -p "$OUT_DIR"
log=$OUT_DIR/exposure_device.log
export SPEXD_GIT_SHA=${SPEXD_GIT_SHA:-unknown}
export GIT_SHA=$SPEXD_GIT_SHA
psfs=()
for p in "$DATA_DIR"/psf-b0-*.fits "$DATA_DIR"/psf-r0-*.fits "$DATA_DIR"/psf-z0-*.fits; do
  [[ -f $p ]] && psfs+=(--psf "$p")
done
((${#psfs[@]} > 0)) || { echo "no psf-{b,r,z}0-*.fits in $DATA_DIR" >&2; exit 2; }
gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
{ echo "host $(uname -n), $(nproc) cpus, $ngpu GPU(s): $gpu_name"; nvidia-smi -L || true; } >>"$log"

# exposure_s of every pass, in order, from the bench's one-line JSON.
passes_of() { grep -o '"exposure_s": [0-9.]*' "$1" | awk '{ print $2 }'; }
median_extract_of() { grep -o '"median_extract_s": [0-9.]*' "$1" | tail -1 | awk '{ print $2 }'; }

rows=()
for n in $GPU_COUNTS; do
  ((n <= ngpu)) || { echo "skip $n GPUs: only $ngpu" | tee -a "$log"; continue; }
  gpus=$(seq -s, 0 $((n - 1)))
  runs=()
  for mode in $MODES; do
    if [[ $mode == one ]]; then
      for s in $STREAMERS; do runs+=("one $s"); done
    else
      runs+=("$mode 0")
    fi
  done
  for r in "${runs[@]}"; do
    read -r mode streamers <<<"$r"
    one=0
    [[ $mode == one ]] && one=1
    label=$mode
    ((streamers == 0)) || label=$mode-s$streamers
    json=$OUT_DIR/exposure_${label}_${n}gpu.json
    frames_dir=$(mktemp -d "${WORK:-/dev/shm}/exposure-frames.XXXXXX")
    echo "+ spexd_exposure_bench --gpus $gpus --one-job $one --streamers $streamers ${BENCH_ARGS:-}" | tee -a "$log"
    rc=0
    "$RUN" "$BUNDLE" spexd_exposure_bench "${psfs[@]}" --frames "$FRAMES" --passes "$PASSES" \
      --gpus "$gpus" --one-job "$one" --streamers "$streamers" --out-dir "$frames_dir" \
      ${BENCH_ARGS:-} >"$json" 2>>"$log" || rc=$?
    rm -rf "$frames_dir"  # ~70 MB per frame file
    if ((rc != 0)); then
      rows+=("$(printf '%4s %9s %8s %8s %10s  %s' "$n" "$label" fail - - "exit $rc, see $log")")
      continue
    fi
    mapfile -t t < <(passes_of "$json")
    cold=${t[0]}
    warm=$(printf '%s\n' "${t[@]:1}" | sort -g | head -1)
    [[ -n $warm ]] || warm=$cold
    verdict=""
    if [[ $mode == one ]]; then
      target=$( ((n == 1)) && echo 3.0 || echo 2.0)
      verdict=$(awk -v w="$warm" -v t="$target" 'BEGIN { print (w <= t ? "meets" : "misses") " <= " t " s" }')
    fi
    rows+=("$(printf '%4s %9s %8.3f %8.3f %10s  %s' "$n" "$label" "$cold" "$warm" "$(median_extract_of "$json")" "$verdict")")
  done
done
echo "exposure: $FRAMES frames, $((${#psfs[@]} / 2)) base PSF(s), $FRAMES distinct PSF files; $gpu_name; commit $GIT_SHA"
echo "   (one = ExtractExposure, server-written frames, -sN: --streamers_per_worker N;"
echo "    multi = $FRAMES concurrent spexctl-like clients writing their files)"
printf '%4s %9s %8s %8s %10s  %s\n' gpus mode cold_s warm_s extract_s target
printf '%s\n' "${rows[@]}"
echo "JSON and log in $OUT_DIR"
