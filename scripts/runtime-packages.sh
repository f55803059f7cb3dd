#!/usr/bin/env bash
# Prints, one per line, the Debian/Ubuntu packages that hold the shared libraries the given
# ELF files load (ldd, then dpkg -S on each resolved path). The container's runtime stage
# installs exactly these. A library no package owns is reported on stderr.
#   scripts/runtime-packages.sh FILE...
set -euo pipefail
owner() {  # the package owning a path; merged /usr means dpkg may know it under either name
  local p=$1 alt
  case $p in
    /usr/lib/*) alt=${p#/usr} ;;
    /lib/*) alt=/usr$p ;;
    *) alt=$p ;;
  esac
  { dpkg -S "$p" 2>/dev/null || dpkg -S "$alt" 2>/dev/null || true; } | head -n1 | cut -d: -f1
}
declare -A seen=()
for f in "$@"; do
  while read -r lib; do
    for path in "$lib" "$(readlink -f "$lib")"; do
      pkg=$(owner "$path")
      if [[ -n $pkg ]]; then seen[$pkg]=1; break; fi
    done
    [[ -n $pkg ]] || echo "runtime-packages: $lib (needed by $f) belongs to no package" >&2
  done < <(ldd "$f" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }')
done
printf '%s\n' "${!seen[@]}" | sort
