#!/usr/bin/env bash
# scripts/demo.sh end to end on the built binaries, on a short grid: it must print the
# metrics excerpt (fetched with /usr/bin/python3's urllib), keep its results in the output
# folder (DEMO_OUT) and print their paths last, and leave nothing in the temporary directory
# (its ~145 MB of simulated inputs). With the Python package built and Debian's Python
# modules present (PYTHON_PKG), the Python extraction and the QA page (a matplotlib PNG)
# run too; without them only the C++ steps run.
#   demo_test.sh SPEXD SPEXCTL SPEXD_SIM [PYTHON_PKG]
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d -t spexd-demo-test-XXXXXX)
trap 'rm -rf -- "$work"' EXIT
mkdir "$work/bin" "$work/tmp"
ln -s "$1" "$work/bin/spexd"
ln -s "$2" "$work/bin/spexctl"
ln -s "$3" "$work/bin/spexd-sim"
pkg=${4:-}
if [[ -n $pkg ]] && ! /usr/bin/python3 -c "import grpc, numpy, fitsio, matplotlib" 2>/dev/null; then
  echo "note: /usr/bin/python3 lacks grpcio, numpy, fitsio or matplotlib: the C++ steps only"
  pkg=
fi
fail() {
  printf '%s\n' "$out"
  echo "FAIL: $*"
  exit 1
}
# DEMO_OUT relative to the caller's directory, as a user would give it.
out=$(cd "$work" && TMPDIR=$work/tmp SPEXD_BIN=$work/bin PYTHON_PKG=$pkg DEMO_OUT=results \
  FIBERS=0,25 WAVELENGTH=5760.0,5800.0,0.8 timeout 150 "$src/scripts/demo.sh" 2>&1) ||
  fail "demo.sh exited with status $?"
res=$work/results
grep -q '^  spexd_requests_total' <<<"$out" || fail "no metrics excerpt in the output"
grep -q 'spexd exited with status 0' <<<"$out" || fail "spexd did not drain and exit 0"
# Nothing on a successful run reads like an error. The backend line says why a machine
# without a GPU runs the CPU backend, in CUDA's words (cudaErrorNoDevice and the like).
errorlike=$(grep -viE '^backend: cpu: no GPU available' <<<"$out" | grep -iE 'not importable|error' || true)
[[ -z $errorlike ]] || fail "an error-like line in a successful run: $errorlike"
leftover=$(ls -A "$work/tmp")
[[ -z $leftover ]] || fail "demo.sh left files in TMPDIR: $leftover"
# The closing lines name the kept results, which are there.
qa_line="QA page:                 $res/qa.png"
[[ -z $pkg ]] && qa_line="QA page:                 none (no Python package or no matplotlib, above)"
want=$(printf '%s\n' "== results, kept in $res" \
  "frame (desispec layout): $res/frame.fits" "$qa_line" "server log:              $res/spexd.log")
[[ $(tail -n 4 <<<"$out") == "$want" ]] || fail "the last lines are not, exactly: $want"
grep -q '"event":"listening"' "$res/spexd.log" || fail "no server log kept in $res"
[[ $(head -c 6 "$res/frame.fits") == SIMPLE ]] || fail "no FITS frame kept in $res"
if [[ -z $pkg ]]; then
  [[ $(ls "$res") == $'frame.fits\nspexd.log' ]] || fail "results: $(ls "$res")"
  echo "PASS: demo ran, printed the metrics excerpt and kept its results in $res"
  exit 0
fi
grep -q '^python: flux (25, ' <<<"$out" || fail "no Python extraction in the output"
# The QA page: a 1600 x 1000 PNG with the frame drawn (many colours, not a blank page).
/usr/bin/python3 - "$res/qa.png" <<'PY' || fail "$res/qa.png is not the QA page"
import sys
import numpy as np
from PIL import Image
with Image.open(sys.argv[1]) as im:
    colours = len(np.unique(np.asarray(im.convert("RGB")).reshape(-1, 3), axis=0))
    print(f"QA page: {im.format} {im.size}, {colours} colours")
    sys.exit(0 if (im.format, im.size) == ("PNG", (1600, 1000)) and colours > 500 else 1)
PY
echo "PASS: demo ran (Python and QA page too), printed the metrics excerpt and kept its results in $res"
