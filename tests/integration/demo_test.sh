#!/usr/bin/env bash
# scripts/demo.sh end to end on the built binaries, on a short grid:
# it must print the metrics excerpt (curl comes from scripts/install-deps.sh) and leave
# nothing behind in the temporary directory (KEEP=1 would keep its ~145 MB).
#   demo_test.sh SPEXD SPEXCTL SPEXD_SIM
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d -t spexd-demo-test-XXXXXX)
trap 'rm -rf -- "$work"' EXIT
mkdir "$work/bin" "$work/tmp"
ln -s "$1" "$work/bin/spexd"
ln -s "$2" "$work/bin/spexctl"
ln -s "$3" "$work/bin/spexd-sim"
fail() {
  printf '%s\n' "$out"
  echo "FAIL: $*"
  exit 1
}
out=$(TMPDIR=$work/tmp SPEXD_BIN=$work/bin FIBERS=0,25 WAVELENGTH=5760.0,5800.0,0.8 \
  timeout 150 "$src/scripts/demo.sh" 2>&1) || fail "demo.sh exited with status $?"
grep -q '^  spexd_requests_total' <<<"$out" || fail "no metrics excerpt in the output"
grep -q 'spexd exited with status 0' <<<"$out" || fail "spexd did not drain and exit 0"
leftover=$(ls -A "$work/tmp")
[[ -z $leftover ]] || fail "demo.sh left files in TMPDIR: $leftover"
echo "PASS: demo ran, printed the metrics excerpt and removed its files"
