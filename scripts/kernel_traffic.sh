#!/usr/bin/env bash
# Each CUDA kernel's time and DRAM traffic over a warm frame's batches, and each GPU stage's
# (docs/performance.md's roofline, record cuda_frame-h200-dram): ncu replays every launch of
# the frame benchmark in a window alone, then scripts/kernel_traffic.py sums them a frame.
#
#   scripts/kernel_traffic.sh DIR OUT_DIR [BENCH_ARGS...]
#     DIR       a build tree, install prefix or bundle (scripts/run_program.sh)
#     OUT_DIR   gets kernel_traffic.csv (ncu's) and kernel_traffic.txt (the tables)
#   Environment: SKIP (40) and COUNT (400) launches: the window, past the cold frame's first
#   batch; BATCHES (4) a frame's batches; NCU (ncu on the PATH, else the CUDA toolkit's);
#   ISSUE=1 also counts each kernel's instructions, shared-memory wavefronts and bank
#   conflicts and local-memory bytes (a second table: what issues, conflicts and spills).
#   BENCH_ARGS go to spexd_cuda_frame_bench (--psf FILE for a b or z frame).
set -euo pipefail
[[ $# -ge 2 ]] || { sed -n '2,13p' "$0"; exit 2; }
dir=$1 out=$2
shift 2
here=$(dirname "$(readlink -f "$0")")
ncu=${NCU:-$(command -v ncu || echo /usr/local/cuda/bin/ncu)}
mkdir -p "$out"
metrics=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum
metrics+=,dram__throughput.avg.pct_of_peak_sustained_elapsed
if [[ ${ISSUE:-0} == 1 ]]; then
  metrics+=,smsp__inst_executed.sum
  for op in ld st; do
    metrics+=,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_$op.sum
    metrics+=,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_$op.sum
    metrics+=,l1tex__t_bytes_pipe_lsu_mem_local_op_$op.sum
  done
fi
"$ncu" --clock-control none --launch-skip "${SKIP:-40}" --launch-count "${COUNT:-400}" \
  --metrics "$metrics" --csv "$here/run_program.sh" "$dir" spexd_cuda_frame_bench --runs 1 "$@" \
  > "$out/kernel_traffic.csv"
python3 "$here/kernel_traffic.py" "$out/kernel_traffic.csv" --batches-per-frame "${BATCHES:-4}" \
  | tee "$out/kernel_traffic.txt"
