#!/usr/bin/env bash
# Served throughput with real `spexctl` clients against the
# backend's own two-frames-in-flight throughput, on the GPU machine in one call.
#   1. the reference: the smallest (strictest) time per frame of spexd_rpc_bench's backend
#      median and in-process service with two in flight, and spexd_cuda_frame_bench's backend
#      with two frames in flight (the issue's reference; frames/s = 1 / that);
#   2. spexd (CUDA) serving PROCS `spexctl extract --server-path` processes, each extracting
#      FRAMES full r frames one after another, for each mode (MODE-IN[-outgz]):
#        client-fits / client-gz    input .fits / .fits.gz; spectra streamed (float32 wire),
#                                   client writes -o .fits (-outgz: -o .fits.gz)
#        server-fits / server-gz    input .fits / .fits.gz; --server-output-path .fits
#                                   (-outgz: .fits.gz, written by spexd), nothing streamed back
#      wall time of the whole run -> frames/s, and its ratio to (1) (goal >= 0.9; 0.85 with
#      gzip both in and out).
#      Also the steady-state rate (every client past its first frame, none at its last).
#
#   scripts/spexctl_throughput_device.sh BUNDLE_DIR WORK_DIR [PSF]
#     BUNDLE_DIR  device bundle with spexd, spexctl, spexd-sim, spexd_cuda_frame_bench (and
#                 spexd_rpc_bench unless REF_SOURCE=frame_bench), the CUDA module; e.g.
#                 ../shared/tools/device-bundle.sh -b build-gpu -o .device/NAME/bundle \
#                   -m lib/spexd/libspexd_cuda.so server/spexd client/spexctl client/spexd-sim \
#                   tests/bench/spexd_cuda_frame_bench tests/bench/spexd_rpc_bench
#                 (ISA-L's libisal.so.2 is bundled with them, as every Debian library is)
#     WORK_DIR    scratch (frames are 136 MB each; keep it out of $OUT)
#   With N GPUs visible (GPUS, default nvidia-smi's count) the goal is 0.9 x N x (1).
#   Environment: PROCS (8), FRAMES (4), MODES ("client-fits client-gz server-fits server-gz";
#   also client-fits-outgz, client-gz-outgz, server-fits-outgz, server-gz-outgz); GZIP_LEVEL
#   (6: the input .fits.gz written by Python's gzip module at that level, as desispec writes
#   preprocs); REF_SOURCE (both: the faster of spexd_rpc_bench and spexd_cuda_frame_bench;
#   frame_bench: spexd_cuda_frame_bench's two frames in flight alone, the issue's reference);
#   SPEXD_ARGS (extra spexd flags); CLIENT_ARGS (extra spexctl flags of the client modes, e.g.
#   --wire-precision float64); SERVER_ARGS (of the server modes, e.g. --server-checksum crc32);
#   NSPEC, WAVE, BACKEND for a small CPU smoke run; REF (s per frame: skip the reference
#   benches and use it); PERF (a perf binary: spexd sampled during each mode, its profile by
#   symbol in $W/perf-MODE.txt; PERF_ALL=1: every process on the host, by process and
#   symbol); SPEXD_BIN (spexd: the server executable in the bundle, for an A/B of two
#   builds: copy the other build's spexd in, stripped, with `patchelf --force-rpath
#   --set-rpath '$ORIGIN/lib'`; a RUNPATH does not reach the bundled libraries' own
#   dependencies and that spexd fails to start); SPEXCTL_BIN (spexctl: the clients', the
#   same way); IDENTICAL_SAMPLE (0: every frame file is compared with the warm-up's;
#   N: the first N of each mode, where reading them all would take longer than the run);
#   WARM_FRAMES (0: server-written frames each client extracts before the timed modes; the
#   several-GPU figures in docs/performance.md say whether they had 2, a long-running
#   service's state, or none, a spexd just started); SPEXD_CPUS (a taskset CPU list, e.g.
#   0-15: spexd held to those cores, a host-limited stand-in for a node with more GPUs a
#   core than this one; the clients run anywhere).
#   Prints [row] lines; exit 0 when every run succeeded.
set -uo pipefail
[[ $# -ge 2 ]] || { sed -n '2,47p' "$0"; exit 2; }
B=$(cd "$1" && pwd) || exit 2
W=$2; mkdir -p "$W"/in "$W"/out; W=$(cd "$W" && pwd)
PSF=$(readlink -f "${3:-tests/data/psf-r0-00051060.fits}")
PROCS=${PROCS:-8} FRAMES=${FRAMES:-4}
GPUS=${GPUS:-$(nvidia-smi -L 2>/dev/null | wc -l)}; ((GPUS >= 1)) || GPUS=1
MODES=${MODES:-client-fits client-gz server-fits server-gz}
WAVE=${WAVE:-5760.0,7620.0,0.8} NSPEC=${NSPEC:-500} BACKEND=${BACKEND:-cuda}
row() { echo "[row] $*"; }
# spexd's CPU seconds per thread name (digits dropped: "spexd-worker1" counts as "spexd-worker").
threads_cpu() {
  local tick; tick=$(getconf CLK_TCK)
  for t in /proc/"${SPID:-self}"/task/*/stat; do
    awk -v tick="$tick" '{ s = $0; sub(/^[^(]*\(/, "", s); name = s; sub(/\).*$/, "", name)
      sub(/^.*\) /, "", s); split(s, f, " "); gsub(/[0-9]+$/, "", name); gsub(/ /, "_", name)
      printf "%s %.3f\n", name, (f[12] + f[13]) / tick }' "$t" 2>/dev/null
  done
}
# busy and total jiffies of all cores, spexd's CPU seconds, and the time: one line.
cpu_now() {
  local tick; tick=$(getconf CLK_TCK)
  awk -v tick="$tick" -v pid="${SPID:-0}" -v now="$(date +%s.%N)" '
    FNR == 1 && FILENAME == "/proc/stat" { idle = $5 + $6; tot = 0; for (i = 2; i <= NF; i++) tot += $i }
    FILENAME != "/proc/stat" { srv = ($14 + $15) / tick }
    END { printf "%d %d %.3f %s\n", tot - idle, tot, srv + 0, now }' /proc/stat "/proc/${SPID:-self}/stat"
}
fail=0
# The clients run spexctl itself, as a pipeline would: not through the bundle's run.sh (a
# shell, a subshell and dirname a frame; spexctl needs none of the CUDA libraries it finds).
SPEXCTL=("$B/${SPEXCTL_BIN:-spexctl}"); [[ -x ${SPEXCTL[0]} ]] || SPEXCTL=("$B/run.sh" "${SPEXCTL_BIN:-spexctl}")

cp "$PSF" "$W/in/psf.fits"
if [[ ! -f $W/in/frame.fits ]]; then
  "$B/run.sh" spexd-sim --psf="$W/in/psf.fits" --out="$W/in/frame.fits" --fibers=0,$NSPEC \
    --wavelength="$WAVE" --seed=3 >/dev/null 2>&1 || { row "spexd-sim FAILED"; exit 1; }
fi
if [[ ! -f $W/in/frame.fits.gz ]]; then
  python3 -c 'import gzip, shutil, sys
with open(sys.argv[1], "rb") as f, gzip.open(sys.argv[2], "wb", compresslevel=int(sys.argv[3])) as g:
    shutil.copyfileobj(f, g, 1 << 22)' "$W/in/frame.fits" "$W/in/frame.fits.gz" "${GZIP_LEVEL:-6}" ||
    { row "gzip of the input FAILED"; exit 1; }
  row "input: $(stat -c %s "$W/in/frame.fits") bytes, .fits.gz (Python gzip level ${GZIP_LEVEL:-6}) $(stat -c %s "$W/in/frame.fits.gz") bytes"
fi

if [[ -n ${REF:-} ]]; then
  ref=$REF
  row "reference given (REF): $ref s/frame = $(python3 -c "print(round(1/$ref,2))") frames/s"
else
ref=
[[ ${REF_SOURCE:-both} == frame_bench ]] ||
ref=$("$B/run.sh" spexd_rpc_bench --backend $BACKEND --fibers $NSPEC --repeats 6 --inflight 2 \
  --client-procs 0 --psf "$W/in/psf.fits" 2>"$W/rpc_bench.err" | tee "$W/rpc_bench.json" |
  python3 -c 'import json,sys; d=json.loads(sys.stdin.read().strip().splitlines()[-1]); print(min(d["backend_s"]["median"], d["service_per_frame_inflight_s"]))' 2>/dev/null)
# The issue's reference: the backend alone with two frames in flight (spexd_cuda_frame_bench,
# one backend per thread on the GPU), when it is faster than the above.
if [[ $BACKEND == cuda ]] && "$B/run.sh" spexd_cuda_frame_bench --runs 3 --check-bundles "" \
    --psf "$W/in/psf.fits" --json "$W/frame_bench.json" >"$W/frame_bench.log" 2>&1; then
  fps2=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["inflight_frames_per_second"])' \
    "$W/frame_bench.json" 2>/dev/null)
  [[ -n $fps2 && -n $ref ]] && ref=$(python3 -c "print(min($ref, 1 / $fps2))")
  [[ -n $fps2 && -z $ref ]] && ref=$(python3 -c "print(1 / $fps2)")
  row "backend with two frames in flight: $fps2 frames/s"
fi
if [[ -z $ref ]]; then
  row "backend reference: not found in rpc_bench output"; tail -5 "$W/rpc_bench.err"; ref=0
else
  row "reference (the fastest of: backend, service and backend with 2 in flight): $ref s/frame = $(python3 -c "print(round(1/$ref,2))") frames/s"
fi
fi

PORT=50093
${SPEXD_CPUS:+taskset -c "$SPEXD_CPUS"} "$B/run.sh" "${SPEXD_BIN:-spexd}" --listen=127.0.0.1:$PORT \
  --data_roots="$W/in" --output_roots="$W/out" \
  --backend=$BACKEND ${SPEXD_ARGS:-} >"$W/spexd.log" 2>&1 &
SPID=$!
trap 'kill -TERM $SPID 2>/dev/null; wait $SPID 2>/dev/null' EXIT
for _ in $(seq 60); do
  "$B/run.sh" spexctl health --server 127.0.0.1:$PORT >/dev/null 2>&1 && break; sleep 1
done
# Warm: the PSF and its geometry; and the reference frames (IN_IMG names the input, so one
# per input).
for x in fits fits.gz; do
  "$B/run.sh" spexctl extract --server 127.0.0.1:$PORT --server-path -q -i "$W/in/frame.$x" \
    -p "$W/in/psf.fits" -w "$WAVE" -n $NSPEC -o "$W/warm.$x.fits" 2>/dev/null ||
    { row "warm-up FAILED"; exit 1; }
done

# WARM_FRAMES > 0: PROCS clients extract that many server-written frames each first, untimed,
# so that the timed modes meet a server whose buffer pools have seen the clients' concurrency.
if (( ${WARM_FRAMES:-0} > 0 )); then
  for p in $(seq "$PROCS"); do
    ( for f in $(seq "$WARM_FRAMES"); do
        "${SPEXCTL[@]}" extract --server 127.0.0.1:$PORT --server-path -q -i "$W/in/frame.fits" \
          -p "$W/in/psf.fits" -w "$WAVE" -n $NSPEC --server-output-path "$W/out/warm-p$p-f$f.fits" \
          >/dev/null 2>&1 || exit 1
      done ) &
  done
  wait_ok=1; for pid in $(jobs -p); do [[ $pid == "$SPID" ]] || wait "$pid" || wait_ok=0; done
  row "warm-up: $PROCS clients x $WARM_FRAMES frames $([[ $wait_ok == 1 ]] && echo ok || echo FAILED)"
fi

for mode in $MODES; do
  in=$W/in/frame.fits; [[ $mode == *-gz* ]] && in=$W/in/frame.fits.gz
  ext=fits; [[ $mode == *-outgz ]] && ext=fits.gz
  goal=0.9; [[ $mode == *-gz-outgz ]] && goal=0.85
  rm -rf "$W/out"/* "$W"/client-* "$W"/clog-*; mkdir -p "$W/out"
  first=$(wc -l <"$W/spexd.log")
  cpu0=$(cpu_now); threads_cpu >"$W/threads0"
  flt0=$(awk '{print $10}' /proc/$SPID/stat); thp0=$(awk '$1 == "thp_fault_alloc" {print $2}' /proc/vmstat)
  if [[ -n ${PERF:-} ]]; then
    scope=(-p "$SPID"); [[ -n ${PERF_ALL:-} ]] && scope=(-a)
    "$PERF" record -q -F 499 -g "${scope[@]}" -o "$W/perf-$mode.data" >/dev/null 2>&1 &
    perf_pid=$!
  fi
  t0=$(date +%s.%N); pids=()
  for p in $(seq "$PROCS"); do
    (
      exec 2>"$W/clog-$p"  # each spexctl's timing line, and the wall of each invocation
      for f in $(seq "$FRAMES"); do
        s0=$EPOCHREALTIME
        if [[ $mode == server-* ]]; then
          "${SPEXCTL[@]}" extract --server 127.0.0.1:$PORT --server-path -q -i "$in" \
            -p "$W/in/psf.fits" -w "$WAVE" -n $NSPEC ${SERVER_ARGS:-} --server-output-path "$W/out/p$p-f$f.$ext" \
            >/dev/null || exit 1
        else
          "${SPEXCTL[@]}" extract --server 127.0.0.1:$PORT --server-path -q -i "$in" \
            -p "$W/in/psf.fits" -w "$WAVE" -n $NSPEC ${CLIENT_ARGS:-} -o "$W/client-p$p-f$f.$ext" || exit 1
        fi
        echo "wall $s0 $EPOCHREALTIME" >&2  # no process here: it would slow the client
      done
    ) &
    pids+=($!)
  done
  ok=1; for pid in "${pids[@]}"; do wait "$pid" || ok=0; done
  t1=$(date +%s.%N)
  if [[ -n ${PERF:-} ]]; then
    kill -INT "$perf_pid" 2>/dev/null; wait "$perf_pid" 2>/dev/null
    # Self time by symbol, then by thread: what the host's cores did for spexd.
    { [[ -n ${PERF_ALL:-} ]] && "$PERF" report -i "$W/perf-$mode.data" --no-children \
          --sort comm,dso,sym -g none --percent-limit 0.2 2>&1
      "$PERF" report -i "$W/perf-$mode.data" --no-children --sort dso,sym -g none --percent-limit 0.3 2>&1
      "$PERF" report -i "$W/perf-$mode.data" --no-children --sort comm -g none 2>&1
      "$PERF" report -i "$W/perf-$mode.data" --no-children --sort sym -g caller,0.5,callee \
        --percent-limit 2 2>&1 | head -400; } | grep -v '^$' >"$W/perf-$mode.txt"
  fi
  cpu1=$(cpu_now); threads_cpu >"$W/threads1"
  flt1=$(awk '{print $10}' /proc/$SPID/stat); thp1=$(awk '$1 == "thp_fault_alloc" {print $2}' /proc/vmstat)
  n=$((PROCS * FRAMES))
  # Memory spexd maps afresh per frame (its buffer pools should make this ~0): minor page
  # faults of the process, and transparent huge pages allocated on a fault (host-wide).
  row "$mode: spexd memory after the run: $(awk '/^(VmRSS|RssAnon)/ {printf "%s %d MB ", $1, $2 / 1024}' /proc/$SPID/status)$(awk '/^AnonHugePages/ {printf "AnonHugePages %d MB", $2 / 1024}' /proc/$SPID/smaps_rollup 2>/dev/null)"
  row "$mode: spexd minor page faults per frame $(( (flt1 - flt0) / n )), host THP faults per frame $(( (${thp1:-0} - ${thp0:-0}) / n ))"
  # The whole run's rate, then the same once every client is past its first frame and before
  # the first one ends its last: the whole run also counts the start (all clients' first
  # loads at once) and the finish (clients ending at different times), ~0.5 s of a short run.
  python3 - "$t0" "$t1" "$n" "$ref" "$mode" "$ok" "$GPUS" "$W" "$goal" <<'PY'
import glob, sys
t0, t1, n, ref = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
mode, ok, gpus, w = sys.argv[5], sys.argv[6] == "1", int(sys.argv[7]), sys.argv[8]
goal = float(sys.argv[9])
def rate(frames, seconds):
    fps = frames / seconds
    return fps, (fps * ref / gpus if ref > 0 else float("nan"))
fps, ratio = rate(n, t1 - t0)
print(f"[row] {mode}: {n} frames in {t1 - t0:.2f} s = {fps:.2f} frames/s, "
      f"{ratio:.2f} of {gpus} x the one-GPU backend (goal {goal} {'MET' if ratio >= goal else 'missed'}); "
      f"{'all ok' if ok else 'A CLIENT FAILED'}")
clients = []
for f in sorted(glob.glob(w + "/clog-*")):
    ends = [float(l.split()[2]) for l in open(f) if l.startswith("wall ")]
    if ends: clients.append(ends)
if clients and min(len(c) for c in clients) >= 3:
    a = max(c[0] for c in clients); b = min(c[-1] for c in clients)
    k = sum(1 for c in clients for e in c if a < e <= b)
    if b > a and k > 0:
        fps, ratio = rate(k, b - a)
        print(f"[row] {mode} steady state: {k} frames in {b - a:.2f} s = {fps:.2f} frames/s, "
              f"{ratio:.2f} of {gpus} x the one-GPU backend")
PY
  [[ $ok == 1 ]] || fail=1
  # Where the host's cores went during the run: busy share of all cores, and spexd's part.
  python3 - "$cpu0" "$cpu1" "$(nproc)" <<'PY'
import sys
a, b, n = sys.argv[1].split(), sys.argv[2].split(), int(sys.argv[3])
busy0, total0, srv0, wall0 = map(float, a); busy1, total1, srv1, wall1 = map(float, b)
wall = wall1 - wall0
print(f"[row] host CPU over the run: {(busy1 - busy0) / (total1 - total0):.2f} of {n} cores busy; "
      f"spexd {(srv1 - srv0) / wall:.1f} cores, everything else {((busy1 - busy0) / (total1 - total0)) * n - (srv1 - srv0) / wall:.1f}")
PY
  python3 - "$W/threads0" "$W/threads1" "$(python3 -c "print($t1 - $t0)")" <<'PY'
import sys
def read(p):
    d = {}
    for line in open(p):
        name, s = line.rsplit(" ", 1)
        d[name] = d.get(name, 0.0) + float(s)
    return d
a, b, wall = read(sys.argv[1]), read(sys.argv[2]), float(sys.argv[3])
use = sorted(((b[k] - a.get(k, 0.0)) / wall, k) for k in b)
print("[row] spexd cores by thread role: " + ", ".join(f"{k} {c:.2f}" for c, k in reversed(use) if c >= 0.01))
PY
  # Every frame file, written by the server or by a client, .fits or .fits.gz input, must be
  # byte for byte the warm-up's (a client-written frame of the same input), checksum
  # dates aside (CFITSIO stamps them).
  # A .fits.gz output is compared inflated: its bytes must be the .fits file's.
  files=(); for f in "$W"/client-*.$ext "$W"/out/*.$ext; do [[ -f $f ]] && files+=("$f"); done
  ref_frame=$W/warm.fits.fits; [[ $mode == *-gz* ]] && ref_frame=$W/warm.fits.gz.fits
  checked=${#files[@]}
  if [[ ${IDENTICAL_SAMPLE:-0} -gt 0 && $checked -gt $IDENTICAL_SAMPLE ]]; then
    checked=$IDENTICAL_SAMPLE; files=("${files[@]:0:$checked}")
  fi
  same=$(python3 "$(dirname "$0")/frames_identical.py" "$ref_frame" "${files[@]}")
  row "$mode: $same frame files byte-identical to the client-written warm-up frame (checksum dates aside)"
  [[ $same == "$checked of $checked" ]] || fail=1
  rm -f "$W"/client-*.fits "$W"/client-*.fits.gz  # after the run: deleting them is no part of a client's work
  python3 "$(dirname "$0")/throughput_breakdown.py" "$W/spexd.log" "$first" \
    "$(python3 -c "print($t1 - $t0)")" "$GPUS" "$W"/clog-* | sed "s/^/[row] $mode /"
  grep -h -v -E '^(wall|spexctl:)' "$W"/clog-* | head -3
done
grep -c '"event":"extract_done"' "$W/spexd.log" | sed 's/^/[row] extract_done lines: /'
exit $fail
