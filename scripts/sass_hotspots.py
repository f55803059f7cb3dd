#!/usr/bin/env python3
"""Where a kernel's instructions go, from Nsight Compute's per-SASS-line counts:
`ncu --section SourceCounters ... -o REP` then
`ncu --import REP --page source --csv --print-source sass --launch-skip I --launch-count 1`.

Consecutive instructions executed equally often are one straight run (a basic block or a
part of one); the runs are printed by their instructions per thread block, largest first,
with their share of the launch's instructions and warp-stall samples and their opcodes.
Then the instructions by class (tensor core, FP64, memory and shuffles, control; the rest
"integer": integer and address arithmetic, predicates, moves), per thread block.

  sass_hotspots.py SOURCE_CSV --blocks N [--top K]
    N  the launch's grid size (thread blocks), for counts per block
"""
import csv
import sys

CLASSES = (  # first match wins; by the opcode's first dotted part
    ("tensor", ("DMMA", "HMMA", "IMMA")),
    ("fp64", ("DADD", "DMUL", "DFMA", "DSETP", "MUFU")),
    ("memory", ("LDG", "STG", "LDS", "STS", "LDL", "STL", "LDC", "ULDC", "LDGSTS", "ATOMS",
                "ATOMG", "RED", "LD", "ST", "SHFL")),
    ("control", ("BRA", "BSSY", "BSYNC", "BAR", "EXIT", "WARPSYNC", "CALL", "RET", "NOP",
                 "VOTE")),
)  # everything else: "integer" (integer and address arithmetic, predicates, moves)


def opcode(sass):
    words = sass.split()
    if words and words[0].startswith("@"):
        words = words[1:]
    return words[0] if words else ""


def op_class(op):
    base = op.split(".")[0]
    for name, ops in CLASSES:
        if base in ops:
            return name
    return "integer"


def read(path):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    head = next((i for i, r in enumerate(rows) if "Instructions Executed" in r), None)
    if head is None:
        raise SystemExit("%s: no 'Instructions Executed' column (ncu --page source --csv "
                         "--print-source sass of a SourceCounters report)" % path)
    cols = rows[head]
    ie, src = cols.index("Instructions Executed"), cols.index("Source")
    stall = next((cols.index(c) for c in cols if c.startswith("Warp Stall Sampling (All")), None)
    out = []
    for r in rows[head + 1:]:
        if len(r) <= max(ie, src) or not r[0].startswith("0x"):
            continue
        n = int(r[ie].replace(",", "") or 0)
        s = int(r[stall].replace(",", "") or 0) if stall is not None else 0
        out.append((int(r[0], 16), r[src].strip(), n, s))
    if not out:
        raise SystemExit("%s: no instructions" % path)
    return out


def runs(lines):
    """Consecutive lines with the same execution count, as (first, last, count, lines)."""
    out = []
    for addr, sass, n, s in lines:
        if out and out[-1]["count"] == n:
            out[-1]["last"] = addr
            out[-1]["lines"].append((sass, s))
        else:
            out.append({"first": addr, "last": addr, "count": n, "lines": [(sass, s)]})
    return out


def parse_args(argv, doc, top=25):
    """PATH --blocks N [--top K] (also source_line_counts.py's): (path, blocks, top); the
    usage (doc's last paragraph) otherwise."""
    args, blocks = list(argv), None
    if "--top" in args:
        i = args.index("--top")
        top = int(args[i + 1])
        del args[i:i + 2]
    if "--blocks" in args:
        i = args.index("--blocks")
        blocks = int(args[i + 1])
        del args[i:i + 2]
    if len(args) != 1 or not blocks or blocks <= 0:
        raise SystemExit(doc.split("\n\n")[-1])
    return args[0], blocks, top


def main():
    path, blocks, top = parse_args(sys.argv[1:], __doc__)
    lines = read(path)
    base = lines[0][0]
    total = sum(n for _, _, n, _ in lines)
    stalls = sum(s for _, _, _, s in lines) or 1
    print("%d instructions a block (%d SASS lines, %d warp instructions, %d blocks)"
          % (round(total / blocks), len(lines), total, blocks))
    rs = sorted(runs(lines), key=lambda r: -r["count"] * len(r["lines"]))
    for r in rs[:top]:
        k = len(r["lines"])
        ops = " ".join(opcode(x) for x, _ in r["lines"])
        print("+%05x..+%05x %9.2f x %3d = %7.0f  %4.1f %% instr  %4.1f %% stalls  %s" % (
            r["first"] - base, r["last"] - base, r["count"] / blocks, k,
            r["count"] * k / blocks, 100.0 * r["count"] * k / total,
            100.0 * sum(s for _, s in r["lines"]) / stalls, ops[:100]))
    by_class = {}
    for _, sass, n, _ in lines:
        c = op_class(opcode(sass))
        by_class[c] = by_class.get(c, 0) + n
    print("by class: " + ", ".join("%s %.0f (%.1f %%)" % (c, v / blocks, 100.0 * v / total)
                                   for c, v in sorted(by_class.items(), key=lambda kv: -kv[1])))


if __name__ == "__main__":
    main()
