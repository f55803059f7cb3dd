#!/usr/bin/env bash
# On the GPU host in one call: the one-call inflation of a full r frame's
# .fits.gz (gzip -1, as the brief's frame) on 1, 2, 4, 8 and 16 threads: libdeflate alone
# at 1, the speculative parallel inflation (core/io/internal/parallel_inflate.h) above. No
# GPU needed. Prints one line per thread count and writes inflate.json.
#
#   scripts/inflate_device.sh BUNDLE_DIR OUT_DIR PSF
#     BUNDLE_DIR  a device bundle (its run.sh is used) or a build directory holding
#                 client/spexd-sim and tests/bench/spexd_decode_bench
#     OUT_DIR     frame.fits.gz, inflate.json, inflate.log
#     PSF         tests/data/psf-r0-00051060.fits
#   Environment: THREADS (1,2,4,8,16), REPEATS (5).
#
# Bundle (Release, -DSPEXD_BUILD_BENCHMARKS=ON):
#   ../shared/tools/device-bundle.sh -b build-gpu -o .device/bundle -m lib/spexd/libspexd_cuda.so \
#     client/spexd-sim tests/bench/spexd_decode_bench
# Device call: scripts/inflate_device.sh .device/bundle "$OUT" tests/data/psf-r0-00051060.fits
set -euo pipefail
[[ $# -eq 3 ]] || { sed -n '2,17p' "$0"; exit 2; }
B=$(cd "$1" && pwd)
mkdir -p "$2"
OUT=$(cd "$2" && pwd)
PSF=$3
# shellcheck disable=SC2034  # cmd is a nameref
find_exe() {
  local name=$1 d
  local -n cmd=$2
  if [[ -x $B/run.sh && -x $B/$name ]]; then cmd=("$B/run.sh" "$name"); return 0; fi
  for d in "$B" "$B/client" "$B/tests/bench"; do
    [[ -x $d/$name ]] && { cmd=("$d/$name"); return 0; }
  done
  echo "inflate_device: $name not found in $B" >&2
  exit 2
}
find_exe spexd-sim SIM
find_exe spexd_decode_bench BENCH
echo "cores: $(nproc)"
"${SIM[@]}" --psf="$PSF" --out="$OUT/frame.fits" --fibers=0,500 --wavelength=5760.0,7620.0,0.8 \
  --seed=3 >"$OUT/inflate.log" 2>&1
gzip -1 -f "$OUT/frame.fits"
echo "frame.fits.gz bytes: $(stat -c %s "$OUT/frame.fits.gz")"
"${BENCH[@]}" --input "$OUT/frame.fits.gz" --inflate-only 1 --repeats "${REPEATS:-5}" \
  --inflate-threads "${THREADS:-1,2,4,8,16}" --json "$OUT/inflate.json" 2>&1 | tee -a "$OUT/inflate.log" |
  grep ' inflate, ' | sed 's|^.*inflate, ||'
