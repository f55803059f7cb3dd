#!/usr/bin/env bash
# A/B of two spexd builds' served throughput on one GPU host in one call: the base build
# and the new one take turns (base, new, base, new, ...) under the same load of `spexctl`
# clients (scripts/spexctl_throughput_device.sh), against one reference measured once
# (spexd_cuda_frame_bench, two frames in flight), and a table of each turn's rates, spexd's
# page faults per frame and the backend's host stages comes last. Turns alternate so that
# a drift of the host (page cache, clocks, a neighbour) is not read as the change.
#
# On the GPU machine:
#   scripts/spexd_ab_device.sh BUNDLE WORK_DIR [PSF]
#     BUNDLE    a device bundle folder (or its .tar.gz, unpacked into WORK_DIR) holding
#               the new build's spexd, spexctl, spexd-sim, spexd_cuda_frame_bench and CUDA
#               module (lib/), and the base build's spexd and CUDA module in base/ (a
#               module beside its executable is the one that executable loads,
#               core/backend/cuda_module_loader.cc, so each build finds its own).
#     WORK_DIR  scratch for the frames (136 MB each) and the logs; keep it out of $OUT.
#   Environment: PROCS (32), FRAMES (12), MODES ("server-fits client-fits"), ROUNDS (2:
#   turns per build), BUDGET_S (420: no turn starts past it, so that the call returns its
#   table inside its limit), LOGS (a folder, e.g. $OUT: every turn's log copied there);
#   the rest (GPUS, SPEXD_ARGS, IDENTICAL_SAMPLE, ...) goes to spexctl_throughput_device.sh.
#
# Here, to put a base build into a bundle made by ../shared/tools/device-bundle.sh:
#   scripts/spexd_ab_device.sh --add-base BASE_BUILD_DIR BUNDLE_DIR
#   (BASE_BUILD_DIR/server/spexd and BASE_BUILD_DIR/lib/spexd/libspexd_cuda.so, stripped,
#   with search paths that reach the bundle's lib/.)
set -uo pipefail
HOST_CUDA_DIRS='/usr/local/cuda/lib64:/usr/local/cuda-13.0/lib64:/usr/local/cuda/targets/x86_64-linux/lib'

if [[ ${1:-} == --add-base ]]; then
  [[ $# -eq 3 ]] || { sed -n '2,27p' "$0"; exit 2; }
  set -e
  base=$2 bundle=$3
  mkdir -p "$bundle/base"
  install -m 755 "$base/server/spexd" "$bundle/base/spexd"
  install -m 755 "$base/lib/spexd/libspexd_cuda.so" "$bundle/base/libspexd_cuda.so"
  strip "$bundle/base/spexd"
  strip --strip-unneeded "$bundle/base/libspexd_cuda.so"
  # An RPATH, not a RUNPATH: it also reaches the bundled libraries' own dependencies.
  patchelf --force-rpath --set-rpath '$ORIGIN/../lib' "$bundle/base/spexd"
  patchelf --set-rpath "\$ORIGIN:\$ORIGIN/../lib:$HOST_CUDA_DIRS" "$bundle/base/libspexd_cuda.so"
  echo "base build added: $(du -sh "$bundle/base" | cut -f1) in $bundle/base"
  exit 0
fi

[[ $# -ge 2 ]] || { sed -n '2,27p' "$0"; exit 2; }
S=$(cd "$(dirname "$0")" && pwd)
W=$2; mkdir -p "$W"; W=$(cd "$W" && pwd)
B=$1
if [[ -f $B ]]; then
  tar -C "$W" -xzf "$B" || { echo "cannot unpack $B"; exit 1; }
  B=$W/$(tar -tzf "$1" | head -1 | cut -d/ -f1)
fi
B=$(cd "$B" && pwd) || exit 2
PSF=${3:-tests/data/psf-r0-00051060.fits}
ROUNDS=${ROUNDS:-2} BUDGET_S=${BUDGET_S:-420}
export PROCS=${PROCS:-32} FRAMES=${FRAMES:-12} MODES=${MODES:-server-fits client-fits}
export REF_SOURCE=${REF_SOURCE:-frame_bench} IDENTICAL_SAMPLE=${IDENTICAL_SAMPLE:-4}
for f in spexd base/spexd base/libspexd_cuda.so lib/libspexd_cuda.so spexctl spexd-sim spexd_cuda_frame_bench; do
  [[ -e $B/$f ]] || { echo "bundle $B lacks $f"; exit 1; }
done
{ date -u; nvidia-smi -L; echo "cores: $(nproc)"; } 2>&1 | sed 's/^/[host] /'

t0=$SECONDS fail=0 turns=()
for ((r = 1; r <= ROUNDS; ++r)); do
  for build in base new; do
    if ((SECONDS - t0 > BUDGET_S)); then
      echo "[skip] $build turn $r: past BUDGET_S=$BUDGET_S s"; continue
    fi
    bin=spexd; [[ $build == base ]] && bin=base/spexd
    log=$W/ab-$build-$r.log
    SPEXD_BIN=$bin "$S/spexctl_throughput_device.sh" "$B" "$W/run" "$PSF" >"$log" 2>&1 || fail=1
    echo "== $build turn $r done at t=$((SECONDS - t0)) s"
    grep -E '\[row\] (reference|backend with|[a-z-]+: [0-9]+ frames|[a-z-]+ steady|[a-z-]+: spexd minor|[a-z-]+: [0-9]+ of [0-9]+ frame files|host CPU)' "$log" |
      sed 's/\[row\] /  /'
    # The reference is measured once, by the first turn; the others take it as given.
    if [[ -z ${REF:-} ]]; then
      REF=$(grep -o 'reference[^=]*: [0-9.e-]* s/frame' "$log" | grep -o '[0-9.e-]* s/frame' | cut -d' ' -f1 | head -1)
      [[ -n $REF ]] && export REF
    fi
    [[ -n ${LOGS:-} ]] && cp "$log" "$LOGS/" 2>/dev/null
    turns+=("$build $r $log")
  done
done

# The table: per turn and mode, frames/s (whole run, steady state), the ratio to N x the
# reference, page faults per frame, and the backend's host stages per frame (from the
# stage lines the throughput script prints).
echo "== A/B ($PROCS clients x $FRAMES frames, reference ${REF:-?} s/frame)"
for t in "${turns[@]}"; do
  read -r build r log <<<"$t"
  for mode in $MODES; do
    rate=$(grep -oE "\[row\] $mode: [0-9]+ frames in [0-9.]+ s = [0-9.]+ frames/s[^;]*" "$log" | sed "s/\[row\] $mode: //")
    steady=$(grep -oE "\[row\] $mode steady state: [^;]*" "$log" | sed "s/.*= //")
    same=$(grep -oE "\[row\] $mode: [0-9]+ of [0-9]+ frame files byte-identical" "$log" | grep -oE '[0-9]+ of [0-9]+')
    faults=$(grep -oE "\[row\] $mode: spexd minor page faults per frame [0-9]+" "$log" | grep -oE '[0-9]+$')
    busy=$(grep -E "\[row\] $mode \[server\] [0-9]+ requests" "$log" | grep -oE '(GPU busy|extract_s) [0-9.]+' | tr '\n' ' ')
    host=$(grep -E "\[row\] $mode \[server\] backend stage" "$log" | grep -oE '[ :,](host_prepare|host) [0-9.e-]+' | tr -d ',:' | tr '\n' ' ')
    printf '%-4s %d %-12s %s | steady %s | identical %s | faults/frame %s | %s| medians:%s\n' \
      "$build" "$r" "$mode" "${rate:-FAILED}" "${steady:-?}" "${same:-?}" "${faults:-?}" "$busy" "$host"
  done
done
echo "total $((SECONDS - t0)) s"
exit $fail
