#!/usr/bin/env bash
# Installs the Debian/Ubuntu packages spexd needs, skipping the step when all are present.
# Works on Debian 12 and Ubuntu 24.04 as root, or through sudo.
set -euo pipefail

PKGS=(
  build-essential cmake ninja-build pkg-config git
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libcfitsio-dev zlib1g-dev libdeflate-dev libabsl-dev prometheus-cpp-dev
  libisal-dev  # ISA-L: .fits.gz inflation and the parallel gzip writer (core/io/internal/gzip.cc)
  libbz2-dev  # CFITSIO's static archive calls bzip2 (spexctl's static link, cmake/SpexctlStaticLink.cmake)
  libgtest-dev libgmock-dev libbenchmark-dev
  liblapacke-dev libopenblas-dev
  liberfa-dev  # --barycentric-correction (core/plan/barycentric.cc); the runtime list adds liberfa1
  # The Python client (client/python, import spexd) and its tests run on Debian's
  # /usr/bin/python3 with these modules (no PyPI needed).
  python3 python3-grpcio python3-protobuf python3-numpy python3-astropy python3-matplotlib
  python3-pil
  # pip install of the package and spexd-desi-extract (offline; cmake --install runs it)
  python3-pip python3-setuptools python3-venv
  curl  # scripts/demo.sh reads the metrics endpoint with it
)
# Optional helpers: ccache speeds rebuilds; patchelf/binutils pack the GPU bundle; curl
# scrapes /metrics in tests/deploy; clang checks the lock annotations
# (scripts/thread_safety_check.sh), and with its runtimes builds the fuzz targets
# (scripts/fuzz.sh); Debian's Python packages run the load test and draw its plot
# (tests/load/soak.py).
OPTIONAL=(ccache patchelf binutils curl clang libclang-rt-dev python3-numpy python3-astropy
          python3-matplotlib)
# Optional too: a one-node Slurm (slurmctld, slurmd, the client commands) and munge, which
# tests/deploy/slurm_test.sh starts and configures itself under a temporary directory to
# submit deploy/slurm/spexd-extract.sbatch. The packages' own daemons must not run: they
# are installed with starts refused (policy-rc.d) and left disabled at boot.
DAEMON_PKGS=(slurm-wlm munge)
DAEMON_SERVICES=(munge slurmctld slurmd)
OPTIONAL+=("${DAEMON_PKGS[@]}")
# With --desispec (scripts/desispec_stack.sh): the Debian modules DESI's own Python stack
# imports, for the tests that run desispec's code (ctest -L desispec; docs/desispec.md).
# spexd needs none of them.
DESISPEC_PKGS=(python3-numba python3-fitsio python3-healpy python3-scipy python3-yaml)
if [[ ${1:-} == --desispec ]]; then
  PKGS+=("${DESISPEC_PKGS[@]}")
fi

missing=()
for p in "${PKGS[@]}" "${OPTIONAL[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# promtool (from Debian's `prometheus` package) checks the service's /metrics output in the
# tests. Only the binary is unpacked (apt-get download + dpkg-deb -x): installing the
# package would also install and start the Prometheus daemon.
PROMTOOL_DIR=${PROMTOOL_DIR:-/usr/local/lib/spexd-tools/prometheus}
install_promtool() {
  if [[ -n ${SPEXD_SKIP_PROMTOOL:-} ]]; then return 0; fi  # e.g. the container build
  if command -v promtool >/dev/null 2>&1; then return 0; fi
  local sudo=
  if [[ $(id -u) -ne 0 ]]; then sudo=sudo; fi
  if [[ ! -x $PROMTOOL_DIR/usr/bin/promtool ]]; then
    local tmp
    tmp=$(mktemp -d)
    if ! (cd "$tmp" && apt-get download prometheus >/dev/null 2>&1); then
      ${sudo} apt-get -o DPkg::Lock::Timeout=300 -q update >/dev/null || true
      (cd "$tmp" && apt-get download prometheus) || {
        echo "install-deps: could not download the prometheus package (promtool); metrics lint tests will say so"
        rm -rf "$tmp"
        return 0
      }
    fi
    ${sudo} mkdir -p "$PROMTOOL_DIR"
    ${sudo} dpkg-deb -x "$tmp"/prometheus_*.deb "$PROMTOOL_DIR"
    rm -rf "$tmp"
  fi
  ${sudo} ln -sf "$PROMTOOL_DIR/usr/bin/promtool" /usr/local/bin/promtool
  echo "install-deps: promtool at /usr/local/bin/promtool ($("$PROMTOOL_DIR"/usr/bin/promtool --version 2>&1 | head -1))"
}

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install-deps: all packages present"
  install_promtool
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
daemons=()
for p in "${missing[@]}"; do
  if [[ " ${DAEMON_PKGS[*]} " == *" $p "* ]]; then daemons+=("$p"); continue; fi
  if [[ " ${OPTIONAL[*]} " == *" $p "* ]]; then
    "${APT[@]}" install --no-install-recommends "$p" || echo "install-deps: optional $p not installed"
  fi
done
# Daemon packages: a policy-rc.d that refuses every start (unless the machine has one
# already, as Debian's container images do), then every unit disabled at boot and stopped
# in case it started anyway.
if [[ ${#daemons[@]} -gt 0 ]]; then
  policy=/usr/sbin/policy-rc.d own_policy=
  if [[ ! -e $policy ]]; then
    printf '#!/bin/sh\nexit 101\n' | ${SUDO} tee "$policy" >/dev/null
    ${SUDO} chmod 755 "$policy"
    own_policy=1
  fi
  "${APT[@]}" install --no-install-recommends "${daemons[@]}" ||
    echo "install-deps: optional ${daemons[*]} not installed (tests/deploy/slurm_test.sh will skip)"
  [[ -z $own_policy ]] || ${SUDO} rm -f "$policy"
  for s in "${DAEMON_SERVICES[@]}"; do
    if command -v systemctl >/dev/null 2>&1; then
      ${SUDO} systemctl disable "$s" >/dev/null 2>&1 || true
      if [[ -d /run/systemd/system ]]; then ${SUDO} systemctl stop "$s" >/dev/null 2>&1 || true; fi
    fi
    if [[ -x /etc/init.d/$s ]]; then
      ${SUDO} update-rc.d "$s" disable >/dev/null 2>&1 || true
      ${SUDO} /etc/init.d/"$s" stop >/dev/null 2>&1 || true
    fi
  done
fi
install_promtool
