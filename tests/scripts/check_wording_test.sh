#!/usr/bin/env bash
# scripts/check_wording.sh on the seeded lines of tests/data/wording: every line marked FIND
# and the file named like a tracker entry are reported, no other line is, and the check
# fails; then the check passes on a copy of the fixture without those lines.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CHECK=$ROOT/scripts/check_wording.sh
FIXTURE=$ROOT/tests/data/wording
fail() { echo "check_wording_test: FAIL: $*"; exit 1; }

set +e
out=$("$CHECK" "$FIXTURE")
rc=$?
set -e
printf '%s\n' "$out"
[ "$rc" -eq 1 ] || fail "exit status $rc on seeded lines, expected 1"
want=$(grep -n 'FIND$' "$FIXTURE/seeded.cc" | cut -d: -f1 | sort -n | tr '\n' ' ')
got=$(printf '%s\n' "$out" | grep -oP '^seeded\.cc:\K[0-9]+' | sort -n | tr '\n' ' ')
[ "$want" = "$got" ] || fail "seeded.cc lines reported: '$got', expected '$want'"
printf '%s\n' "$out" | grep -qxE 'issue[0-9]_bench[.]sh: file name' || fail "file name not reported"
n=$(( $(printf '%s\n' "$want" | wc -w) + 1 ))
printf '%s\n' "$out" | grep -qx "wording: $n finding(s)" || fail "count, expected $n"

# The benign lines alone pass.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
grep -v 'FIND$' "$FIXTURE/seeded.cc" | grep -v '^// A number split' > "$tmp/benign.cc"
"$CHECK" "$tmp" | tail -1 | grep -qx 'wording: clean' || fail "benign lines reported"
echo "check_wording_test: ok"
