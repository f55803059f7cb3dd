#!/usr/bin/env python3
"""Each CUDA kernel's time and DRAM traffic, and each GPU stage's, from ncu's CSV.

  scripts/kernel_traffic.py NCU_CSV [--batches-per-frame B] [--copy-rate TBPS]

NCU_CSV is `ncu --csv --metrics ...` output (scripts/kernel_traffic.sh makes it; other lines
of the profiled program's stdout may be mixed in). Sums every launch of a kernel (cuBLAS's
GEMM kernels grouped by their operands' transposition, whatever tile shape cuBLAS chose),
divides by the frames the launches hold (their batches, one normal-equations launch each,
over B: an r frame is four batches on an H100 or H200), and prints per kernel and per stage
of the frame (docs/performance.md's roofline): launches, time, DRAM bytes read and written,
and the mean share of the DRAM's peak; then the totals (a cold frame's spot evaluation left
out), and the traffic's time at the copy rate.

Where the CSV also holds the issue counters (kernel_traffic.sh with ISSUE=1), a second table
per kernel: warp instructions a frame, the share of the schedulers' cycles that issued one
(instructions over the kernel's time x --schedulers x --clock-ghz: an H100's or H200's 132 SMs
of 4 schedulers at 1.98 GHz by default), the shared-memory wavefronts a frame and the share of
them that bank conflicts added, and the local-memory (spill) bytes a frame.
"""
import argparse
import collections
import csv
import io
import re
import sys

# (stage, regex over a kernel's name), first match wins.
STAGES = [
    ("normal equations", r"NormalEquations|Regularize|ResetSlotFlags"),
    ("tiled Cholesky", r"TileFactor|PanelSolve|gemm.*_nt_"),
    ("solve", r"BlockedSolve|CheckSolve"),
    ("inverse blocks", r"CoreGram|gemm.*_(nn|tn)_"),
    ("inverse square roots, decorrelation", r"Reduce|QlKernel|Twisted|RotateKernel"),
    ("finalise", r"PixelModel|ColumnSums|StitchCanvas"),
    ("image and outputs", r"Widen|Import|Narrow"),
    ("PSF spots (a cold frame's)", r"EvaluateSpots"),
]
# One launch a batch: the first of its stages, and the others that a whole batch in the
# window has as often.
BATCH_KERNEL = r"^BuildNormalEquations"
ONCE_A_BATCH = r"^(BuildNormalEquations|Regularize|BlockedSolve|CoreGram|\w*Reduce|QlKernel|Twisted|PixelModel|ColumnSums)"
# A cold frame's own work, left out of the totals: a warm frame has none of it.
COLD_STAGE = STAGES[-1][0]
TIME = "gpu__time_duration.sum"
READ = "dram__bytes_read.sum"
WRITE = "dram__bytes_write.sum"
SHARE = "dram__throughput.avg.pct_of_peak_sustained_elapsed"
INST = "smsp__inst_executed.sum"
SHARED_WAVEFRONTS = ("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
                     "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum")
SHARED_CONFLICTS = ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
                    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum")
LOCAL_BYTES = ("l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum",
               "l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum")


def kernel_key(name):
    """A kernel's row: its own name, or cuBLAS's GEMMs by transposition."""
    base = name.split("(")[0].split("::")[-1].strip()
    m = re.search(r"gemm_f64.*?_(nn|nt|tn|tt)_", base)
    return "cuBLAS DGEMM " + m.group(1) if m else base


def stage_of(key):
    for stage, pattern in STAGES:
        if re.search(pattern, key.replace("cuBLAS DGEMM ", "gemm_") + "_"):
            return stage
    return "other"


def parse(text):
    """{kernel: {metric: [values]}} and launches a kernel, from ncu's CSV rows."""
    lines = text.splitlines()
    start = next((i for i, l in enumerate(lines) if '"Kernel Name"' in l), None)
    if start is None:
        raise SystemExit("kernel_traffic.py: no ncu CSV header (\"Kernel Name\") in the input")
    rows = list(csv.reader(io.StringIO("\n".join(l for l in lines[start:] if l.startswith('"')))))
    head = rows[0]
    ki, mi, vi, ii = (head.index(c) for c in ("Kernel Name", "Metric Name", "Metric Value", "ID"))
    values = collections.defaultdict(lambda: collections.defaultdict(list))
    launches = collections.defaultdict(set)
    for r in rows[1:]:
        try:
            v = float(r[vi].replace(",", ""))
        except ValueError:
            continue
        key = kernel_key(r[ki])
        values[key][r[mi]].append(v)
        launches[key].add(r[ii])
    return values, {k: len(v) for k, v in launches.items()}


def summarise(values, launches, frames):
    """Rows of (name, launches, ms, GB, mean share %) per kernel and per stage, a frame each."""
    def row(name, keys):
        ms = sum(sum(values[k][TIME]) for k in keys) / 1e6 / frames
        gb = sum(sum(values[k][READ]) + sum(values[k][WRITE]) for k in keys) / 1e9 / frames
        shares = [s for k in keys for s in values[k][SHARE]]
        share = sum(shares) / len(shares) if shares else float("nan")
        return (name, sum(launches[k] for k in keys), ms, gb, share)

    kernels = sorted((row(k, [k]) for k in values), key=lambda r: -r[2])
    by_stage = collections.defaultdict(list)
    for k in values:
        by_stage[stage_of(k)].append(k)
    stages = [row(s, by_stage[s]) for s, _ in STAGES + [("other", "")] if by_stage.get(s)]
    warm = [k for k in values if stage_of(k) != COLD_STAGE]
    return kernels, stages, row("every kernel", warm)


def issue_rows(values, frames, schedulers, clock_ghz):
    """Rows of (name, G instructions, issue %, G shared wavefronts, conflict %, local GB) per
    kernel that has the issue counters, a frame each, slowest first."""
    rows = []
    for k, v in values.items():
        if not v.get(INST):
            continue
        seconds = sum(v[TIME]) / 1e9
        inst = sum(v[INST])
        waves = sum(sum(v.get(m, [])) for m in SHARED_WAVEFRONTS)
        conflicts = sum(sum(v.get(m, [])) for m in SHARED_CONFLICTS)
        local = sum(sum(v.get(m, [])) for m in LOCAL_BYTES)
        issue = 100 * inst / (seconds * schedulers * clock_ghz * 1e9) if seconds > 0 else float("nan")
        rows.append((k, seconds, inst / 1e9 / frames, issue, waves / 1e9 / frames,
                     100 * conflicts / waves if waves else 0.0, local / 1e9 / frames))
    return [r[:1] + r[2:] for r in sorted(rows, key=lambda r: -r[1])]


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("csv")
    ap.add_argument("--batches-per-frame", type=float, default=4.0,
                    help="a frame's batches (the frame bench's timeline shows them)")
    ap.add_argument("--copy-rate", type=float, default=4.3,
                    help="TB/s the traffic is timed at (a device-to-device copy's rate)")
    ap.add_argument("--schedulers", type=float, default=528,
                    help="the GPU's warp schedulers (SMs x 4: 528 on an H100 or H200 SXM)")
    ap.add_argument("--clock-ghz", type=float, default=1.98,
                    help="the SM clock the kernels ran at (ncu --clock-control none)")
    args = ap.parse_args(argv)
    if min(args.batches_per_frame, args.copy_rate, args.schedulers, args.clock_ghz) <= 0:
        ap.error("--batches-per-frame, --copy-rate, --schedulers and --clock-ghz must be positive")
    with open(args.csv, encoding="utf-8", errors="replace") as f:
        values, launches = parse(f.read())
    batches = sum(n for k, n in launches.items() if re.search(BATCH_KERNEL, k))
    if batches == 0:
        raise SystemExit("kernel_traffic.py: no normal-equations launch, so no whole batch, in the input")
    cut = sorted({k for k, n in launches.items() if re.search(ONCE_A_BATCH, k) and n != batches})
    if cut:
        print("kernel_traffic.py: warning: the window cuts a batch (%s: not one launch a batch); "
              "move SKIP or COUNT" % ", ".join(cut), file=sys.stderr)
    frames = batches / args.batches_per_frame
    print("%d batches, %g frames of %g batches\n" % (batches, frames, args.batches_per_frame))
    kernels, stages, total = summarise(values, launches, frames)
    fmt = "%-44s %8s %9s %9s %7s"
    for title, rows in (("kernel", kernels), ("stage", stages)):
        print(fmt % (title, "launches", "ms/frame", "GB/frame", "DRAM %"))
        for name, n, ms, gb, share in rows:
            print(fmt % (name[:44], n, "%.2f" % ms, "%.2f" % gb, "%.0f" % share))
        print()
    _, n, ms, gb, _ = total
    print("every kernel but a cold frame's: %d launches, %.1f ms a frame, %.1f GB a frame of DRAM traffic "
          "(%.1f ms at %.1f TB/s)" % (n, ms, gb, gb / args.copy_rate, args.copy_rate))
    issue = issue_rows(values, frames, args.schedulers, args.clock_ghz)
    if issue:
        fmt = "%-44s %8s %7s %9s %10s %9s"
        print()
        print(fmt % ("kernel", "G inst", "issue %", "G shared", "conflict %", "local GB"))
        for name, inst, pct, waves, conflict, local in issue:
            print(fmt % (name[:44], "%.2f" % inst, "%.1f" % pct, "%.2f" % waves, "%.1f" % conflict,
                         "%.2f" % local))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
