#!/usr/bin/env bash
# On a GPU machine: host decode, the served throughput ratio with
# client processes (.fits and .fits.gz), and the exposure benchmark at spexd's default
# prefetch, on 1..N GPUs. Writes one JSON per run into OUT_DIR (for scripts/perf_plots.py)
# and a log. Runs from a device bundle (../shared/tools/device-bundle.sh) that holds
# spexd_decode_bench, spexd_rpc_bench, spexd_exposure_bench and the CUDA module.
#
#   scripts/gpu_scaling_device.sh BUNDLE_DIR OUT_DIR PSF_A PSF_B [GPUS]
#     BUNDLE_DIR  the bundle (its run.sh launches the executables)
#     OUT_DIR     where the JSON and the log go (e.g. $OUT on the device machine)
#     PSF_A PSF_B the two real r PSFs (tests/data/psf-r0-00051060.fits, psf-r0-00067784.fits)
#     GPUS        GPUs to scale over (default: all visible), e.g. 4
#   STAGES="decode rpc exposure" (default all) picks parts, to keep each device command
#   under its 10-minute limit (rpc: 6 runs of ~1 min on an H100; exposure: ~30 s a run).
#   STAGES=rpc_gpus (not in the default): the served throughput on 1, 2, 4, ... GPUs
#   (spexd_rpc_bench --gpus), RPC_CLIENTS_PER_GPU (8) client processes per GPU x 6 frames;
#   each JSON's gpu_work gives every GPU's frames and busy seconds from spexd's metrics.
#
# Build the bundle here with:
#   cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DSPEXD_BUILD_BENCHMARKS=ON \
#     -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build build-gpu -j2
#   ../shared/tools/device-bundle.sh -b build-gpu -o /work/main/.device/host/bundle \
#     -m lib/spexd/libspexd_cuda.so tests/bench/spexd_decode_bench tests/bench/spexd_rpc_bench \
#     tests/bench/spexd_exposure_bench
set -euo pipefail
BUNDLE=${1:?bundle dir} OUT_DIR=${2:?out dir} PSF_A=${3:?psf} PSF_B=${4:?psf}
NGPU=${5:-$(nvidia-smi -L | wc -l)}
mkdir -p "$OUT_DIR"
log=$OUT_DIR/gpu_scaling_device.log
export SPEXD_GIT_SHA=${SPEXD_GIT_SHA:-unknown} GIT_SHA=${SPEXD_GIT_SHA:-unknown}
run() { echo "+ $*" | tee -a "$log"; "$BUNDLE/run.sh" "$@" 2>>"$log"; }

nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >>"$log" || true
nproc >>"$log"

STAGES=${STAGES:-decode rpc exposure}
want() { [[ " $STAGES " == *" $1 "* ]]; }

# 1. Host decode of one r frame (synthetic, plain and gzip), all cores.
if want decode; then
  run spexd_decode_bench --dir /tmp --repeats 5 --json "$OUT_DIR/decode.json"
fi

# 2. Served throughput against the backend, clients in separate processes, plain and gzip.
#    --inflight 0 skips the in-process clients; 8 client processes x 6 frames each.
if want rpc; then
for gz in 0 1; do
  run spexd_rpc_bench --backend cuda --fibers 500 --repeats 5 --inflight 0 \
    --client-procs 8 --proc-frames 6 --gzip $gz | tail -1 >"$OUT_DIR/rpc_procs8_gz$gz.json"
done
#    Throughput against frames in flight (plain .fits), for the plot.
for k in 1 2 4 8; do
  run spexd_rpc_bench --backend cuda --fibers 500 --repeats 5 --inflight 0 \
    --client-procs $k --proc-frames 6 | tail -1 >"$OUT_DIR/rpc_procs$k.json"
done
fi

# 2b. Served throughput against the number of GPUs, clients in separate processes.
if want rpc_gpus; then
  for ((n = 1; n <= NGPU; n *= 2)); do
    run spexd_rpc_bench --backend cuda --fibers 500 --repeats 3 --inflight 0 \
      --client-procs $((${RPC_CLIENTS_PER_GPU:-8} * n)) --proc-frames 6 --gpus "$(seq -s, 0 $((n - 1)))" \
      | tail -1 >"$OUT_DIR/rpc_${n}gpu.json"
  done
fi

# 3. The exposure (30 frames, 30 PSFs) at the default prefetch, on 1, 2, ... NGPU GPUs.
if want exposure; then
  psfs=(--psf "$PSF_A" --psf "$PSF_B")
  gpus=0
  for ((n = 1; n <= NGPU; n *= 2)); do
    run spexd_exposure_bench "${psfs[@]}" --frames 30 --passes 2 --gpus $gpus \
      | tail -1 >"$OUT_DIR/exposure_${n}gpu.json"
    gpus=$(seq -s, 0 $((2 * n - 1)))
  done
fi
echo "done: $(ls "$OUT_DIR")" | tee -a "$log"
