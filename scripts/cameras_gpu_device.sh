#!/usr/bin/env bash
# GPU tests of every camera on a GPU machine: a full 500-fibre b frame (4096 x 4096 CCD,
# 3600.0-5800.0) and a full z frame (4128 x 4114, 7520.0-9824.0, traces past the CCD top),
# each simulated there and extracted by the CUDA and the CPU backend at the spec's parity bar,
# for both compat settings (CudaCameraParity.*), beside the r camera's synthetic-frame parity
# tests (CudaParity.SyntheticFrameSubsetsAndRepeats, CudaParity.EdgeWindows).
#
#   scripts/cameras_gpu_device.sh BUNDLE DATA_DIR [OUT_DIR]
#     BUNDLE    device bundle (../shared/tools/device-bundle.sh) with spexd_cuda_tests and
#               the CUDA module, or its .tar.gz
#     DATA_DIR  a folder with psf/psf-b0-synth.fits, psf/psf-z0-synth.fits and
#               psf/psf-r0-00051060.fits (../shared/data's layout; SPEXD_SHARED_DATA)
#     OUT_DIR   gtest log and XML (default: $OUT, else /tmp/cameras_gpu)
# ~1 min on one H100 (four full frames on each backend, the CPU one on 16 cores).
set -euo pipefail
BUNDLE=${1:?bundle dir or .tar.gz} DATA_DIR=${2:?folder holding psf/}
OUT_DIR=${3:-${OUT:-/tmp/cameras_gpu}}
if [[ $BUNDLE == *.tar.gz ]]; then
  unpacked=$(mktemp -d)
  tar -C "$unpacked" -xzf "$BUNDLE"
  BUNDLE=$(echo "$unpacked"/*)
fi
mkdir -p "$OUT_DIR"
for f in psf-b0-synth.fits psf-z0-synth.fits psf-r0-00051060.fits; do
  [[ -f $DATA_DIR/psf/$f ]] || { echo "no $DATA_DIR/psf/$f" >&2; exit 2; }
done
export SPEXD_SHARED_DATA=$(cd "$DATA_DIR" && pwd)
nvidia-smi -L || true
rc=0
timeout -s KILL 540 "$BUNDLE/run.sh" spexd_cuda_tests \
  --gtest_filter='*CudaCameraParity.*:*CudaParity.SyntheticFrameSubsetsAndRepeats/*:*CudaParity.EdgeWindows/*' \
  --gtest_output="xml:$OUT_DIR/cameras_gpu.xml" 2>&1 | tee "$OUT_DIR/cameras_gpu.log" || rc=$?
echo "--- parity and timing lines"
grep -E '^\[(parity|timing)\]|^ +(flux|ivar|rdiag|pixmask|chi2)|OK \]|FAILED|SKIPPED' "$OUT_DIR/cameras_gpu.log" || true
exit "$rc"
