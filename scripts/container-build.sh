#!/usr/bin/env bash
# The Dockerfile's build stage, the same for the CPU and the GPU image: installs the build
# dependencies (install-deps.sh), builds spexd, spexctl and spexd-sim (build.sh; the CUDA
# module too when SPEXD_WITH_CUDA=ON and nvcc is present) and installs them, stripped, under
# PREFIX with the list of runtime packages their shared libraries come from.
#   scripts/container-build.sh /opt/spexd      (env: SPEXD_WITH_CUDA, CUDA_ARCHITECTURES, JOBS)
set -euo pipefail
cd "$(dirname "$0")/.."
prefix=${1:?usage: container-build.sh PREFIX}
with_cuda=${SPEXD_WITH_CUDA:-ON}

# The build set only: the test tools (promtool, GoogleTest, ...) are not for the image.
scripts/install-deps.sh --build
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/ccache}
# The hits and misses printed below are this build's alone.
command -v ccache >/dev/null && ccache --zero-stats >/dev/null || true
# RelWithDebInfo like the development builds, so a shared ccache serves both; the
# installed files are stripped below.
BUILD_DIR=build JOBS=${JOBS:-$(nproc)} scripts/build.sh \
  -DSPEXD_WITH_CUDA="$with_cuda" -DSPEXD_BUILD_TESTS=OFF -DSPEXD_BUILD_BENCHMARKS=OFF \
  -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHITECTURES:-80-real;90-real;100-real;100-virtual}"
command -v ccache >/dev/null && ccache --show-stats | grep -E 'Hits|Misses' || true

install -d "$prefix/bin" "$prefix/lib/spexd" "$prefix/share/spexd"
install -s build/server/spexd build/client/spexctl build/client/spexd-sim "$prefix/bin/"
install deploy/container/spexd-entrypoint "$prefix/bin/"
if [[ $with_cuda == ON ]]; then
  # Where the executables look for it: <bin>/../lib/spexd/ (core/backend/cuda_module_loader.h).
  [[ -f build/lib/spexd/libspexd_cuda.so ]] || { echo "container-build: CUDA module not built" >&2; exit 1; }
  install -s build/lib/spexd/libspexd_cuda.so "$prefix/lib/spexd/"
fi
shopt -s nullglob
scripts/runtime-packages.sh "$prefix"/bin/spexd "$prefix"/bin/spexctl "$prefix"/bin/spexd-sim \
  "$prefix"/lib/spexd/*.so >"$prefix/share/spexd/runtime-packages.txt"
echo "container-build: runtime packages: $(tr '\n' ' ' <"$prefix/share/spexd/runtime-packages.txt")"
