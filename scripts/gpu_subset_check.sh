#!/usr/bin/env bash
# On a GPU node: `--gpu_devices` selects a subset of the GPUs and each
# GPU's work shows in the metrics under its `gpu` label. Starts the real spexd on loopback
# (free ports, data roots = the frame's and the PSF's directories) with --gpu_devices
# $SUBSET, then with every GPU; extracts frames with spexctl client processes; scrapes
# /metrics and checks that the spexd_worker_* series exist for exactly the selected GPUs,
# that each of them did work, that the frames they counted are the frames extracted, and
# that no other GPU holds memory. Then a device that is not there must stop spexd with a
# clear error. Exit status 0 only if every check passed; the table is in OUT_DIR/summary.txt.
#
#   scripts/gpu_subset_check.sh DIR OUT_DIR FRAME PSF
#     DIR         where spexd, spexctl, spexd-sim and the CUDA module are
#                 (scripts/run_program.sh: a build tree, an install prefix or a bundle)
#     OUT_DIR     logs and summary.txt (small: extracted frames go to a temporary directory)
#     FRAME       a preproc frame; written there with spexd-sim from PSF (500 fibres, the r
#                 grid, seed 1) when the file does not exist
#     PSF         its PSF (e.g. tests/data/psf-r0-00051060.fits)
#   Environment: BACKEND (cuda; cpu checks the flow without a GPU: one worker, gpu="cpu"),
#   SUBSET (1,3), CLIENTS_PER_GPU (2), FRAMES_PER_CLIENT (3),
#   EXTRACT_ARGS ("-s 0 -n 500 -w 5760.0,7620.0,0.8"), SIM_FIBERS (0,500).
set -uo pipefail
[[ $# -eq 4 ]] || { sed -n '2,21p' "$0"; exit 2; }
RUN=$(dirname "$(readlink -f "$0")")/run_program.sh
B=$(cd "$1" && pwd) || exit 2
OUT=$2
FRAME=$3
PSF=$(readlink -f "$4")
BACKEND=${BACKEND:-cuda}
SUBSET=${SUBSET:-1,3}
CLIENTS_PER_GPU=${CLIENTS_PER_GPU:-2}
FRAMES_PER_CLIENT=${FRAMES_PER_CLIENT:-3}
EXTRACT_ARGS=${EXTRACT_ARGS:--s 0 -n 500 -w 5760.0,7620.0,0.8}
SIM_FIBERS=${SIM_FIBERS:-0,500}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
TMP=$(mktemp -d -t spexd-gpu-subset-XXXXXX)
SPID=
FAILED=0
: >"$OUT/summary.txt"

# shellcheck disable=SC2317  # called by the EXIT trap
cleanup() {
  if [[ -n $SPID ]] && kill -0 "$SPID" 2>/dev/null; then
    kill -KILL "$SPID" 2>/dev/null
    wait "$SPID" 2>/dev/null
  fi
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

say() { echo "$*" | tee -a "$OUT/summary.txt"; }
check() {  # check NAME CONDITION-RESULT(0/1) DETAIL
  if [[ $2 == 0 ]]; then say "PASS  $1: $3"; else say "FAIL  $1: $3"; FAILED=1; fi
}
# The command line of a program in DIR (scripts/run_program.sh), into the array named $2.
# shellcheck disable=SC2034  # cmd is a nameref: it assigns the caller's array
find_exe() {
  local name=$1
  local -n cmd=$2
  "$RUN" "$B" --path "$name" >/dev/null || exit 2
  cmd=("$RUN" "$B" "$name")
}
find_exe spexd SPEXD
find_exe spexctl SPEXCTL

# The /metrics text of the server whose log is $1 (no curl on the GPU machine).
scrape() {
  local mport
  mport=$(grep -o '"metrics_port":[0-9]*' "$1" | head -1 | grep -o '[0-9]*$')
  [[ -n $mport ]] || return 1
  timeout -s KILL 10 bash -c "exec 3<>/dev/tcp/127.0.0.1/$mport &&
    printf 'GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3 && cat <&3" | tr -d '\r'
}
# value TEXT NAME GPU: the summed value of NAME's series with gpu="GPU" (empty if none).
value() {
  awk -v name="$2" -v gpu="$3" '
    index($0, name "{") == 1 && index($0, "gpu=\"" gpu "\"") { sum += $NF; n++ }
    END { if (n) printf "%.6g\n", sum }' <<<"$1"
}
# gpus TEXT NAME: the sorted gpu label values of NAME's series, comma-separated.
gpus() {
  grep -o "^$2{[^}]*}" <<<"$1" | grep -o 'gpu="[^"]*"' | cut -d'"' -f2 | sort -n -u | paste -sd,
}

# start_server LOG FLAGS...: sets SPID and ADDR; returns 1 if it did not reach SERVING.
start_server() {
  local log=$1 port="" i
  shift
  : >"$log"  # before the server's redirection creates it: the polls below read it
  "${SPEXD[@]}" --listen=127.0.0.1:0 --metrics_listen=127.0.0.1:0 --backend="$BACKEND" \
    --data_roots="$(dirname "$FRAME_ABS"),$(dirname "$PSF")" --drain_seconds=10 "$@" 2>"$log" &
  SPID=$!
  for ((i = 0; i < 300; ++i)); do  # 30 s to bind
    port=$(grep -o '"event":"listening".*"port":[0-9]*' "$log" | head -1 | grep -o '[0-9]*$')
    [[ -n $port ]] && break
    kill -0 "$SPID" 2>/dev/null || return 1
    sleep 0.1
  done
  [[ -n $port ]] || return 1
  ADDR=127.0.0.1:$port
  for ((i = 0; i < 360; ++i)); do  # 180 s of warm-up (CUDA module, workspaces on every GPU)
    timeout -s KILL 10 "${SPEXCTL[@]}" health --server "$ADDR" --retries 1 --deadline 2 \
      >/dev/null 2>&1 && return 0
    kill -0 "$SPID" 2>/dev/null || return 1
    sleep 0.5
  done
  return 1
}
stop_server() {
  kill -TERM "$SPID" 2>/dev/null
  local i
  for ((i = 0; i < 300; ++i)); do kill -0 "$SPID" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$SPID" 2>/dev/null
  wait "$SPID" 2>/dev/null
  SPID=
}

# The GPUs that hold a CUDA context of process $1 (nvidia-smi), comma-separated; "?" if unknown.
context_gpus() {
  if ! command -v nvidia-smi >/dev/null || [[ -n ${CUDA_VISIBLE_DEVICES:-} ]]; then
    echo "?"
    return
  fi
  local pids
  pids=$(pgrep -P "$1" | paste -sd'|')  # run.sh may exec or fork: the process and its children
  pids="$1${pids:+|$pids}"
  join -t, <(nvidia-smi --query-gpu=uuid,index --format=csv,noheader | tr -d ' ' | sort) \
    <(nvidia-smi --query-compute-apps=gpu_uuid,pid --format=csv,noheader | tr -d ' ' |
      grep -E ",($pids)\$" | sort) | cut -d, -f2 | sort -n -u | paste -sd,
}

# run_case NAME EXPECTED-GPUS|all FLAGS...: one server, frames from client processes, checks.
run_case() {
  local name=$1 expected=$2
  shift 2
  local log=$OUT/spexd-$name.log
  say "== $name: spexd --backend=$BACKEND $*"
  if ! start_server "$log" "$@"; then
    check "$name: server" 1 "did not reach SERVING: $(grep -o '"error":"[^"]*"' "$log" | head -1)"
    stop_server
    return
  fi
  local choice
  choice=$(grep -o '"event":"backend_choice","choice":"[^"]*"' "$log" | head -1 | cut -d'"' -f8)
  say "      backend choice: $choice"
  if [[ $expected == all ]]; then
    if [[ $BACKEND == cpu ]]; then
      expected=cpu
    else
      local visible
      visible=$(sed -n 's/.* of \([0-9]*\) visible.*/\1/p' <<<"$choice")
      expected=$(seq -s, 0 $((${visible:-1} - 1)))
    fi
  fi
  local ngpu
  ngpu=$(tr ',' '\n' <<<"$expected" | wc -l)
  local before
  before=$(scrape "$log")
  for family in spexd_worker_frames_total spexd_worker_patches_total \
                spexd_worker_busy_seconds_total spexd_worker_extract_duration_seconds_count; do
    check "$name: $family at startup" "$([[ $(gpus "$before" "$family") == "$expected" ]]; echo $?)" \
      "gpu labels [$(gpus "$before" "$family")], expected [$expected]"
  done

  local clients=$((CLIENTS_PER_GPU * ngpu)) c
  local frames=$((clients * FRAMES_PER_CLIENT))
  local t0=$SECONDS
  local pids=()
  for ((c = 0; c < clients; ++c)); do
    (
      for ((f = 0; f < FRAMES_PER_CLIENT; ++f)); do
        # shellcheck disable=SC2086
        timeout -s KILL 300 "${SPEXCTL[@]}" extract -i "$FRAME_ABS" -p "$PSF" $EXTRACT_ARGS \
          --server "$ADDR" --server-path --retries 3 -q -o "$TMP/client-$c.fits" ||
          { echo "client $c frame $f failed" >&2; exit 1; }
        rm -f "$TMP/client-$c.fits"
      done
    ) >>"$OUT/clients-$name.log" 2>&1 &
    pids+=($!)
  done
  local ok_clients=0 p
  for p in "${pids[@]}"; do wait "$p" && ok_clients=$((ok_clients + 1)); done
  local wall=$((SECONDS - t0))
  check "$name: $frames frames from $clients client processes" "$([[ $ok_clients == "$clients" ]]; echo $?)" \
    "$ok_clients of $clients clients finished without error in ${wall} s (log: clients-$name.log)"
  sleep 1.5  # the workers' busy time is added when they are idle again and every second
  local after
  after=$(scrape "$log")
  printf '%s\n' "$after" >"$OUT/metrics-$name.txt"
  local contexts
  contexts=$(context_gpus "$SPID")
  stop_server

  local total=0 g fr pa bu ms
  for family in spexd_worker_frames_total spexd_worker_patches_total spexd_worker_busy_seconds_total; do
    check "$name: $family series" "$([[ $(gpus "$after" "$family") == "$expected" ]]; echo $?)" \
      "gpu labels [$(gpus "$after" "$family")], expected [$expected]"
  done
  for g in ${expected//,/ }; do
    fr=$(value "$after" spexd_worker_frames_total "$g")
    pa=$(value "$after" spexd_worker_patches_total "$g")
    bu=$(value "$after" spexd_worker_busy_seconds_total "$g")
    check "$name: gpu $g did work" \
      "$(awk -v f="${fr:-0}" -v p="${pa:-0}" -v b="${bu:-0}" 'BEGIN { exit !(f >= 1 && p > 0 && b > 0) }'; echo $?)" \
      "frames ${fr:-none}, patches ${pa:-none}, busy ${bu:-none} s"
    total=$(awk -v t="$total" -v f="${fr:-0}" 'BEGIN { print t + f }')
  done
  local ok_requests
  ok_requests=$(awk 'index($0, "spexd_requests_total{code=\"OK\",rpc=\"ExtractFrame\"}") == 1 { print $NF }' <<<"$after")
  check "$name: frames counted by the GPUs = frames extracted" \
    "$([[ $total == "$frames" && ${ok_requests:-0} == "$frames" ]]; echo $?)" \
    "sum over gpus $total, ExtractFrame OK ${ok_requests:-0}, submitted $frames"
  if [[ $BACKEND != cpu ]]; then
    ms=$(grep -o '^spexd_gpu_memory_bytes{device="[0-9]*"}' <<<"$after" | cut -d'"' -f2 | sort -n -u | paste -sd,)
    check "$name: GPU memory only on the selected GPUs" "$([[ $ms == "$expected" ]]; echo $?)" \
      "spexd_gpu_memory_bytes devices [$ms], expected [$expected]"
    # Informational: a CUDA context on another GPU costs its memory, but is not a metric.
    say "INFO  $name: GPUs holding a CUDA context of spexd (nvidia-smi): [${contexts}]"
  fi
  say "      per gpu (frames / patches / busy s): $(for g in ${expected//,/ }; do
    printf '%s: %s / %s / %s; ' "$g" "$(value "$after" spexd_worker_frames_total "$g")" \
      "$(value "$after" spexd_worker_patches_total "$g")" "$(value "$after" spexd_worker_busy_seconds_total "$g")"
  done)"
}

# refused NAME REASON FLAGS...: spexd must exit with status 1 and REASON in its log.
refused() {
  local name=$1 reason=$2
  shift 2
  local log=$OUT/spexd-$name.log
  "${SPEXD[@]}" --listen=127.0.0.1:0 --metrics_listen= --backend="$BACKEND" \
    --data_roots="$(dirname "$FRAME_ABS")" "$@" 2>"$log" &
  SPID=$!
  local i
  for ((i = 0; i < 1200; ++i)); do kill -0 "$SPID" 2>/dev/null || break; sleep 0.1; done
  local rc=timeout
  if ! kill -0 "$SPID" 2>/dev/null; then wait "$SPID"; rc=$?; SPID=; else stop_server; fi
  check "$name: spexd $* refused" "$([[ $rc == 1 ]] && grep -qF -- "$reason" "$log"; echo $?)" \
    "exit $rc; $(grep -o '"event":"startup_failed","error":"[^"]*"' "$log" | head -1 | cut -d'"' -f8)"
}

mkdir -p "$(dirname "$FRAME")"
FRAME_ABS=$(readlink -f "$FRAME")
if [[ ! -f $FRAME_ABS ]]; then
  say "writing $FRAME_ABS with spexd-sim (fibres $SIM_FIBERS, r grid, seed 1)"
  find_exe spexd-sim SIM
  "${SIM[@]}" --psf="$PSF" --out="$FRAME_ABS" --fibers="$SIM_FIBERS" \
    --wavelength=5760.0,7620.0,0.8 --seed=1 >"$OUT/spexd-sim.log" 2>&1 ||
    { say "FAIL  spexd-sim: $(tail -1 "$OUT/spexd-sim.log")"; exit 1; }
fi
command -v nvidia-smi >/dev/null && nvidia-smi -L | tee -a "$OUT/summary.txt"

if [[ $BACKEND == cpu ]]; then
  run_case cpu all
  refused cpu-with-gpu-devices "not with --backend=cpu" --gpu_devices=0
else
  run_case subset "$SUBSET" --gpu_devices="$SUBSET"
  run_case all-gpus all
  refused missing-gpu "does not exist" --gpu_devices=99
fi
say "== $([[ $FAILED == 0 ]] && echo 'all checks passed' || echo 'SOME CHECKS FAILED')"
exit "$FAILED"
