#!/usr/bin/env bash
# Where a warm frame's GPU time goes, kernel by kernel, on the GPU machine:
# Nsight Compute times every launch of `spexd_cuda_frame_bench --runs 2` (one metric,
# serialised: kernels that overlap in a real frame are timed alone), and
# scripts/kernel_profile_summary.py keeps the last warm frame's launches (the launch
# sequence that repeats at the end) and sums them by kernel. Then one run with
# SPEXD_CUDA_TIMELINE=1 for each batch's stage ends in a real, overlapped frame.
#
#   scripts/cuda_kernel_profile_device.sh BUNDLE_DIR OUT_DIR
#   Environment: any SPEXD_CUDA_* switch applies to both runs.
# Run from the repository's root (the PSF is tests/data's).
set -uo pipefail
[[ $# -eq 2 ]] || { sed -n '2,11p' "$0"; exit 2; }
B=$(cd "$1" && pwd) || exit 2
OUT=$2; mkdir -p "$OUT"
NCU=${NCU:-$(command -v ncu || echo /usr/local/cuda/bin/ncu)}
"$NCU" --metrics gpu__time_duration.sum --export "$OUT/frame" --force-overwrite \
  "$B/run.sh" spexd_cuda_frame_bench --runs 2 --inflight 0 --check-bundles "" \
  >"$OUT/ncu.log" 2>&1
echo "ncu rc=$?"
"$NCU" --import "$OUT/frame.ncu-rep" --csv --page raw >"$OUT/ncu.csv" 2>>"$OUT/ncu.log"
gzip -f "$OUT/frame.ncu-rep"
python3 "$(dirname "$0")/kernel_profile_summary.py" "$OUT/ncu.csv" | tee "$OUT/kernels.txt"
SPEXD_CUDA_TIMELINE=1 "$B/run.sh" spexd_cuda_frame_bench --runs 3 --inflight 0 \
  --check-bundles "" >"$OUT/timeline.log" 2>&1
echo "timeline rc=$?"
tail -40 "$OUT/timeline.log"
