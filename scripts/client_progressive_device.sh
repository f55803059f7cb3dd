#!/usr/bin/env bash
# Whether the host side keeps up with the GPU, on the GPU host in one call: spexctl's client-written
# .fits (-o, float32 wire) with the frame file written as the bundles arrive (the default)
# against --no-progressive-write (the whole file after the stream), same build and call:
#   1. spexd_client_tail_bench (no GPU, no server): the client tail (last bundle in -> file
#      in place) of a full r frame on both paths, float32 and float64 wires, a bundle every
#      30 ms; the two files must be byte-identical;
#   2. scripts/spexctl_throughput_device.sh, client-fits mode, PROCS spexctl x FRAMES frames,
#      progressive then whole file (the reference benches run once): frames/s, and the
#      clients' medians (throughput_breakdown.py: "write" is the time from the end of the
#      stream to the file in place).
#
#   scripts/client_progressive_device.sh BUNDLE_DIR WORK_DIR [PSF]
#     BUNDLE_DIR  device bundle (Release, -DSPEXD_BUILD_BENCHMARKS=ON) with spexd, spexctl,
#                 spexd-sim, spexd_rpc_bench, spexd_cuda_frame_bench, spexd_client_tail_bench
#                 and the CUDA module
#     WORK_DIR    scratch on the disk the clients write to (keep it out of $OUT)
#   Environment: PROCS (8), FRAMES (4).
# Prints a short summary ([tail] and [row] lines); exit 0 when every run succeeded.
set -uo pipefail
[[ $# -ge 2 ]] || { sed -n '2,19p' "$0"; exit 2; }
B=$(cd "$1" && pwd) || exit 2
W=$2; mkdir -p "$W"; W=$(cd "$W" && pwd)
PSF=${3:-tests/data/psf-r0-00051060.fits}
S=$(dirname "$0")
fail=0

if [[ -x $B/spexd_client_tail_bench || -x $B/tests/bench/spexd_client_tail_bench ]]; then
  for wire in float32 float64; do
    "$B/run.sh" spexd_client_tail_bench --wire $wire --reps 5 --interval_ms 30 --dir "$W" \
      >"$W/tail-$wire.log" 2>&1 || fail=1
    grep -E '^(rep|files|[0-9]+ spectra)' "$W/tail-$wire.log" | sed "s/^/[tail] $wire: /"
  done
else
  echo "[tail] spexd_client_tail_bench not in the bundle: skipped"
fi

MODES=client-fits "$S/spexctl_throughput_device.sh" "$B" "$W/on" "$PSF" >"$W/on.log" 2>&1 || fail=1
grep -E '^\[row\]' "$W/on.log" | grep -v -E 'backend stage medians' | sed 's/^\[row\]/[row] progressive:/'
ref=$(sed -n 's/^\[row\] reference.*: \([0-9.e-]*\) s\/frame.*/\1/p' "$W/on.log" | head -1)
REF=${ref:-} CLIENT_ARGS="--no-progressive-write" MODES=client-fits \
  "$S/spexctl_throughput_device.sh" "$B" "$W/off" "$PSF" >"$W/off.log" 2>&1 || fail=1
grep -E '^\[row\]' "$W/off.log" | grep -v -E 'backend stage medians|reference' |
  sed 's/^\[row\]/[row] whole file:/'
exit $fail
