#!/usr/bin/env bash
# Fails when a file's text or name speaks of how the code was written instead of what it
# does: a clone has no tracker, no work log and no build machine to send the reader to, so
# a tag such as "(issue N)" or "measured in session N" points nowhere; the reason belongs
# where the tag stood.
#
#   scripts/check_wording.sh [DIR]   (default: the repository root)
#
# In a git work tree its tracked and untracked files but the ignored ones are checked, else
# every file under DIR but build*/. Skipped: binary files, this script (it names the
# words) and tests/data/wording/ (the seeded lines tests/scripts/check_wording_test.sh
# proves the rules on).
# Prints one line per finding and "wording: clean" or "wording: N finding(s)"; exits 1 on any.
#
# The rules (case-insensitive). Each needs a number or a fixed phrase, so the words in
# their ordinary senses pass: "a gRPC call", "the TLS session", "issue a warning", "an item
# of the list", "the call watchdog".
#   session N, sessions N-M      a work period               (session[ _]N in names too)
#   call N, calls N              a numbered run on a device
#   issue N, issue #N, issues N  a tracker entry             (issueN, Issue21Foo in names too)
#   item N, items N              a numbered point of such an entry
#   stop N                       a numbered landing of CI runs
#   dev VM, development VM       the machine the code was written on
#   machine start(s)             a lease of a device
#   as before                    a comparison with a state the reader cannot see
#   sN callM                     a run's label, e.g. in file names
# and the first four broken over two lines ("... the issue" then "// 25 ...").
# Not checked: "helper", "the lead" and the like, ordinary words in code and docs.
set -euo pipefail
ROOT=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$ROOT"

TEXT_RULES='\bsessions?[ _]+#?[0-9]|\bcalls?[ _]+#?[0-9]|\bissues?[ _]*#?[0-9]|\b(?-i:[Ii]tems?)[ _]+#?[0-9]|\bstops?[ _]+#?[0-9]|\bdev(elopment)?[ _]+VMs?\b|\bmachine[ _]+starts?\b|\bas[ _]+before\b|\bs[0-9]+_?call[0-9]'
# Names also in CamelCase and snake_case: Issue21InputsAreRefused, issue9_host_bench.sh.
NAME_RULES='issues?_?[0-9]|sessions?_?[0-9]|(^|[^a-z])s[0-9]+_?call[0-9]|dev_?vm'

if git -C "$ROOT" rev-parse --show-toplevel >/dev/null 2>&1 &&
   [ "$(git -C "$ROOT" rev-parse --show-toplevel)" = "$(pwd -P)" ]; then
  list_files() { git ls-files -z --cached --others --exclude-standard; }
else
  list_files() { find . -type f -not -path './.git/*' -not -path './build*' -printf '%P\0'; }
fi
# Skipped: the seeded lines of the rules' own test, and this file, which names the words.
SKIP='^(tests/data/wording/|scripts/check_wording[.]sh$)'

files=$(mktemp)
trap 'rm -f "$files"' EXIT
list_files | grep -zvP -- "$SKIP" > "$files" || true
hits=$(
  tr '\0' '\n' < "$files" | grep -iP -- "$NAME_RULES|$TEXT_RULES" | sed 's/$/: file name/' || true
  xargs -0 -r grep -snHIiP -- "$TEXT_RULES|\b[A-Za-z]*(Issue|Session)_?[0-9]+[A-Za-z_]*\b" < "$files" || true
  # The same words broken across two lines of a comment: "... issue" then "// 25 ...".
  xargs -0 -r grep -lIZ -- '' < "$files" 2>/dev/null | xargs -0 -r awk '
    FNR == 1 { prev = 0 }
    prev && /^[[:space:]]*(\/\/+|#+|\*|--|;+)?[[:space:]]*#?[0-9]/ { print FILENAME ":" FNR ":" $0 }
    { prev = (tolower($0) ~ /(^|[^a-z])(sessions?|issues?|items?|calls?)[[:space:]]*$/) }' || true
)
findings=0
[ -n "$hits" ] && findings=$(printf '%s\n' "$hits" | wc -l) && printf '%s\n' "$hits"

if [ "$findings" -eq 0 ]; then
  echo "wording: clean"
else
  echo "wording: $findings finding(s)"
  exit 1
fi
