#!/usr/bin/env bash
# Builds the CPU image through the top-level Dockerfile and runs it, with real parts only:
#  1. a Debian 12 base made locally with mmdebstrap (no registry can be reached) and imported;
#  2. `buildah bud --isolation chroot` of the Dockerfile with Debian 12 bases and CUDA off
#     (the GPU image differs only in these build arguments);
#  3. the image's own entrypoint run as its own (non-root) user with `buildah run
#     --isolation chroot` (podman run is refused on these machines: setrlimit/cgroups);
#  4. from the host: `spexctl health`, the image's HEALTHCHECK command inside the container,
#     an extraction by /data path whose FLUX (and IVAR, MASK, WAVELENGTH, RESOLUTION) is
#     bit-identical to a local extraction, a scrape of /metrics;
#  5. SIGTERM: spexd exits 0 well within its drain period.
# Caches: the mmdebstrap tarball (under SPEXD_CONTAINER_CACHE); apt's lists and .debs in the
# Dockerfile's cache mounts (buildah's own directories); and the host's ccache, mounted for
# the compile step and named by the CCACHE_DIR build argument, so that the image's compile
# reuses the objects of the host's build (scripts/test.sh's, same flags) where the headers
# agree. Needs root (apt, buildah). SPEXD_SKIP_CONTAINER_TEST=1 skips it.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
BUILD_DIR=${BUILD_DIR:-build}
source tests/deploy/lib.sh

if [[ -n ${SPEXD_SKIP_CONTAINER_TEST:-} ]]; then
  echo "container_test: SKIPPED (SPEXD_SKIP_CONTAINER_TEST is set)"
  exit 0
fi
[[ $(id -u) -eq 0 ]] || fail "container_test needs root (apt-get, buildah storage)"
need_binaries
T0=$(date +%s)
elapsed() { echo "$(($(date +%s) - T0)) s"; }

CACHE=${SPEXD_CONTAINER_CACHE:-/var/cache/spexd-container}
BASE=localhost/spexd-base/debian:12
IMAGE=localhost/spexd:cpu-test
WORK=$(mktemp -d -t spexd-container-XXXXXX)
CTR=
RUN_PID=
cleanup() {
  if [[ -n $RUN_PID ]] && kill -0 "$RUN_PID" 2>/dev/null; then kill -KILL "$RUN_PID" || true; fi
  if [[ -n $CTR ]]; then buildah rm "$CTR" >/dev/null 2>&1 || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

say "1. tools: buildah, mmdebstrap (the test installs nothing: scripts/install-deps.sh --container)"
for tool in buildah mmdebstrap; do
  command -v "$tool" >/dev/null ||
    fail "$tool not found: scripts/install-deps.sh --container installs buildah and mmdebstrap"
done
buildah --version

say "2. Debian 12 base image ($BASE)"
mkdir -p "$CACHE"
if ! buildah inspect --type image "$BASE" >/dev/null 2>&1; then
  tarball=$CACHE/debian12-minbase.tar
  if [[ ! -s $tarball ]]; then
    mmdebstrap --quiet --variant=minbase --mode=root bookworm "$tarball.tmp" \
      "deb http://deb.debian.org/debian bookworm main" \
      "deb http://deb.debian.org/debian bookworm-updates main" \
      "deb http://deb.debian.org/debian-security bookworm-security main"
    mv "$tarball.tmp" "$tarball"
  fi
  ctr=$(buildah from scratch)
  buildah add --quiet "$ctr" "$tarball" / >/dev/null
  buildah config --cmd /bin/bash "$ctr"
  buildah commit --quiet --rm "$ctr" "$BASE" >/dev/null
fi
say "   base ready ($(elapsed))"

say "3. buildah bud: CPU image from the Dockerfile"
# The directory the host's builds use (ccache's own answer: CCACHE_DIR, a legacy ~/.ccache or
# $XDG_CACHE_HOME/ccache).
CCACHE_HOST=$(ccache --get-config cache_dir 2>/dev/null || true)
CCACHE_HOST=${CCACHE_HOST:-${CCACHE_DIR:-$HOME/.cache/ccache}}
mkdir -p "$CCACHE_HOST"
version=$(sed -n 's/^project(spexd VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)
tb=$(date +%s)
buildah bud --isolation chroot --format docker --quiet=false \
  --build-arg BUILD_BASE="$BASE" --build-arg RUNTIME_BASE="$BASE" \
  --build-arg SPEXD_WITH_CUDA=OFF --build-arg JOBS="$(nproc)" \
  --build-arg VERSION="$version" --build-arg REVISION="$revision" \
  -v "$CCACHE_HOST:/spexd-host-ccache" --build-arg CCACHE_DIR=/spexd-host-ccache \
  -t "$IMAGE" -f Dockerfile . >"$WORK/bud.log" 2>&1 || { tail -n 60 "$WORK/bud.log"; fail "buildah bud"; }
grep -E 'container-build: runtime packages|Hits|Misses' "$WORK/bud.log" || true
size=$(buildah images --format '{{.Size}}' "$IMAGE" | head -n1)
say "   image built in $(($(date +%s) - tb)) s, size $size ($(elapsed))"

say "4. image metadata"
buildah inspect --type image "$IMAGE" >"$WORK/inspect.json"
python3 - "$WORK/inspect.json" "$version" "$revision" >"$WORK/meta.env" <<'PY'
import json, shlex, sys
cfg = json.load(open(sys.argv[1]))["Docker"]["config"]
def check(ok, what):
    if not ok:
        sys.exit(f"image metadata: {what}: {json.dumps(cfg, indent=1)}")
check(cfg.get("User") and not cfg["User"].startswith(("root", "0")), "runs as a non-root user")
check(set(cfg.get("ExposedPorts", {})) == {"50051/tcp", "9464/tcp"}, "exposes 50051 and 9464")
check(cfg.get("StopSignal") == "SIGTERM", "STOPSIGNAL SIGTERM")
hc = (cfg.get("Healthcheck") or {}).get("Test") or []
check(len(hc) == 2 and hc[0] == "CMD-SHELL" and "spexctl health" in hc[1], "HEALTHCHECK with spexctl health")
labels = cfg.get("Labels") or {}
check(labels.get("org.opencontainers.image.version") == sys.argv[2], "OCI version label")
check(labels.get("org.opencontainers.image.revision") == sys.argv[3], "OCI revision label")
check(cfg.get("Entrypoint"), "an entrypoint")
print("IMAGE_USER=" + shlex.quote(cfg["User"]))
print("IMAGE_ENTRYPOINT=(" + " ".join(shlex.quote(a) for a in cfg["Entrypoint"] + (cfg.get("Cmd") or [])) + ")")
print("IMAGE_HEALTHCHECK=" + shlex.quote(hc[1]))
PY
source "$WORK/meta.env"
echo "   user $IMAGE_USER, entrypoint ${IMAGE_ENTRYPOINT[*]}, healthcheck: $IMAGE_HEALTHCHECK"

say "5. run the entrypoint as $IMAGE_USER (buildah run --isolation chroot, /data read-only)"
DATA=$WORK/data
make_case "$DATA" 0,25 7
chmod -R a+rX "$WORK"
PORT=$(free_port)
MPORT=$(free_port)
CTR=$(buildah from --quiet "$IMAGE")
# Step 7 compares bits with a host extraction, so the container must use the host's
# OpenBLAS kernels: these machines set OPENBLAS_CORETYPE=Haswell, while OpenBLAS inside the
# container detects the CPU itself (Cooperlake here), and its AVX-512 kernels round a few
# RESOLUTION values differently (1e-16 relative; 2026-11-23, CI). Same kernels, same bits.
BLAS_ENV=()
while IFS='=' read -r name value; do
  if [[ $name == OPENBLAS_* ]]; then BLAS_ENV+=(--env "$name=$value"); fi
done < <(env)
buildah run --isolation chroot --user "$IMAGE_USER" "${BLAS_ENV[@]}" \
  --env SPEXD_PORT="$PORT" --env SPEXD_METRICS_PORT="$MPORT" \
  -v "$DATA:/data:ro" "$CTR" -- "${IMAGE_ENTRYPOINT[@]}" >"$WORK/spexd.log" 2>&1 &
RUN_PID=$!
wait_serving "127.0.0.1:$PORT" 60 || { cat "$WORK/spexd.log"; fail "spexd in the container never became SERVING"; }
"$SPEXCTL" health --server "127.0.0.1:$PORT"
grep -q '"event":"listening"' "$WORK/spexd.log" || fail "no listening event in the log"
# The process runs as the image's user, not root.
SPEXD_PID=$(descendant_named "$RUN_PID" spexd)
[[ -n $SPEXD_PID ]] || { ps -ef --forest >&2; fail "spexd process of the container not found"; }
echo "   spexd pid $SPEXD_PID, uid $(stat -c %u /proc/"$SPEXD_PID")"
[[ $(stat -c %u /proc/"$SPEXD_PID") -ne 0 ]] || fail "spexd runs as root"

say "6. the image's HEALTHCHECK command, inside the container"
buildah run --isolation chroot --user "$IMAGE_USER" --env SPEXD_PORT="$PORT" "$CTR" -- \
  /bin/sh -c "$IMAGE_HEALTHCHECK" || fail "HEALTHCHECK command failed"

say "7. extract by /data path, compare with a local extraction"
"$SPEXCTL" extract --server "127.0.0.1:$PORT" --server-path -q -i /data/preproc-7.fits \
  -p /data/psf.fits -o "$WORK/remote.fits" -w "$CASE_WAVELENGTH" -s 0 -n 25
"$SPEXCTL" extract --local -q -i "$DATA/preproc-7.fits" -p "$DATA/psf.fits" -o "$WORK/local.fits" \
  -w "$CASE_WAVELENGTH" -s 0 -n 25
python3 tests/deploy/fits_compare.py "$WORK/remote.fits" "$WORK/local.fits" \
  FLUX IVAR MASK WAVELENGTH RESOLUTION || fail "container extraction differs from the local one"

say "8. scrape /metrics on its own port"
text=$(scrape "127.0.0.1:$MPORT") || fail "no /metrics on port $MPORT"
ok=$(metric "$text" 'spexd_requests_total{code="OK",rpc="ExtractFrame"}')
bundles=$(metric "$text" 'spexd_bundles_total')
echo "   ExtractFrame OK: $ok, bundles: $bundles"
[[ $ok == 1 && $bundles == 1 ]] || fail "metrics do not show the extraction"
if command -v promtool >/dev/null; then promtool check metrics <<<"$text"; fi

say "9. SIGTERM: exit 0 within the drain"
ts=$(date +%s.%N)
kill -TERM "$SPEXD_PID"
status=0
wait "$RUN_PID" || status=$?
RUN_PID=
took=$(python3 -c "import time; print(round(time.time() - $ts, 2))")
tail -n 2 "$WORK/spexd.log"
echo "   exit status $status after ${took} s (drain period 30 s)"
[[ $status -eq 0 ]] || fail "spexd exited with $status"
python3 -c "import sys; sys.exit(0 if $took < 30 else 1)" || fail "exit took longer than the drain"
grep -q '"event":"drained"' "$WORK/spexd.log" || fail "no drained event in the log"

# The working container first: an image still used by one is not removed (storage leak).
buildah rm "$CTR" >/dev/null 2>&1 || true
CTR=
buildah rmi "$IMAGE" >/dev/null 2>&1 || true
say "container_test: PASS in $(elapsed) (image $size)"
