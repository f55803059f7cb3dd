#!/usr/bin/env bash
# Instruction counts per SASS line of the kernels a warm frame launches, on the GPU machine
#: for each kernel named in REGEX (alternatives split at '|'),
# Nsight Compute's SourceCounters for one launch of it after SKIP of its launches (past the
# cold frame's), then scripts/sass_hotspots.py on that launch's source page (its grid size
# from LaunchStats). A module built with -DSPEXD_CUDA_LINEINFO=ON has the same machine code.
#
#   scripts/cuda_sass_counts_device.sh BUNDLE_DIR OUT_DIR REGEX [SKIP]
#     REGEX  kernel names, e.g. 'BuildNormalEquationsDmma|TwistedKernel'
#     SKIP   launches of each kernel to pass over first (default 2)
#   Run from the repository's root (the PSF is tests/data's). Environment: SPEXD_CUDA_* apply.
set -uo pipefail
[[ $# -ge 3 ]] || { sed -n '2,11p' "$0"; exit 2; }
B=$(cd "$1" && pwd) || exit 2
OUT=$2 SKIP=${4:-2}
mkdir -p "$OUT"
NCU=${NCU:-$(command -v ncu || echo /usr/local/cuda/bin/ncu)}
IFS='|' read -r -a kernels <<<"$3"
(
fail=0
for i in "${!kernels[@]}"; do
  k=${kernels[$i]}
  "$NCU" --section SourceCounters --section LaunchStats --import-source no --kernel-name "regex:$k" \
    --launch-skip "$SKIP" --launch-count 1 -o "$OUT/sass_$i" --force-overwrite \
    "$B/run.sh" spexd_cuda_frame_bench --runs 1 --inflight 0 --check-bundles "" >"$OUT/ncu_$i.log" 2>&1 || fail=1
  "$NCU" --import "$OUT/sass_$i.ncu-rep" --page details >"$OUT/details_$i.txt" 2>&1 || fail=1
  "$NCU" --import "$OUT/sass_$i.ncu-rep" --page source --csv --print-source sass \
    >"$OUT/source_$i.csv" 2>>"$OUT/ncu_$i.log" || fail=1
  name=$(grep -m1 -E '^  [^ ].*\(([0-9]+, ){2}[0-9]+\)x' "$OUT/details_$i.txt" | cut -c1-150)
  grid=$(grep -m1 -E '^ +Grid Size ' "$OUT/details_$i.txt" | awk '{gsub(",", "", $NF); print $NF}')
  echo "== $k: ${name:-no launch}"
  if [[ -n $grid ]]; then
    python3 "$(dirname "$0")/sass_hotspots.py" "$OUT/source_$i.csv" --blocks "$grid" --top 15 || fail=1
  else
    fail=1
  fi
  rm -f "$OUT/sass_$i.ncu-rep"
  gzip -f "$OUT/source_$i.csv"
done
exit "$fail"
) | tee "$OUT/hotspots.txt"
exit "${PIPESTATUS[0]}"
