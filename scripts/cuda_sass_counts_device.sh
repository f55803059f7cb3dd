#!/usr/bin/env bash
# Instruction counts per SASS line of the kernels a warm frame launches, on the GPU machine
# (issue 25, session 37): Nsight Compute's SourceCounters for one launch of each kernel
# matching REGEX (after SKIP launches of them: past the cold frame), then
# scripts/sass_hotspots.py on each launch's source page (its grid size from LaunchStats).
#
#   scripts/cuda_sass_counts_device.sh BUNDLE_DIR OUT_DIR REGEX [SKIP]
#     REGEX  kernel names (ncu --kernel-name regex:), e.g. 'BuildNormalEquationsDmma|TwistedKernel'
#     SKIP   launches of them to pass over first (default: 2 a kernel named in REGEX)
#   Run from the repository's root (the PSF is tests/data's). Environment: SPEXD_CUDA_* apply.
set -uo pipefail
[[ $# -ge 3 ]] || { sed -n '2,10p' "$0"; exit 2; }
B=$(cd "$1" && pwd) || exit 2
OUT=$2 RE=$3
NK=$(awk -F'|' '{print NF}' <<<"$RE")
SKIP=${4:-$((2 * NK))}
mkdir -p "$OUT"
NCU=${NCU:-$(command -v ncu || echo /usr/local/cuda/bin/ncu)}
"$NCU" --section SourceCounters --section LaunchStats --import-source no --kernel-name "regex:$RE" \
  --launch-skip "$SKIP" --launch-count "$NK" -o "$OUT/sass" --force-overwrite \
  "$B/run.sh" spexd_cuda_frame_bench --runs 1 --inflight 0 --check-bundles "" >"$OUT/ncu.log" 2>&1
echo "ncu rc=$?"
"$NCU" --import "$OUT/sass.ncu-rep" --page details >"$OUT/details.txt" 2>&1
mapfile -t names < <(grep -E '^  [^ ].*\(([0-9]+, ){2}[0-9]+\)x' "$OUT/details.txt")
mapfile -t grids < <(grep -E '^ +Grid Size ' "$OUT/details.txt" | awk '{gsub(",", "", $NF); print $NF}')
for i in "${!names[@]}"; do
  "$NCU" --import "$OUT/sass.ncu-rep" --page source --csv --print-source sass --launch-skip "$i" \
    --launch-count 1 >"$OUT/source_$i.csv" 2>>"$OUT/ncu.log"
  echo "== ${names[$i]}" | cut -c1-160
  python3 "$(dirname "$0")/sass_hotspots.py" "$OUT/source_$i.csv" --blocks "${grids[$i]}" --top 15
done | tee "$OUT/hotspots.txt"
rm -f "$OUT/sass.ncu-rep"
gzip -f "$OUT"/source_*.csv
