#!/usr/bin/env bash
# Compile-only check of the lock annotations (ABSL_GUARDED_BY, ABSL_EXCLUSIVE_LOCKS_REQUIRED,
# ...) with clang's -Wthread-safety: GCC, which builds everything else, ignores them. Runs
# clang -fsyntax-only over core/, server/ and client/ (cuda/ needs nvcc; its host files
# that hold locks are plain C++ but include CUDA headers). Needs the generated headers of
# a configured build directory (BUILD_DIR, default build). Fails on any thread-safety
# warning; other clang warnings are not this check's business.
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
files=(core/*/*.cc core/*/internal/*.cc server/*.cc client/*.cc)
printf '%s\n' "${files[@]}" |
  xargs -P "${JOBS:-$(nproc)}" -I{} "$CXX" -fsyntax-only -std=c++20 -Wno-everything -Wthread-safety \
    -Werror=thread-safety -DSPEXD_BUILD_ID='"thread-safety-check"' -I. \
    -I"$BUILD_DIR/proto/gen" -I"$BUILD_DIR/generated" {}
echo "thread-safety check: ${#files[@]} files clean ($("$CXX" --version | head -1))"
