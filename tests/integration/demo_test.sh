#!/usr/bin/env bash
# scripts/demo.sh end to end on the built binaries, on a short grid: it must print the
# metrics excerpt (fetched with /usr/bin/python3's urllib) and leave nothing behind in the
# temporary directory (KEEP=1 would keep its ~145 MB) but the QA page (qa.svg), whose path
# it prints last. With the Python package built and Debian's Python modules present (PYTHON_PKG), the
# Python extraction and the QA page run too; without them only the C++ steps run.
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
if [[ -n $pkg ]] && ! /usr/bin/python3 -c "import grpc, numpy, fitsio" 2>/dev/null; then
  echo "note: /usr/bin/python3 lacks grpcio, numpy or fitsio: the C++ steps only"
  pkg=
fi
fail() {
  printf '%s\n' "$out"
  echo "FAIL: $*"
  exit 1
}
out=$(TMPDIR=$work/tmp SPEXD_BIN=$work/bin PYTHON_PKG=$pkg FIBERS=0,25 WAVELENGTH=5760.0,5800.0,0.8 \
  timeout 150 "$src/scripts/demo.sh" 2>&1) || fail "demo.sh exited with status $?"
grep -q '^  spexd_requests_total' <<<"$out" || fail "no metrics excerpt in the output"
grep -q 'spexd exited with status 0' <<<"$out" || fail "spexd did not drain and exit 0"
if [[ -z $pkg ]]; then
  leftover=$(ls -A "$work/tmp")
  [[ -z $leftover ]] || fail "demo.sh left files in TMPDIR: $leftover"
  echo "PASS: demo ran, printed the metrics excerpt and removed its files"
  exit 0
fi
grep -q '^python: flux (25, ' <<<"$out" || fail "no Python extraction in the output"
kept=$(find "$work/tmp" -type f)
[[ $(wc -l <<<"$kept") -eq 1 && $kept == */qa.svg ]] || fail "expected only qa.svg left, found: $kept"
[[ $(tail -n 1 <<<"$out") == "demo: QA page: $kept (open it in a browser)" ]] ||
  fail "the last line does not name $kept"
# An SVG page with the three images (CHI2PIX, MASK, residual) as embedded PNGs, each decoded
# (tests/python/svg_page.py) to the size of its array: 25 fibres x 51 bins, twice.
PYTHONPATH=$src/tests/python /usr/bin/python3 - "$kept" <<'PY' || fail "$kept is not the QA page"
import sys
import svg_page
page = svg_page.read_page(sys.argv[1])
sizes = [(h, w) for _, (w, h, _, _) in page["images"]]
print(f"QA page: images (rows, columns) {sizes}")
sys.exit(0 if len(sizes) == 3 and sizes[:2] == [(25, 51)] * 2 else 1)
PY
echo "PASS: demo ran (Python and QA page too), printed the metrics excerpt and kept only $kept"
