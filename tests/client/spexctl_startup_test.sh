#!/usr/bin/env bash
# What keeps spexctl's start cheap (docs/performance.md, "spexctl start-up"), checked on the built
# binary:   spexctl_startup_test.sh SPEXCTL STATIC(0|1)
#  - LAPACK/BLAS are never NEEDED (client/spexctl/lapack_on_demand.h), and a local extraction
#    without them is refused with a message, not a crash;
#  - with SPEXD_STATIC_SPEXCTL, only glibc and the GCC runtime are NEEDED (no shared gRPC,
#    protobuf, Abseil, CFITSIO or curl beside the static copies), and the static Abseil is
#    exported for the CUDA module (cmake/SpexctlStaticLink.cmake).
set -uo pipefail
exe=$1 static=$2
fail() { echo "FAIL: $*"; exit 1; }
needed=$(readelf -d "$exe" | awk '/NEEDED/{gsub(/[][]/,"",$5); print $5}')
echo "NEEDED: $(echo $needed)"
grep -qE '^lib(lapack|blas|openblas)' <<<"$needed" && fail "LAPACK/BLAS linked at start-up"
if [[ $static == 1 ]]; then
  # ISA-L (the .fits.gz codec) stays shared: Debian ships no static archive of it, and it is
  # one small library with no dependencies of its own.
  extra=$(grep -vxE 'libstdc\+\+\.so\.6|libm\.so\.6|libgcc_s\.so\.1|libc\.so\.6|ld-linux-x86-64\.so\.2|libisal\.so\.2' <<<"$needed")
  [[ -z $extra ]] || fail "shared libraries beside the static link: $(echo $extra)"
  exported=$(nm -D --defined-only "$exe" | grep -c ' _ZN4absl')
  ((exported > 0)) || fail "static Abseil not exported"
fi
"$exe" --help >/dev/null || fail "spexctl --help"

# A libblas.so.3 that cannot load, found first: the local extraction stops before reading
# anything, with the loader's reason.
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
: >"$tmp/libblas.so.3"
out=$(LD_LIBRARY_PATH=$tmp "$exe" extract --local -i "$tmp/none.fits" -p "$tmp/none-psf.fits" \
      -o "$tmp/frame.fits" -w 5760.0,5800.0,0.8 -n 25 2>&1); rc=$?
echo "without BLAS: exit $rc: $out"
[[ $rc == 1 ]] || fail "expected exit 1 without BLAS, got $rc"
grep -q 'needs BLAS (libblas.so.3)' <<<"$out" || fail "no BLAS message"
echo "PASS"
