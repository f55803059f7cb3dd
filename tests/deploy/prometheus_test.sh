#!/usr/bin/env bash
# A real Prometheus (the binary of Debian's prometheus package, unpacked beside promtool by
# scripts/install-deps.sh) with a generated config scrapes a real spexd while frames are
# extracted, some refused on a full queue. Then every rule of deploy/prometheus (loaded by
# that Prometheus) and every query of the Grafana dashboard is sent to its query API:
# each must parse and return series (tests/deploy/check_queries.py).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
BUILD_DIR=${BUILD_DIR:-build}
source tests/deploy/lib.sh
need_binaries
PROMETHEUS=${PROMETHEUS:-}
if [[ -z $PROMETHEUS ]] && command -v promtool >/dev/null; then
  PROMETHEUS=$(dirname "$(readlink -f "$(command -v promtool)")")/prometheus
fi
[[ -x $PROMETHEUS ]] ||
  { echo "SKIPPED: no prometheus binary beside promtool (scripts/install-deps.sh unpacks both)"; exit 77; }

WORK=$(mktemp -d -t spexd-prom-XXXXXX)
PIDS=()
cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT

make_case "$WORK/data" 0,25 5
PORT=$(free_port)
MPORT=$(free_port)
# One waiting job at most, so that a burst of clients meets RESOURCE_EXHAUSTED.
"$SPEXD" --listen="127.0.0.1:$PORT" --metrics_listen="127.0.0.1:$MPORT" --backend=cpu \
  --cpu_threads=1 --max_queue=1 --data_roots="$WORK/data" --drain_seconds=5 \
  --shadow_parity_fraction=1 2>"$WORK/spexd.log" &
PIDS+=($!)
wait_serving "127.0.0.1:$PORT" 30 || { cat "$WORK/spexd.log"; fail "spexd not serving"; }

# The rules as shipped, evaluated every 2 s instead of 30 s so that the recorded series exist soon.
mkdir -p "$WORK/rules"
for rules in spexd-rules.yaml spexd-health-rules.yaml; do
  sed 's/^\(\s*interval:\s*\)30s/\12s/' "deploy/prometheus/$rules" >"$WORK/rules/$rules"
done
cat >"$WORK/prometheus.yml" <<YML
global:
  scrape_interval: 1s
  evaluation_interval: 2s
rule_files:
  - $WORK/rules/spexd-rules.yaml
  - $WORK/rules/spexd-health-rules.yaml
scrape_configs:
  - job_name: spexd
    static_configs:
      - targets: ["127.0.0.1:$MPORT"]
YML
PPORT=$(free_port)
"$PROMETHEUS" --config.file="$WORK/prometheus.yml" --storage.tsdb.path="$WORK/tsdb" \
  --web.listen-address="127.0.0.1:$PPORT" --log.level=warn 2>"$WORK/prometheus.log" &
PIDS+=($!)
PROM=http://127.0.0.1:$PPORT
for _ in $(seq 1 100); do curl -sf "$PROM/-/ready" >/dev/null && break; sleep 0.2; done
curl -sf "$PROM/-/ready" >/dev/null || { cat "$WORK/prometheus.log"; fail "Prometheus not ready"; }
"$PROMETHEUS" --version 2>&1 | head -n1

say "extract: two frames, then a burst of six clients on a queue of one"
extract() {
  "$SPEXCTL" extract --server "127.0.0.1:$PORT" --server-path -q --retries 1 "$@" \
    -i "$WORK/data/preproc-5.fits" -p "$WORK/data/psf.fits" -w "$CASE_WAVELENGTH" -s 0 -n 25
}
extract -o "$WORK/f1.fits" >/dev/null
extract -o "$WORK/f2.fits" --priority realtime >/dev/null
burst=()
for i in 1 2 3 4 5 6; do
  extract -o "$WORK/b$i.fits" >"$WORK/burst-$i.log" 2>&1 &
  burst+=($!)
done
for p in "${burst[@]}"; do wait "$p" || true; done
# Counted by the server (clients may retry a refusal, depending on their settings).
refused=$(metric "$(scrape "127.0.0.1:$MPORT")" \
  'spexd_requests_total{code="RESOURCE_EXHAUSTED",rpc="ExtractFrame"}')
echo "burst: ${refused:-0} extraction(s) refused with RESOURCE_EXHAUSTED"
[[ ${refused:-0} -ge 1 ]] || fail "no request was refused on a full queue"

# The one CPU worker's work (gpu="cpu"): every extraction that finished OK, and only those.
text=$(scrape "127.0.0.1:$MPORT")
ok=$(metric "$text" 'spexd_requests_total{code="OK",rpc="ExtractFrame"}')
worker_frames=$(metric "$text" 'spexd_worker_frames_total{gpu="cpu",worker="0"}')
worker_patches=$(metric "$text" 'spexd_worker_patches_total{gpu="cpu",worker="0"}')
patches=$(metric "$text" 'spexd_patches_total{outcome="extracted"}')
echo "worker 0 (gpu=cpu): $worker_frames frames, $worker_patches patches; $ok OK extractions, $patches patches"
[[ -n $ok && $worker_frames == "$ok" ]] || fail "spexd_worker_frames_total ($worker_frames) != OK extractions ($ok)"
[[ -n $patches && $worker_patches == "$patches" ]] || fail "spexd_worker_patches_total ($worker_patches) != spexd_patches_total extracted ($patches)"

say "wait until Prometheus has the refusals and two rule evaluations after them"
for _ in $(seq 1 60); do
  n=$(curl -sf "$PROM/api/v1/query" --data-urlencode \
      'query=spexd_requests_total{code="RESOURCE_EXHAUSTED"}' | python3 -c \
      'import json,sys; print(len(json.load(sys.stdin)["data"]["result"]))')
  [[ $n -ge 1 ]] && break
  sleep 0.5
done
sleep 5
# Prometheus stored the per-worker series with their gpu label.
stored=$(curl -sf "$PROM/api/v1/query" --data-urlencode 'query=sum by (gpu) (spexd_worker_frames_total)' |
  python3 -c 'import json, sys; print(" ".join(r["metric"].get("gpu", "") + "=" + r["value"][1] for r in json.load(sys.stdin)["data"]["result"]))')
echo "Prometheus: frames by gpu: $stored"
[[ $stored == "cpu=$ok" ]] || fail "Prometheus has spexd_worker_frames_total by gpu '$stored', expected 'cpu=$ok'"
# Every frame sampled for shadow parity: its checks (ok) must have been counted too.
for _ in $(seq 1 120); do
  checked=$(metric "$(scrape "127.0.0.1:$MPORT")" 'spexd_shadow_parity_checks_total{backend="cpu",gpu="cpu",result="ok"}')
  [[ ${checked:-0} -ge 1 ]] && break
  sleep 0.5
done
echo "shadow parity: ${checked:-0} check(s) ok"
[[ ${checked:-0} -ge 1 ]] || fail "no shadow parity check was counted"
sleep 3
python3 tests/deploy/check_queries.py "$PROM" deploy/grafana/spexd-dashboard.json server/platform/metrics.cc,server/platform/health_metrics.cc
say "prometheus_test: PASS"
