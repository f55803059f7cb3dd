#!/usr/bin/env bash
# Every kind of FITS file the project writes passes HEASARC's fitsverify (the FITS
# standard and its conventions, checked by a tool that is not ours) with no error and no
# warning: a frame (.fits and .fits.gz), a model image, and the simulator's preproc and
# truth. Small: 25 fibres on a 200 A grid, CPU backend.
#   fitsverify_frames_test.sh SPEXCTL SPEXD_SIM PSF
# Exit 77 (skipped) where fitsverify is not installed (Debian's fitsverify package,
# scripts/install-deps.sh --tests).
set -uo pipefail
SPEXCTL=${1:?spexctl} SIM=${2:?spexd-sim} PSF=${3:?PSF file}
if ! command -v fitsverify >/dev/null 2>&1; then
  echo "SKIPPED: fitsverify is not installed (apt-get install fitsverify)"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
grid=5760.0,5960.0,0.8
"$SIM" --psf="$PSF" --out="$work/preproc.fits" --truth="$work/truth.fits" --fibers=0,25 \
  --wavelength=$grid --seed=7 --hot_pixels=5 --threads=2 >/dev/null ||
  { echo "FAIL: spexd-sim"; exit 1; }
"$SPEXCTL" extract --local -q -i "$work/preproc.fits" -p "$PSF" -w $grid -n 25 \
  -o "$work/frame.fits" -m "$work/model.fits" || { echo "FAIL: spexctl extract (.fits)"; exit 1; }
"$SPEXCTL" extract --local -q -i "$work/preproc.fits" -p "$PSF" -w $grid -n 25 \
  -o "$work/frame.fits.gz" || { echo "FAIL: spexctl extract (.fits.gz)"; exit 1; }
fail=0
for f in frame.fits frame.fits.gz model.fits preproc.fits truth.fits; do
  report=$(fitsverify "$work/$f" 2>&1)
  summary=$(grep -E '^\*\*\*\* Verification found' <<<"$report")
  if [[ $summary == *"found 0 warning(s) and 0 error(s)"* ]]; then
    echo "ok: $f"
  else
    echo "FAIL: $f: ${summary:-no summary}"
    grep -E '\*\*\* (Warning|Error)' <<<"$report" | head -10
    fail=1
  fi
done
[[ $fail -eq 0 ]] && echo "fitsverify_frames: PASS"
exit "$fail"
