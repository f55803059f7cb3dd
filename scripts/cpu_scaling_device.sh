#!/usr/bin/env bash
# On the GPU host: the CPU backend's warm full frame on 2, 8 and 16
# cores (taskset), one process per core count, with OpenBLAS single-threaded inside each
# patch task (the backend also sets it). Prints a table and writes one JSON per run plus
# cpu_scaling.json (all runs, speed-up and efficiency against the smallest core count)
# into OUT_DIR. Runs from a device bundle (../shared/tools/device-bundle.sh) holding
# spexd_cpu_frame_bench, built with OpenBLAS:
#
#   cmake -S . -B build-cpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DSPEXD_BUILD_BENCHMARKS=ON \
#     -DSPEXD_WITH_CUDA=OFF && cmake --build build-cpu --target spexd_cpu_frame_bench -j2
#   ../shared/tools/device-bundle.sh -b build-cpu -o .device/cpu/bundle --lapack openblas \
#     tests/bench/spexd_cpu_frame_bench
#   cp tests/data/psf-r0-00051060.fits .device/cpu/
#
#   tar -C .device/cpu -czf .device/cpu/bundle.tar.gz bundle   # 64 MB -> ~25 MB to carry
#
#   scripts/cpu_scaling_device.sh BUNDLE OUT_DIR PSF [CORES...]
#     BUNDLE      the bundle folder (its run.sh launches the executable), or its .tar.gz
#     OUT_DIR     where the JSON and the log go ($OUT on the device machine)
#     PSF         the r PSF (tests/data/psf-r0-00051060.fits)
#     CORES       core counts (default: 2 8 16; counts above nproc are skipped)
#   FIBERS (500), REPEATS (3), WAVELENGTH (5760,7620,0.8), COMPAT (gpu) set the frame.
# A warm full frame is ~20-25 s of CPU time (2-core host), so 2 cores take ~1 min per core
# count (simulation, cold run with the spots, 3 warm runs), 8 and 16 less: the default
# set fits one 10-minute device command.
set -euo pipefail
BUNDLE=${1:?bundle dir or .tar.gz} OUT_DIR=${2:?out dir} PSF=${3:?psf}
shift 3
if [[ $BUNDLE == *.tar.gz ]]; then
  unpacked=$(mktemp -d)
  tar -C "$unpacked" -xzf "$BUNDLE"
  BUNDLE=$(echo "$unpacked"/*)
fi
CORES=("$@")
[[ ${#CORES[@]} -gt 0 ]] || CORES=(2 8 16)
FIBERS=${FIBERS:-500} REPEATS=${REPEATS:-3} WAVELENGTH=${WAVELENGTH:-5760,7620,0.8}
COMPAT=${COMPAT:-gpu}
mkdir -p "$OUT_DIR"
log=$OUT_DIR/cpu_scaling.log
ncpu=$(nproc)  # before OMP_NUM_THREADS is set: nproc honours it
export GIT_SHA=${SPEXD_GIT_SHA:-${GIT_SHA:-unknown}} OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
{ echo "host: $(uname -n), $ncpu cpus"; lscpu 2>/dev/null | grep -E 'Model name|Thread|Socket' || true; } >>"$log"

ran=()
for c in "${CORES[@]}"; do
  if ((c > ncpu)); then
    echo "skip $c cores: only $ncpu" | tee -a "$log"
    continue
  fi
  json=$OUT_DIR/cpu_frame_${c}cores.json
  echo "+ taskset -c 0-$((c - 1)) spexd_cpu_frame_bench --threads $c" | tee -a "$log"
  taskset -c "0-$((c - 1))" "$BUNDLE/run.sh" spexd_cpu_frame_bench --psf "$PSF" \
    --wavelength "$WAVELENGTH" --fibers "$FIBERS" --repeats "$REPEATS" --threads "$c" \
    --compat "$COMPAT" >"$json" 2>>"$log"
  ran+=("$c")
done

# Table and summary JSON from the per-run JSON (awk: the device machine may lack python).
field() { awk -v k="\"$2\":" '$1 == k { gsub(/[",]/, "", $2); print $2; exit }' "$1"; }
printf '%5s %8s %8s %12s %10s %8s %10s\n' cores warm_s cold_s cpu_s/frame patches/s speedup efficiency
rows=() base=
for c in "${ran[@]}"; do
  f=$OUT_DIR/cpu_frame_${c}cores.json
  warm=$(field "$f" warm_median_seconds) cold=$(field "$f" cold_seconds)
  cpu=$(field "$f" warm_cpu_seconds) pps=$(field "$f" patches_per_second)
  [[ -n $base ]] || base="$c $warm"
  read -r c0 w0 <<<"$base"
  sp=$(awk -v a="$w0" -v b="$warm" 'BEGIN { printf "%.3f", a / b }')
  eff=$(awk -v s="$sp" -v c0="$c0" -v c="$c" 'BEGIN { printf "%.3f", s * c0 / c }')
  printf '%5s %8s %8s %12s %10s %8s %10s\n' "$c" "$warm" "$cold" "$cpu" "$pps" "$sp" "$eff"
  rows+=("{\"cores\": $c, \"warm_median_seconds\": $warm, \"cold_seconds\": $cold, \"warm_cpu_seconds\": $cpu, \"patches_per_second\": $pps, \"speedup_vs_first\": $sp, \"efficiency_vs_first\": $eff}")
done
summary="{\"benchmark\": \"cpu_scaling\", \"git_sha\": \"$GIT_SHA\", \"fibers\": $FIBERS, \"runs\": [$(IFS=,; echo "${rows[*]}")]}"
echo "$summary" >"$OUT_DIR/cpu_scaling.json"
echo "$summary"
