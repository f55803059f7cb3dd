#!/usr/bin/env bash
# The README's demo: installs what it needs (scripts/install-deps.sh --demo: no test tools),
# builds what it runs (the spexd_demo target: no tests), starts spexd on loopback (CUDA
# backend when a GPU and the module are present, else CPU), simulates a frame with the
# bundled PSF, extracts it through the client, prints a short summary (timings, median
# S/N per fibre), extracts it again from Python (spexd.Client, /usr/bin/python3), writes
# the QA page (qa.svg, for a web browser) and stops the server with SIGTERM (graceful
# drain). The QA page is kept, and its path printed last.
#
#   scripts/demo.sh                 # 50 fibres (2 bundles) on the r grid
#   FIBERS=0,100 scripts/demo.sh    # more fibres
#   KEEP=1 scripts/demo.sh          # keep the files (~145 MB: preproc, truth, frame, log);
#                                   # by default only qa.svg stays in the temporary directory
#   DEMO_DIR=DIR scripts/demo.sh    # work in DIR (created if needed) and keep the files
#   SPEXD_BIN=DIR scripts/demo.sh   # use prebuilt spexd, spexctl, spexd-sim from DIR (e.g. a
#                                   # bundle copied to a GPU host that cannot build); skips
#                                   # installing and building
#
# Extra arguments go to CMake at the first configure (e.g. -DSPEXD_WITH_CUDA=OFF). A first
# configure here leaves the tests out (-DSPEXD_BUILD_TESTS=OFF); scripts/test.sh turns them on.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD_DIR=${BUILD_DIR:-build}
FIBERS=${FIBERS:-0,50}
WAVELENGTH=${WAVELENGTH:-5760.0,7620.0,0.8}
PSF=$ROOT/tests/data/psf-r0-00051060.fits

if [[ -n ${SPEXD_BIN:-} ]]; then
  SPEXD=$SPEXD_BIN/spexd
  SPEXCTL=$SPEXD_BIN/spexctl
  SIM=$SPEXD_BIN/spexd-sim
else
  scripts/install-deps.sh --demo
  first=()
  [[ -f $BUILD_DIR/CMakeCache.txt ]] || first=(-DSPEXD_BUILD_TESTS=OFF)
  TARGETS=spexd_demo scripts/build.sh "${first[@]}" "$@"
  BIN=$ROOT/$BUILD_DIR
  SPEXD=$BIN/server/spexd
  SPEXCTL=$BIN/client/spexctl
  SIM=$BIN/client/spexd-sim
  PYTHON_PKG=$BIN/python
fi
# Debian's interpreter (python3-grpcio etc. install for it; another python3 may come
# first on PATH). SPEXD_PYTHON=... to change; with SPEXD_BIN, PYTHON_PKG=build/python.
PYTHON=${SPEXD_PYTHON:-/usr/bin/python3}
PYTHON_PKG=${PYTHON_PKG:-}
for exe in "$SPEXD" "$SPEXCTL" "$SIM"; do
  [[ -x $exe ]] || { echo "demo: $exe was not built (SPEXD_WITH_SERVER=OFF?)" >&2; exit 1; }
done

REMOVE_DIR=
if [[ -z ${DEMO_DIR:-} ]]; then
  DEMO_DIR=$(mktemp -d -t spexd-demo-XXXXXX)
  [[ ${KEEP:-0} == 1 ]] || REMOVE_DIR=$DEMO_DIR
fi
mkdir -p "$DEMO_DIR"
LOG=$DEMO_DIR/spexd.log
SERVER_PID=
cleanup() {
  if [[ -n $SERVER_PID ]] && kill -0 "$SERVER_PID" 2>/dev/null; then
    kill -TERM "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
  fi
  if [[ -n $REMOVE_DIR ]]; then
    if [[ -f $REMOVE_DIR/qa.svg ]]; then
      find "$REMOVE_DIR" -mindepth 1 ! -name qa.svg -exec rm -rf -- {} +
      echo "demo: removed the files in $REMOVE_DIR but qa.svg (KEEP=1 keeps them all)"
      echo "demo: QA page: $REMOVE_DIR/qa.svg (open it in a browser)"
    else
      rm -rf -- "$REMOVE_DIR"
      echo "demo: removed $REMOVE_DIR (KEEP=1 keeps the files)"
    fi
  fi
}
trap cleanup EXIT

echo
echo "== 1. start spexd on loopback (free ports; log in $LOG)"
"$SPEXD" --listen=127.0.0.1:0 --metrics_listen=127.0.0.1:0 --backend=auto \
  --data_roots="$DEMO_DIR" --drain_seconds=30 2>"$LOG" &
SERVER_PID=$!
PORT=
for _ in $(seq 1 100); do  # bounded: 10 s
  PORT=$(sed -n 's/.*"event":"listening".*"port":\([0-9]*\).*/\1/p' "$LOG" | head -n1)
  [[ -n $PORT ]] && break
  kill -0 "$SERVER_PID" 2>/dev/null || { cat "$LOG" >&2; exit 1; }
  sleep 0.1
done
[[ -n $PORT ]] || { echo "demo: spexd did not start" >&2; cat "$LOG" >&2; exit 1; }
METRICS_PORT=$(sed -n 's/.*"metrics_port":\([0-9]*\).*/\1/p' "$LOG" | head -n1)
SERVER=127.0.0.1:$PORT
for _ in $(seq 1 300); do  # bounded: 30 s of warm-up
  "$SPEXCTL" health --server "$SERVER" --retries 1 --deadline 2 >/dev/null 2>&1 && break
  sleep 0.1
done
"$SPEXCTL" info --server "$SERVER"

echo
echo "== 2. simulate a frame: fibres $FIBERS, grid $WAVELENGTH, bundled PSF"
"$SIM" --psf="$PSF" --out="$DEMO_DIR/preproc.fits" --truth="$DEMO_DIR/truth.fits" \
  --fibers="$FIBERS" --wavelength="$WAVELENGTH" --seed=1 2>&1 | tail -n 2

FIRST=${FIBERS%,*}
COUNT=${FIBERS#*,}
echo
echo "== 3. extract through the server (client-streamed upload; --server-path would send a path)"
"$SPEXCTL" extract --server "$SERVER" -i "$DEMO_DIR/preproc.fits" -p "$PSF" \
  -o "$DEMO_DIR/frame.fits" -m "$DEMO_DIR/model.fits" -w "$WAVELENGTH" -s "$FIRST" \
  -n "$COUNT" --snr >"$DEMO_DIR/snr.txt"
echo "median S/N per fibre (fibre:S/N):"
awk 'NR > 1 { printf "%4d:%-7.1f%s", $1, $2, (++n % 8 == 0 ? "\n" : " ") } END { if (n % 8) print "" }' \
  "$DEMO_DIR/snr.txt"
"$SPEXCTL" psf list --server "$SERVER"
if [[ -z $METRICS_PORT ]]; then
  echo "demo: no metrics port in the server log: metrics excerpt skipped" >&2
elif ! command -v "$PYTHON" >/dev/null; then
  echo "demo: $PYTHON not found (scripts/install-deps.sh installs it): metrics excerpt skipped" >&2
else
  echo "metrics (http://127.0.0.1:$METRICS_PORT/metrics), excerpt:"
  # Python's urllib rather than curl: the demo needs Python anyway. No proxy: the server
  # is on loopback, where an http_proxy setting would only get in the way.
  "$PYTHON" -c 'import sys, urllib.request as u
sys.stdout.write(u.build_opener(u.ProxyHandler({})).open(sys.argv[1], timeout=10).read().decode())' \
    "http://127.0.0.1:$METRICS_PORT/metrics" 2>/dev/null |
    grep -E '^spexd_(requests_total|bundles_total|patches_total|frame_duration_seconds_(sum|count))[ {]' |
    sed 's/^/  /' || true
fi

if [[ -n $PYTHON_PKG && -f $PYTHON_PKG/spexd/__init__.py ]]; then
  echo
  echo "== 4. the same extraction from Python (the preproc file uploaded), then the QA page"
  PYTHONPATH=$PYTHON_PKG "$PYTHON" - "$SERVER" "$DEMO_DIR" "$PSF" "$WAVELENGTH" "$FIRST" "$COUNT" <<'PY'
import sys
import numpy as np
import spexd
server, d, psf, grid, first, count = sys.argv[1:]
client = spexd.Client(server)
# A local path is uploaded as it is; numpy arrays (image=, ivar=, ...) would be too, once
# written into a FITS file in memory with astropy, which the demo does not install.
result = client.extract(image=f"{d}/preproc.fits", psf=psf,
                        wavelength=[float(v) for v in grid.split(",")],
                        specmin=int(first), nspec=int(count))
print(f"python: flux {result.flux.shape} float64, {result.summary.nbundles} bundles, "
      f"median S/N {np.median(result.median_snr()):.1f}, "
      f"{np.count_nonzero(result.mask)} masked bins of {result.mask.size}")
# result.write builds the desispec frame file with astropy (scripts/install-deps.sh
# --tests installs it); the demo's frame file is spexctl's, from step 3.
try:
    import astropy  # noqa: F401
except ImportError:
    astropy = None
if astropy is not None:
    result.write(f"{d}/frame-py.fits")
    print(f"python: wrote {d}/frame-py.fits")
try:
    result.to_desispec()
except spexd.DesispecUnavailable as e:
    print(f"python: to_desispec(): {str(e).split(' (')[0]}")
PY
  PYTHONPATH=$PYTHON_PKG "$PYTHON" -m spexd.qa "$DEMO_DIR/frame.fits" -o "$DEMO_DIR/qa.svg" \
    --model "$DEMO_DIR/model.fits" --image "$DEMO_DIR/preproc.fits"
fi

echo
echo "== 5. stop spexd (SIGTERM: drain, then exit 0)"
kill -TERM "$SERVER_PID"
status=0
wait "$SERVER_PID" || status=$?
SERVER_PID=
echo "spexd exited with status $status"
qa="no QA page (the Python package was not built)"
[[ -f $DEMO_DIR/qa.svg ]] && qa="QA page: $DEMO_DIR/qa.svg (open it in a browser)"
echo "frame: $DEMO_DIR/frame.fits (desispec layout); $qa; server log: $LOG"
exit "$status"
