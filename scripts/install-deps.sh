#!/usr/bin/env bash
# Installs the Debian/Ubuntu packages spexd needs, skipping the step when all are present.
# Works on Debian 12 and Ubuntu 24.04 as root, or through sudo. Every package is installed
# with --no-install-recommends. One set per purpose, so that a first try of the demo does
# not pull in the test toolchain:
#
#   scripts/install-deps.sh --build     build spexd, spexctl and spexd-sim (the container image)
#   scripts/install-deps.sh --demo      --build + the Python client and its QA page
#                                       (matplotlib; scripts/demo.sh)
#   scripts/install-deps.sh [--tests]   --demo + every tool the test suite uses (scripts/test.sh):
#                                       GoogleTest, python3-jsonschema for the Kubernetes
#                                       test, promtool, a one-node Slurm, clang, ...
#   scripts/install-deps.sh --desispec  --tests + the modules DESI's own Python stack imports
#   scripts/install-deps.sh --container buildah and mmdebstrap only, for the container image test
#                                       (tests/deploy/container_test.sh, a step of .ci/run)
#
# The tests themselves install nothing and fetch nothing: a test whose tool is missing skips
# and names this script.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:---tests}
case $mode in
  --build | --demo | --tests | --desispec | --container) ;;
  *) echo "usage: scripts/install-deps.sh [--build | --demo | --tests | --desispec | --container]" >&2; exit 2 ;;
esac

# --build: the compiler, CMake and the libraries the three programs link. g++ rather than
# build-essential: CMake and Ninja need no make, dpkg-dev or patch (6 packages fewer on a
# fresh Debian 12); git is a test tool (below).
PKGS=(
  g++ cmake ninja-build pkg-config
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libcfitsio-dev zlib1g-dev libdeflate-dev libabsl-dev prometheus-cpp-dev
  libisal-dev  # ISA-L: .fits.gz inflation and the parallel gzip writer (core/io/internal/gzip.cc)
  libbz2-dev  # CFITSIO's static archive calls bzip2 (spexctl's static link, cmake/SpexctlStaticLink.cmake)
  liblapacke-dev libopenblas-dev
  liberfa-dev  # --barycentric-correction (core/plan/barycentric.cc); the runtime list adds liberfa1
)
OPTIONAL=()
DAEMON_PKGS=()
# --container: the image test's tools alone (it builds the image from a Debian base of its own).
if [[ $mode == --container ]]; then
  PKGS=(buildah mmdebstrap)
fi
# --demo: the Python client (client/python, import spexd) on Debian's /usr/bin/python3 (no
# PyPI), fitsio (CFITSIO, which --build has already) to read frames for its QA page: a
# small part of what astropy would pull in (Debian 12's hard-depends on pytest and its
# plugins), and matplotlib to draw the page, as astronomers' and desispec's QA plots are.
# python3-munkres is named so that it, not python3-scipy, satisfies python3-fonttools'
# (matplotlib's) "scipy | munkres": the first choice would pull in SciPy, Pythran and the
# Boost headers (about 20 packages) that nothing here uses. The metrics excerpt is fetched
# with Python's urllib, not curl.
if [[ $mode != --build && $mode != --container ]]; then
  PKGS+=(python3 python3-grpcio python3-protobuf python3-numpy python3-fitsio
         python3-matplotlib python3-munkres)
fi
# --tests: GoogleTest and Google Benchmark; astropy for the Python client's array uploads and
# frame files (matplotlib, from --demo, also draws tests/load/soak.py --plot's figure). pip,
# setuptools and venv for the offline `pip install` tests (cmake --install runs it too);
# jsonschema and yaml for the Kubernetes manifest check (tests/deploy/k8s_test.sh, against
# schemas kept in the tree).
if [[ $mode == --tests || $mode == --desispec ]]; then
  PKGS+=(libgtest-dev libgmock-dev libbenchmark-dev
         python3-astropy python3-jsonschema python3-yaml
         python3-pip python3-setuptools python3-venv
         fitsverify  # HEASARC's FITS checker on every kind of file written (tests/scripts/fitsverify_frames_test.sh)
         curl  # the deploy tests scrape /metrics and query Prometheus (tests/deploy/lib.sh)
         git)  # the wording check and the container test read the tree with git
  # Optional helpers: ccache speeds rebuilds; patchelf/binutils pack the GPU bundle; clang
  # checks the lock annotations (scripts/thread_safety_check.sh), and with its runtimes builds
  # the fuzz targets (scripts/fuzz.sh).
  OPTIONAL=(ccache patchelf binutils clang libclang-rt-dev)
  # Optional too: a one-node Slurm (slurmctld, slurmd, the client commands) and munge, which
  # tests/deploy/slurm_test.sh starts and configures itself under a temporary directory to
  # submit deploy/slurm/spexd-extract.sbatch. The packages' own daemons must not run: they
  # are installed with starts refused (policy-rc.d) and left disabled at boot.
  DAEMON_PKGS=(slurm-wlm munge)
  OPTIONAL+=("${DAEMON_PKGS[@]}")
fi
DAEMON_SERVICES=(munge slurmctld slurmd)
# --desispec (scripts/desispec_stack.sh): the Debian modules DESI's own Python stack imports,
# for the tests that run desispec's code (ctest -L desispec; docs/desispec.md). spexd needs
# none of them.
if [[ $mode == --desispec ]]; then
  PKGS+=(python3-numba python3-healpy python3-scipy python3-yaml)  # fitsio: --demo
fi

missing=()
for p in "${PKGS[@]}" "${OPTIONAL[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
SUDO=
if [[ $(id -u) -ne 0 ]]; then SUDO=sudo; fi

# promtool (from Debian's `prometheus` package) checks the service's /metrics output in the
# tests. Only the binary is unpacked (apt-get download + dpkg-deb -x): installing the
# package would also install and start the Prometheus daemon.
PROMTOOL_DIR=${PROMTOOL_DIR:-/usr/local/lib/spexd-tools/prometheus}
install_promtool() {
  if command -v promtool >/dev/null 2>&1; then return 0; fi
  if [[ ! -x $PROMTOOL_DIR/usr/bin/promtool ]]; then
    local tmp
    tmp=$(mktemp -d)
    if ! (cd "$tmp" && apt-get download prometheus >/dev/null 2>&1); then
      ${SUDO} apt-get -o DPkg::Lock::Timeout=300 -q update >/dev/null || true
      (cd "$tmp" && apt-get download prometheus) || {
        echo "install-deps: could not download the prometheus package (promtool); metrics lint tests will say so"
        rm -rf "$tmp"
        return 0
      }
    fi
    ${SUDO} mkdir -p "$PROMTOOL_DIR"
    ${SUDO} dpkg-deb -x "$tmp"/prometheus_*.deb "$PROMTOOL_DIR"
    rm -rf "$tmp"
  fi
  ${SUDO} ln -sf "$PROMTOOL_DIR/usr/bin/promtool" /usr/local/bin/promtool
  echo "install-deps: promtool at /usr/local/bin/promtool ($("$PROMTOOL_DIR"/usr/bin/promtool --version 2>&1 | head -1))"
}

test_tools() {
  [[ $mode == --tests || $mode == --desispec ]] || return 0
  install_promtool
}

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install-deps: all packages present ($mode)"
  test_tools
  exit 0
fi

export DEBIAN_FRONTEND=noninteractive
APT=(${SUDO} apt-get -o DPkg::Lock::Timeout=300 -y -q)
echo "install-deps ($mode): installing ${missing[*]}"
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
test_tools
