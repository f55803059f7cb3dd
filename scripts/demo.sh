#!/usr/bin/env bash
# The README's demo: installs what it needs (scripts/install-deps.sh --demo: no test tools),
# builds what it runs (the spexd_demo target: no tests), starts spexd on loopback (CUDA
# backend when a GPU and the module are present, else CPU), simulates a frame with the
# bundled PSF, extracts it through the client, prints a short summary (timings, median
# S/N per fibre), extracts it again from Python (spexd.Client, /usr/bin/python3), draws
# the QA page (qa.png, with matplotlib) and stops the server with SIGTERM (graceful
# drain). Its results stay in ./demo-out (git-ignored): the frame, the QA page and the
# server log, whose paths it prints last. The inputs it simulates (~145 MB: preproc,
# truth, model) live in a temporary directory, removed at the end.
#
#   scripts/demo.sh                 # 50 fibres (2 bundles) on the r grid
#   FIBERS=0,100 scripts/demo.sh    # more fibres
#   DEMO_OUT=DIR scripts/demo.sh    # the results in DIR (created if needed) instead
#   KEEP=1 scripts/demo.sh          # the simulated inputs too, in the results folder
#   SPEXD_BIN=DIR scripts/demo.sh   # use prebuilt spexd, spexctl, spexd-sim from DIR (e.g. a
#                                   # bundle copied to a GPU host that cannot build); skips
#                                   # installing and building
#
# Extra arguments go to CMake at the first configure (e.g. -DSPEXD_WITH_CUDA=OFF). A first
# configure here leaves the tests out (-DSPEXD_BUILD_TESTS=OFF); scripts/test.sh turns them on.
set -euo pipefail
# DEMO_OUT as the caller meant it, before the cd below.
DEMO_OUT=${DEMO_OUT:+$(realpath -m -- "$DEMO_OUT")}
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

# OUT: what the demo leaves for the user (frame, QA page, server log); WORK: the simulated
# inputs, in a temporary directory removed at exit (in OUT with KEEP=1).
OUT=${DEMO_OUT:-$ROOT/demo-out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
# A previous run's results are replaced; nothing else in the folder is touched.
rm -f -- "$OUT"/{frame.fits,frame-py.fits,qa.png,spexd.log}
if [[ ${KEEP:-0} == 1 ]]; then
  WORK=$OUT
else
  WORK=$(mktemp -d -t spexd-demo-XXXXXX)
fi
LOG=$OUT/spexd.log
SERVER_PID=
cleanup() {
  if [[ -n $SERVER_PID ]] && kill -0 "$SERVER_PID" 2>/dev/null; then
    kill -TERM "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
  fi
  [[ $WORK == "$OUT" ]] || rm -rf -- "$WORK"
}
trap cleanup EXIT

echo
echo "== 1. start spexd on loopback (free ports; log in $LOG)"
# The log exists before the loop below reads it: the background job's redirection creates it
# only once that job runs, which a loaded machine may delay past the first read.
: >"$LOG"
"$SPEXD" --listen=127.0.0.1:0 --metrics_listen=127.0.0.1:0 --backend=auto \
  --data_roots="$WORK" --drain_seconds=30 2>"$LOG" &
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
"$SIM" --psf="$PSF" --out="$WORK/preproc.fits" --truth="$WORK/truth.fits" \
  --fibers="$FIBERS" --wavelength="$WAVELENGTH" --seed=1 2>&1 | tail -n 2

FIRST=${FIBERS%,*}
COUNT=${FIBERS#*,}
echo
echo "== 3. extract through the server (client-streamed upload; --server-path would send a path)"
"$SPEXCTL" extract --server "$SERVER" -i "$WORK/preproc.fits" -p "$PSF" \
  -o "$OUT/frame.fits" -m "$WORK/model.fits" -w "$WAVELENGTH" -s "$FIRST" \
  -n "$COUNT" --snr >"$WORK/snr.txt"
echo "median S/N per fibre (fibre:S/N):"
awk 'NR > 1 { printf "%4d:%-7.1f%s", $1, $2, (++n % 8 == 0 ? "\n" : " ") } END { if (n % 8) print "" }' \
  "$WORK/snr.txt"
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
  PYTHONPATH=$PYTHON_PKG "$PYTHON" - "$SERVER" "$WORK" "$OUT" "$PSF" "$WAVELENGTH" "$FIRST" "$COUNT" <<'PY'
import importlib.util
import sys
import numpy as np
import spexd
server, d, out, psf, grid, first, count = sys.argv[1:]
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
    result.write(f"{out}/frame-py.fits")
    print(f"python: wrote {out}/frame-py.fits")
# desispec is not packaged in Debian: the Frame in memory is shown only where it is
# installed (docs/desispec.md); elsewhere to_desispec() would raise DesispecUnavailable.
if importlib.util.find_spec("desispec") is not None:
    frame = result.to_desispec()
    print(f"python: to_desispec(): desispec Frame, flux {frame.flux.shape}")
PY
  # matplotlib draws the page (install-deps.sh --demo installs it; a prebuilt SPEXD_BIN
  # host may lack it, and then the demo goes on without the page).
  if "$PYTHON" -c "import matplotlib" 2>/dev/null; then
    PYTHONPATH=$PYTHON_PKG "$PYTHON" -m spexd.qa "$OUT/frame.fits" -o "$OUT/qa.png" \
      --model "$WORK/model.fits" --image "$WORK/preproc.fits"
  else
    echo "demo: $PYTHON cannot import matplotlib (python3-matplotlib): no QA page"
  fi
fi

echo
echo "== 5. stop spexd (SIGTERM: drain, then exit 0)"
kill -TERM "$SERVER_PID"
status=0
wait "$SERVER_PID" || status=$?
SERVER_PID=
echo "spexd exited with status $status"
echo
echo "== results, kept in $OUT"
echo "frame (desispec layout): $OUT/frame.fits"
if [[ -f $OUT/qa.png ]]; then
  echo "QA page:                 $OUT/qa.png"
else
  echo "QA page:                 none (no Python package or no matplotlib, above)"
fi
echo "server log:              $LOG"
exit "$status"
