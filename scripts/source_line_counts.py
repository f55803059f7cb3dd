#!/usr/bin/env python3
"""Where a kernel's instructions go by CUDA source line, from a module
built with -DSPEXD_CUDA_LINEINFO=ON (the same machine code): `ncu --section SourceCounters
--kernel-name regex:K --launch-skip I --launch-count 1 -o REP ...`, then
`ncu --import REP.ncu-rep --page source --csv --print-source cuda,sass > PAGE.csv`.

That page holds, per source file, each source line's counters followed by its SASS lines.
A SASS line inlined from several levels (a helper called from a helper) is listed under
each level's line, so the lines' shares may add up to more than 100 %; the launch's total
counts each SASS address once. Prints the total, then the lines by instructions per thread
block, largest first, with their share of the instructions and of the warp-stall samples.

  source_line_counts.py PAGE.csv[.gz] --blocks N [--top K]
    N  the launch's grid size (thread blocks), for counts per block
"""
import csv
import gzip
import sys

from sass_hotspots import parse_args  # the same command line (scripts/ is on sys.path)


def number(text):
    text = text.replace(",", "").strip()
    return int(text) if text.isdigit() else 0


def read(path):
    """(lines, total instructions, total stall samples): lines as (file, line, source,
    instructions, stall samples)."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", newline="") as f:
        rows = list(csv.reader(f))
    lines, sass, path_now, cols = [], {}, "?", None
    for r in rows:
        if not r:
            continue
        if r[0] == "File Path" and len(r) > 1:
            path_now = r[1]
        elif r[0] == "Line No":
            cols = r
        elif cols is not None and "Instructions Executed" in cols:
            ie = cols.index("Instructions Executed")
            st = next((i for i, c in enumerate(cols) if c.startswith("Warp Stall Sampling (All")), None)
            if len(r) <= ie:
                continue
            n, s = number(r[ie]), number(r[st]) if st is not None else 0
            if r[0]:  # a source line's own counters
                lines.append((path_now.rsplit("/", 1)[-1], r[0], r[1].strip(), n, s))
            elif len(r) > 2 and r[2].startswith("0x"):  # one of its SASS lines
                sass[r[2]] = (n, s)
    if cols is None or "Instructions Executed" not in cols:
        raise SystemExit("%s: no 'Instructions Executed' column (ncu --page source --csv "
                         "--print-source cuda,sass of a SourceCounters report)" % path)
    if not sass:
        raise SystemExit("%s: no SASS lines (was the module built with -lineinfo?)" % path)
    return lines, sum(n for n, _ in sass.values()), sum(s for _, s in sass.values())


def main():
    path, blocks, top = parse_args(sys.argv[1:], __doc__, top=30)
    lines, total, stalls = read(path)
    print("%d instructions a block (%d warp instructions, %d blocks)"
          % (round(total / blocks), total, blocks))
    for f, line, src, n, s in sorted(lines, key=lambda x: -x[3])[:top]:
        print("%8.0f %5.1f %% instr %5.1f %% stalls  %s:%s  %s" % (
            n / blocks, 100.0 * n / max(total, 1), 100.0 * s / max(stalls, 1), f, line, src[:100]))


if __name__ == "__main__":
    main()
