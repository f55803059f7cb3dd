#!/usr/bin/env bash
# Judges CUDA modules against each other on one GPU in one go, the way a change of the CUDA
# backend is measured (docs/performance.md): ROUNDS rounds of the warm-frame benchmark, each
# round every variant once in the order given, so that a drift of the machine touches them
# all; then one warm r frame per variant, with its model and without, dumped and compared
# byte for byte with the first variant's.
#
#   scripts/cuda_frame_rounds.sh OUT_DIR ROUNDS NAME DIR MODULE FAULTS [NAME DIR MODULE FAULTS]...
#     NAME    the variant's name in the table (letters, digits, '.', '_', '-')
#     DIR     a bundle or build tree that holds spexd_cuda_frame_bench (scripts/run_program.sh)
#     MODULE  the CUDA module it loads (SPEXD_CUDA_MODULE), or - for DIR's own; another
#             build's module loads only when built with DIR's token (the loader checks
#             the build id): cmake -DSPEXD_BUILD_TOKEN=<DIR's, from its CMakeCache.txt>
#     FAULTS  SPEXD_TEST_CUDA_FAULTS for it (shared_memory_cap=166912: an A100's shared
#             memory a block), or - for none
#   Environment: RUNS (9) warm frames a run; BENCH_ARGS more arguments for every benchmark
#   run (--psf FILE for a b or z frame); RUN_TIMEOUT (120) seconds a benchmark run may take.
#   Run from the repository's root (the PSF is tests/data's).
# OUT_DIR gets each run's JSON and log. The last lines are the table: each variant's median
# over the rounds of its runs' medians, its ratio to the first variant's, its fastest warm
# frame over all rounds, its median over the rounds of two frames in flight a second (the
# benchmark's inflight_frames_per_second: frames sharing the GPU, where the lone-frame
# medians say nothing), and whether its frame's bytes equal the first's. Exit 0 when every
# run passed its CPU check.
set -uo pipefail
[[ $# -ge 6 && $(( ($# - 2) % 4 )) -eq 0 ]] || { sed -n '2,24p' "$0"; exit 2; }
OUT=$1
ROUNDS=$2
shift 2
RUN=$(dirname "$(readlink -f "$0")")/run_program.sh
RUNS=${RUNS:-9}
read -r -a extra <<<"${BENCH_ARGS:-}"
names=() dirs=() modules=() faults=()
while [[ $# -gt 0 ]]; do
  [[ $1 =~ ^[A-Za-z0-9._-]+$ ]] || { echo "cuda_frame_rounds.sh: bad variant name '$1'" >&2; exit 2; }
  names+=("$1") dirs+=("$2") modules+=("$3") faults+=("$4")
  shift 4
done
mkdir -p "$OUT"
fail=0

# bench I ARGS...: the benchmark of variant I (its module and faults) with ARGS.
bench() {
  local i=$1
  shift
  local vars=(SPEXD_TEST_CUDA_FAULTS="${faults[i]#-}")
  [[ ${modules[i]} != - ]] && vars+=(SPEXD_CUDA_MODULE="$(readlink -f "${modules[i]}")")
  timeout -s KILL "${RUN_TIMEOUT:-120}" env "${vars[@]}" "$RUN" "${dirs[i]}" spexd_cuda_frame_bench \
    "${extra[@]}" "$@"
}

# field JSON KEY: a number of the benchmark's report (KEY: a top-level name, or cpu_check.ok).
field() {
  python3 - "$1" "$2" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for k in sys.argv[2].split("."):
    d = d[k]
print(d if not isinstance(d, bool) else int(d))
PY
}

for r in $(seq "$ROUNDS"); do
  for i in "${!names[@]}"; do
    j=$OUT/${names[i]}_$r.json
    if bench "$i" --runs "$RUNS" --json "$j" >"$OUT/${names[i]}_$r.log" 2>&1 && [[ -s $j ]]; then
      ok=$(field "$j" cpu_check.ok)
      ((ok == 1)) || fail=1
      echo "round $r ${names[i]}: median $(field "$j" median_seconds) s, CPU check $([[ $ok == 1 ]] && echo ok || echo FAILED)"
    else
      fail=1
      echo "round $r ${names[i]}: FAILED ($OUT/${names[i]}_$r.log)"
    fi
  done
done

# The frame with its model and without (the rounds time frames without one): the table's
# "MODEL_SUM/PLAIN_SUM", 16 hex digits each.
sums=()
for i in "${!names[@]}"; do
  d=$OUT/${names[i]}.dump
  pair=
  for kind in model plain; do
    flag=(--model)
    [[ $kind == plain ]] && flag=()
    if bench "$i" --runs 1 --inflight 1 "${flag[@]}" --dump "$d" >"$OUT/${names[i]}_dump_$kind.log" 2>&1 &&
      [[ -s $d ]]; then
      pair+=${pair:+/}$(sha256sum <"$d" | cut -c1-16)
    else
      fail=1
      pair=none
      break
    fi
  done
  sums+=("$pair")
  rm -f "$d"
done

echo "variant | median of rounds (s) | over ${names[0]} | fastest warm frame (s) | two in flight (frames/s) | frame bytes"
python3 - "$OUT" "$ROUNDS" "${sums[0]}" "${names[@]}" -- "${sums[@]}" <<'PY'
import json, os, statistics, sys
out, rounds, first_sum = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rest = sys.argv[4:]
cut = rest.index("--")
names, sums = rest[:cut], rest[cut + 1:]
base = None
for name, s in zip(names, sums):
    meds, runs, inflight = [], [], []
    for r in range(1, rounds + 1):
        p = os.path.join(out, "%s_%d.json" % (name, r))
        if os.path.exists(p) and os.path.getsize(p) > 0:
            rec = json.load(open(p))
            meds.append(rec["median_seconds"])
            runs += rec.get("run_seconds", [])
            if "inflight_frames_per_second" in rec:
                inflight.append(rec["inflight_frames_per_second"])
    med = statistics.median(meds) if meds else float("nan")
    base = med if base is None else base
    # A warm frame's time takes two values from run to run on some hosts (the rounds'
    # medians move with the share of slow frames): the fastest is the lower one.
    fastest = "%.5f" % min(runs) if runs else "-"
    pair = "%.2f" % statistics.median(inflight) if inflight else "-"
    same = "no frame" if s == "none" else ("identical" if s == first_sum else "DIFFERENT")
    print("%s | %.5f (%d rounds) | %.3f | %s | %s | %s %s"
          % (name, med, len(meds), med / base, fastest, pair, s, same))
PY
exit $fail
