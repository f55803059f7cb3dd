#!/usr/bin/env bash
# The start-up cost of one `spexctl` process, which a pipeline worker pays
# on every frame (one `spexctl extract --server ...` per frame). Runs on any host or, in
# one call, on the GPU machine.
#
#   scripts/spexctl_startup_bench.sh DIR [RUNS]
#     DIR   a build directory (client/spexctl, server/spexd) or a device bundle (spexctl, spexd)
#     RUNS  timed runs per case (default 40, after 3 warm-up runs)
#   Environment: SPEXCTL / SPEXD (paths, override DIR's), PORT (real spexd; default 50000 + PID % 10000).
#
# Cases, each a fresh process started from Python (fork + exec, wait4 for its CPU time):
#   help            `spexctl --help`: loader + static initialisers + main, no gRPC
#   health-refused  `spexctl health --retries 1 --server 127.0.0.1:<closed port>`: adds gRPC
#                   init and a refused connection, no retry backoff (exit 1 expected)
#   health-serving  `spexctl health --server` against a real spexd (CPU backend, loopback):
#                   the remote path's fixed cost per process (exit 0 expected)
#   extract-help    `spexctl extract --help`: the extract flags (local and remote) built
# Prints one [startup] line per case (median, p10, p90 wall in ms; median CPU ms) and the
# dynamic loader's own statistics for `--help` (LD_DEBUG=statistics). Exit 0 when every
# case exited as expected.
set -uo pipefail
[[ $# -ge 1 ]] || { sed -n '2,21p' "$0"; exit 2; }
D=$(cd "$1" && pwd) || exit 2
RUNS=${2:-40}
pick() { for f in "$@"; do [[ -x $f ]] && { echo "$f"; return; }; done; }
SPEXCTL=${SPEXCTL:-$(pick "$D/spexctl" "$D/client/spexctl")}
SPEXD=${SPEXD:-$(pick "$D/spexd" "$D/server/spexd")}
[[ -n $SPEXCTL ]] || { echo "no spexctl in $D" >&2; exit 2; }
PORT=${PORT:-$((50000 + $$ % 10000))}
# A port nobody listens on: bind one, note it, close it.
CLOSED=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')

echo "[startup] host $(hostname) $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%FT%TZ)"
echo "[startup] spexctl $SPEXCTL ($(stat -c %s "$SPEXCTL") bytes, $(ldd "$SPEXCTL" 2>/dev/null | wc -l) objects per ldd)"

spexd_pid=
LOG=$(mktemp)
cleanup() {
  [[ -n $spexd_pid ]] && kill "$spexd_pid" 2>/dev/null && wait "$spexd_pid" 2>/dev/null
  rm -f "$LOG"
}
trap cleanup EXIT
if [[ -n $SPEXD ]]; then
  "$SPEXD" --listen=127.0.0.1:$PORT --metrics_listen=127.0.0.1:0 --backend=cpu --cpu_threads=1 \
    >"$LOG" 2>&1 &
  spexd_pid=$!
  for _ in $(seq 100); do
    "$SPEXCTL" health --server 127.0.0.1:$PORT >/dev/null 2>&1 && break
    sleep 0.1
  done
  "$SPEXCTL" health --server 127.0.0.1:$PORT >/dev/null 2>&1 ||
    { echo "[startup] spexd did not start; health-serving skipped:"; tail -3 "$LOG"; kill "$spexd_pid" 2>/dev/null; spexd_pid=; }
fi

python3 - "$SPEXCTL" "$RUNS" "$CLOSED" "$PORT" "${spexd_pid:-}" <<'EOF'
import os, statistics, subprocess, sys, time
exe, runs, closed, port, spexd_pid = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
cases = [("help", ["--help"], 0),
         ("health-refused", ["health", "--retries", "1", "--server", f"127.0.0.1:{closed}"], 1)]
if spexd_pid:
    cases.append(("health-serving", ["health", "--server", f"127.0.0.1:{port}"], 0))
cases.append(("extract-help", ["extract", "--help"], 0))

def once(args):
    devnull = os.open(os.devnull, os.O_WRONLY)
    t0 = time.perf_counter()
    pid = os.posix_spawn(exe, [exe] + args, os.environ,
                         file_actions=[(os.POSIX_SPAWN_DUP2, devnull, 1), (os.POSIX_SPAWN_DUP2, devnull, 2)])
    _, status, ru = os.wait4(pid, 0)
    wall = time.perf_counter() - t0
    os.close(devnull)
    return wall, ru.ru_utime + ru.ru_stime, os.waitstatus_to_exitcode(status)

ok = True
for name, args, want in cases:
    for _ in range(3):
        once(args)
    walls, cpus, codes = [], [], set()
    for _ in range(runs):
        w, c, code = once(args)
        walls.append(w * 1e3); cpus.append(c * 1e3); codes.add(code)
    walls.sort()
    q = lambda p: walls[min(len(walls) - 1, int(p * len(walls)))]
    good = codes == {want}
    ok &= good
    print(f"[startup] {name:15s} wall median {statistics.median(walls):6.1f} ms  p10 {q(0.1):6.1f}  "
          f"p90 {q(0.9):6.1f}  CPU median {statistics.median(cpus):6.1f} ms  exit {sorted(codes)}"
          f"{'' if good else f'  UNEXPECTED (want {want})'}")

# The loader's own account of `--help` (relocation counts and its start-up time).
env = dict(os.environ, LD_DEBUG="statistics")
err = subprocess.run([exe, "--help"], env=env, stdout=subprocess.DEVNULL,
                     stderr=subprocess.PIPE, text=True).stderr
keep = ("total startup time", "time needed for relocation", "number of relocations",
        "relocations from cache", "relative relocations", "objects loaded")
seen = set()
for line in err.splitlines():
    text = line.split(":", 1)[-1].strip()
    key = next((k for k in keep if k in text), None)
    if key and key not in seen:
        seen.add(key)
        print(f"[startup] ld.so: {' '.join(text.split())}")
sys.exit(0 if ok else 1)
EOF
