#!/usr/bin/env bash
# Installs the Debian/Ubuntu packages spexd needs, skipping the step when all are present.
# Works on Debian 12 and Ubuntu 24.04 as root, or through sudo.
set -euo pipefail

PKGS=(
  build-essential cmake ninja-build pkg-config git
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libcfitsio-dev libabsl-dev prometheus-cpp-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  liblapacke-dev libopenblas-dev
)
# Optional helpers: ccache speeds rebuilds; patchelf/binutils pack the GPU bundle.
OPTIONAL=(ccache patchelf binutils)

missing=()
for p in "${PKGS[@]}" "${OPTIONAL[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install-deps: all packages present"
  exit 0
fi

SUDO=
if [[ $(id -u) -ne 0 ]]; then SUDO=sudo; fi
export DEBIAN_FRONTEND=noninteractive
APT=(${SUDO} apt-get -o DPkg::Lock::Timeout=300 -y -q)
echo "install-deps: installing ${missing[*]}"
"${APT[@]}" update
# Required packages must install; optional ones may be missing on some releases.
req=()
for p in "${missing[@]}"; do
  [[ " ${OPTIONAL[*]} " == *" $p "* ]] || req+=("$p")
done
if [[ ${#req[@]} -gt 0 ]]; then
  "${APT[@]}" install --no-install-recommends "${req[@]}"
fi
for p in "${missing[@]}"; do
  if [[ " ${OPTIONAL[*]} " == *" $p "* ]]; then
    "${APT[@]}" install --no-install-recommends "$p" || echo "install-deps: optional $p not installed"
  fi
done
