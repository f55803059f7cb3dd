#!/usr/bin/env bash
# Compile-only check of the lock annotations (ABSL_GUARDED_BY, ABSL_EXCLUSIVE_LOCKS_REQUIRED,
# ...) with clang's -Wthread-safety: GCC, which builds everything else, ignores them. Runs
# clang -fsyntax-only over every .cc of core/, server/, client/ and cuda/ (sub-folders
# included). cuda's host files are plain C++ that include the CUDA runtime headers
# (CUDA_HOME/include); its .cu files are device code for nvcc and are not checked. Needs
# the generated headers of a configured build directory (BUILD_DIR, default build). Fails
# on any thread-safety warning; other clang warnings are not this check's business.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
CXX=${CLANG_CXX:-$(command -v clang++-14 || command -v clang++ || true)}
if [[ -z $CXX ]]; then
  echo "thread-safety check: no clang++ (scripts/install-deps.sh installs clang)" >&2
  exit 1
fi
if [[ ! -d $BUILD_DIR/proto/gen || ! -f $BUILD_DIR/generated/core/boundary_checksum.h ]]; then
  echo "thread-safety check: build $BUILD_DIR first (needs its generated headers)" >&2
  exit 1
fi
CUDA_INCLUDE=${CUDA_HOME:-/usr/local/cuda}/include
mapfile -t files < <(find core server client -name '*.cc' | sort)
if [[ -f $CUDA_INCLUDE/cuda_runtime_api.h ]]; then
  mapfile -t -O "${#files[@]}" files < <(find cuda -name '*.cc' | sort)
else
  echo "thread-safety check: no CUDA headers in $CUDA_INCLUDE, cuda/ skipped" >&2
fi
printf '%s\n' "${files[@]}" |
  xargs -P "${JOBS:-$(nproc)}" -I{} "$CXX" -fsyntax-only -std=c++20 -Wno-everything -Wthread-safety \
    -Werror=thread-safety -DSPEXD_BUILD_ID='"thread-safety-check"' -I. \
    -I"$BUILD_DIR/proto/gen" -I"$BUILD_DIR/generated" -isystem "$CUDA_INCLUDE" {}
echo "thread-safety check: ${#files[@]} files clean ($("$CXX" --version | head -1))"
