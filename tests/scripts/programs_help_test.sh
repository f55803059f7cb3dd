#!/usr/bin/env bash
# Every program's --help: exit status 0, the usage on stdout, and its own flags listed (a
# newcomer's first command; Debian's Abseil alone exits 1 and lists none of ours); spexd
# --version.
#   programs_help_test.sh SPEXD SPEXCTL SPEXD_SIM [SPEXD_HANDOFF_EXAMPLE]
set -uo pipefail
fail=0
# expect PROGRAM ARGS... -- PATTERN...: runs PROGRAM ARGS, wants exit 0 and every PATTERN.
expect() {
  local args=() out rc p
  while [[ $1 != -- ]]; do args+=("$1"); shift; done
  shift
  out=$("${args[@]}" 2>&1)
  rc=$?
  if [[ $rc -ne 0 ]]; then
    echo "FAIL: ${args[*]} exited with $rc"; printf '%s\n' "$out" | head -5; fail=1; return
  fi
  for p in "$@"; do
    if ! grep -qe "$p" <<<"$out"; then
      echo "FAIL: ${args[*]}: no '$p' in its output"; printf '%s\n' "$out" | head -5; fail=1; return
    fi
  done
  echo "ok: ${args[*]} (exit 0, $(grep -c -- '^ *--' <<<"$out") flag lines)"
}
expect "$1" --help -- '--listen' '--data_roots' '--backend' '--helpfull'
expect "$1" --helpfull -- '--listen' '--flagfile'
expect "$1" -h -- '--listen'
expect "$2" --help -- 'spexctl extract'
expect "$2" extract --help -- '--local' '--server'
expect "$3" --help -- '--psf' '--out' '--fibers' '--wavelength'
if [[ -n ${4:-} ]]; then
  expect "$4" --help -- '--psf' '--data_dir'
fi
# --version: the version number, exit 0, and not Abseil's "Debug build" line (printed from
# the Abseil library's own build, whatever spexd's).
expect "$1" --version -- '^spexd [0-9][0-9.]*$'
if "$1" --version 2>&1 | grep -q 'Debug build'; then
  echo "FAIL: spexd --version prints Abseil's 'Debug build' line"; fail=1
fi
# A program that is asked for help does nothing else: spexd must not start serving.
if timeout 10 "$1" --help --listen=127.0.0.1:0 >/dev/null 2>&1; then :; else
  echo "FAIL: spexd --help --listen=... did not exit 0 at once"; fail=1
fi
[[ $fail -eq 0 ]] && echo "programs_help: PASS"
exit "$fail"
