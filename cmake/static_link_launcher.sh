#!/usr/bin/env bash
# Link launcher (RULE_LAUNCH_LINK) that links the named libraries from their static
# archives: cmake/SpexctlStaticLink.cmake says why. CMake's link line names Debian's shared
# libraries by full path (imported targets) or as -lNAME; each of those whose NAME matches
# the comma-separated list $1 (shell patterns) is replaced by libNAME.a (an error when there
# is none), and all libraries are wrapped in one --start-group/--end-group, since archives must be
# searched again for the symbols of archives after them.
#   static_link_launcher.sh NAME,NAME,... COMPILER ARGS...
set -euo pipefail
IFS=, read -r -a patterns <<<"$1"
shift
is_wanted() {
  local p
  for p in "${patterns[@]}"; do [[ $1 == $p ]] && return 0; done  # shell patterns (absl_*)
  return 1
}

archive_for() {  # $1: a link argument; prints the archive that replaces it, if any
  local arg=$1 dir name
  case "$arg" in
    -l*) name=${arg#-l}; dir= ;;
    /*.so | /*.so.*) name=$(basename "$arg"); name=${name#lib}; name=${name%%.so*}; dir=$(dirname "$arg") ;;
    *) return 1 ;;
  esac
  is_wanted "$name" || return 1
  for d in $dir /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/lib; do
    [[ -n $d && -f $d/lib$name.a ]] && { echo "$d/lib$name.a"; return 0; }
  done
  # A listed library left shared beside its static users would be two copies in one process.
  echo "static_link_launcher: no archive lib$name.a for $arg" >&2
  return 2
}

out=() grouped=0 after_output=0
while [[ $# -gt 0 ]]; do
  arg=$1; shift
  if [[ $arg == -o ]]; then out+=("$arg" "$1"); shift; after_output=1; continue; fi
  # Libraries follow the objects and -o in CMake's link rule; the group opens at the first.
  if ((after_output && !grouped)) && [[ $arg != -* || $arg == -l* || $arg == -Wl,* ]]; then
    out+=(-Wl,--start-group); grouped=1
  fi
  rc=0; a=$(archive_for "$arg") || rc=$?
  case $rc in 0) out+=("$a") ;; 1) out+=("$arg") ;; *) exit 1 ;; esac
done
((grouped)) && out+=(-Wl,--end-group)
exec "${out[@]}"
