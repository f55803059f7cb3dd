#!/usr/bin/env bash
# Configures and builds spexd into ${BUILD_DIR:-build}. Extra arguments go to cmake.
# TARGETS="a b" builds only those targets (scripts/demo.sh: spexd_demo); all by default.
# The CUDA backend is built when nvcc is found (CUDA_HOME or /usr/local/cuda).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
export CCACHE_BASEDIR=$PWD CCACHE_NOHASHDIR=1
# ccache keys every object on the locale variables too: without them here and in the image's
# build stage (which has none), tests/deploy/container_test.sh's compile hits the objects of
# this build instead of compiling all again.
unset LANG LC_ALL LC_CTYPE LC_MESSAGES
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
# Unity builds of the test binaries (cmake/SpexdUnityTests.cmake): about half the test
# compile; SPEXD_UNITY_TESTS=OFF for file-by-file objects (quicker rebuilds of one test).
if [[ ! -f $BUILD_DIR/CMakeCache.txt ]]; then
  cmake -S . -B "$BUILD_DIR" "${gen[@]}" -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo} \
    -DSPEXD_UNITY_TESTS=${SPEXD_UNITY_TESTS:-ON} "$@"
elif [[ $# -gt 0 ]]; then
  cmake -S . -B "$BUILD_DIR" "$@"
fi
targets=()
for t in ${TARGETS:-}; do targets+=(--target "$t"); done
cmake --build "$BUILD_DIR" -j "${JOBS:-$(nproc)}" "${targets[@]}"
