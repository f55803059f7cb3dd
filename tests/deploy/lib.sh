# Shared helpers of the deploy tests (sourced). Expects ROOT (repository) and BUILD_DIR.
SPEXD=${SPEXD:-$ROOT/${BUILD_DIR:-build}/server/spexd}
SPEXCTL=${SPEXCTL:-$ROOT/${BUILD_DIR:-build}/client/spexctl}
SPEXD_SIM=${SPEXD_SIM:-$ROOT/${BUILD_DIR:-build}/client/spexd-sim}
BUNDLED_PSF=$ROOT/tests/data/psf-r0-00051060.fits
# A short r grid keeps a CPU extraction of a bundle to about a second.
CASE_WAVELENGTH=5760.0,6160.0,0.8

say() { echo "[$(date +%T)] $*"; }
fail() { echo "FAIL: $*" >&2; exit 1; }

need_binaries() {
  local exe
  for exe in "$SPEXD" "$SPEXCTL" "$SPEXD_SIM"; do
    [[ -x $exe ]] || fail "$exe is not built (run scripts/build.sh first)"
  done
}

# A free TCP port on loopback (the kernel's choice; the tiny race is acceptable in tests).
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# port_pair: a free port P with P + 1000 free too (spexd's gRPC and metrics ports in the
# Slurm script).
port_pair() {
  local p
  for _ in 1 2 3 4 5 6 7 8 9 10; do
    p=$(free_port)
    if [[ $p -lt 64000 ]] && python3 -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', $p + 1000))" 2>/dev/null; then
      echo "$p"; return 0
    fi
  done
  return 1
}

# make_case DIR FIRST,COUNT SEED: a simulated preproc frame DIR/preproc-SEED.fits of those
# fibres, and the bundled PSF copied to DIR/psf.fits.
make_case() {
  local dir=$1 fibers=$2 seed=$3
  mkdir -p "$dir"
  [[ -f $dir/psf.fits ]] || cp "$BUNDLED_PSF" "$dir/psf.fits"
  "$SPEXD_SIM" --psf="$BUNDLED_PSF" --out="$dir/preproc-$seed.fits" --fibers="$fibers" \
    --wavelength="$CASE_WAVELENGTH" --seed="$seed" >/dev/null 2>&1 ||
    fail "spexd-sim failed for $dir/preproc-$seed.fits"
}

# wait_serving ADDRESS SECONDS: until `spexctl health` says SERVING.
wait_serving() {
  local addr=$1 limit=$2 i
  for ((i = 0; i < limit * 5; ++i)); do
    "$SPEXCTL" health --server "$addr" --retries 1 --deadline 2 >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  return 1
}

# metric TEXT NAME{LABELS}: the value of one sample line of an exposition text (empty if absent).
metric() {
  awk -v key="$2" 'index($0, key " ") == 1 { print $2; exit }' <<<"$1"
}

scrape() { curl -sf --max-time 5 "http://$1/metrics"; }

# descendant_named PID NAME: the first process called NAME among PID's descendants.
descendant_named() {
  local queue=("$1") pid child
  while [[ ${#queue[@]} -gt 0 ]]; do
    pid=${queue[0]}
    queue=("${queue[@]:1}")
    for child in $(pgrep -P "$pid" || true); do
      if [[ $(cat /proc/"$child"/comm 2>/dev/null) == "$2" ]]; then echo "$child"; return 0; fi
      queue+=("$child")
    done
  done
  return 0
}
