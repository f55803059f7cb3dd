#!/usr/bin/env bash
# On a GPU machine: a warm 30-frame, 30-PSF exposure submitted as one job
# (ExtractExposure, the server writing every frame) against the same exposure as 30
# concurrent single-frame clients, on 1 GPU and on 2 when the machine has them. Targets:
# the warm one-job exposure <= 3.0 s on one H100, <= 2.0 s on 2 x H200. One device call:
#
#   scripts/exposure_device.sh BUNDLE DATA_DIR [OUT_DIR] [GPU_COUNTS]
#     BUNDLE      device bundle (its run.sh launches spexd_exposure_bench), or its .tar.gz
#     DATA_DIR    holds the b, r and z PSFs psf-b0-*.fits, psf-r0-*.fits, psf-z0-*.fits
#                 (../shared/data/psf: psf-b0-synth, psf-r0-00051060, psf-z0-synth); each is
#                 the base of 30 / N shifted stand-ins, so 10 b, 10 r and 10 z frames, each
#                 camera extracted on its own DESI grid and psferr
#     OUT_DIR     JSON and log (default: $OUT, else /tmp/exposure_device)
#     GPU_COUNTS  e.g. "1 2" (default: 1, and 2 when two GPUs are visible)
#   FRAMES (30), PASSES (3: one cold, two warm), MODES ("one multi") set the runs; WORK
#   (/dev/shm): where the frames are written, tmpfs as for the throughput runs (on the 4 x
#   H200 VM's own disk, 30 frame files of 70 MB committed at once took 0.38-0.47 s each to
#   fsync: such a run measures the disk, not the service);
#   BENCH_ARGS (extra bench flags, e.g. "--backends-per-gpu 2"); BENCH_BIN (the bench
#   executable in the bundle, spexd_exposure_bench: another build's for an A/B, added as
#   scripts/spexctl_throughput_device.sh says for SPEXD_BIN);
#   STREAMERS ("0 2") the spexd --streamers_per_worker values tried for the one-job mode (0:
#   the default, 4 per GPU worker; 2 was the default before): the server then encodes and
#   writes every frame file (≈ 0.3 s of CPU each) on those threads, against ≈ 0.1 s of GPU
#   per frame.
#
# Build the bundle here:
#   cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DSPEXD_BUILD_BENCHMARKS=ON \
#     -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build build-gpu -j2 --target spexd_exposure_bench spexd_cuda
#   ../shared/tools/device-bundle.sh -b build-gpu -o .device/exposure/bundle \
#     -m lib/spexd/libspexd_cuda.so tests/bench/spexd_exposure_bench
# A run is ~1 min on one H100 (simulation, 30 PSF files, 3 passes); the default set (2 modes
# x 1-2 GPU counts) fits one 10-minute device command.
set -euo pipefail
BUNDLE=${1:?bundle dir or .tar.gz} DATA_DIR=${2:?the folder of the b0, r0 and z0 PSFs}
OUT_DIR=${3:-${OUT:-/tmp/exposure_device}}
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
    "$BUNDLE/run.sh" "${BENCH_BIN:-spexd_exposure_bench}" "${psfs[@]}" --frames "$FRAMES" --passes "$PASSES" \
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
