#!/usr/bin/env bash
# On the GPU host in one call: the server-written .fits frame's tail
# (the time after the GPU's last bundle) with the frame file written bundle by bundle
# (--progressive_frame_files, the default) against the whole file after the last bundle
# (=false), in the same build and call:
#   1. spexd_frame_write_bench --stages tail,sha256,write (no GPU): tail_whole against
#      tail_progressive for a full r frame into WORK_DIR (wall and CPU, median and p90);
#   2. scripts/spexctl_throughput_device.sh, server-fits mode, PROCS clients x FRAMES frames,
#      with the flag on, then off (the reference benches run once): frames/s, and the
#      server's stage medians (output_file_rows inside the extraction; output_file and
#      output_tail after it: the tail is what should shrink).
#
#   scripts/progressive_write_device.sh BUNDLE_DIR WORK_DIR [PSF]
#     BUNDLE_DIR  device bundle (Release, -DSPEXD_BUILD_BENCHMARKS=ON) with spexd, spexctl,
#                 spexd-sim, spexd_rpc_bench, spexd_cuda_frame_bench, spexd_frame_write_bench
#                 and the CUDA module
#     WORK_DIR    scratch on the disk the server writes to (keep it out of $OUT)
#   Environment: PROCS (8), FRAMES (4), THREADS (8, the bench's writer threads).
# Prints a short summary ([tail] and [row] lines); exit 0 when every run succeeded.
set -uo pipefail
[[ $# -ge 2 ]] || { sed -n '2,20p' "$0"; exit 2; }
B=$(cd "$1" && pwd) || exit 2
W=$2; mkdir -p "$W"; W=$(cd "$W" && pwd)
PSF=${3:-tests/data/psf-r0-00051060.fits}
S=$(dirname "$0")
fail=0

if [[ -x $B/spexd_frame_write_bench || -x $B/tests/bench/spexd_frame_write_bench ]]; then
  "$B/run.sh" spexd_frame_write_bench --stages tail,sha256,write --threads "${THREADS:-8}" \
    --repeats 9 --dir "$W" --json "$W/frame_write_tail.json" 2>"$W/frame_write_tail.log" >/dev/null ||
    fail=1
  grep -E '^(tail_|sha256|write_fsync)' "$W/frame_write_tail.log" | sed 's/^/[tail] /'
else
  echo "[tail] spexd_frame_write_bench not in the bundle: skipped"
fi

MODES=server-fits "$S/spexctl_throughput_device.sh" "$B" "$W/on" "$PSF" >"$W/on.log" 2>&1 || fail=1
grep -E '^\[row\]' "$W/on.log" | grep -v -E 'backend stage medians' | sed 's/^\[row\]/[row] progressive:/'
ref=$(sed -n 's/^\[row\] reference.*: \([0-9.e-]*\) s\/frame.*/\1/p' "$W/on.log" | head -1)
REF=${ref:-} SPEXD_ARGS="--progressive_frame_files=false ${SPEXD_ARGS:-}" MODES=server-fits \
  "$S/spexctl_throughput_device.sh" "$B" "$W/off" "$PSF" >"$W/off.log" 2>&1 || fail=1
grep -E '^\[row\]' "$W/off.log" | grep -v -E 'backend stage medians|reference' |
  sed 's/^\[row\]/[row] whole file:/'
exit $fail
