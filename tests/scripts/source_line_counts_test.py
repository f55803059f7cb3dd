#!/usr/bin/python3
"""scripts/source_line_counts.py on a small cuda,sass source page in ncu's CSV layout (two
files, one SASS line listed under two inlining levels, gzipped and plain), and the refusal
of pages without counts or SASS lines."""

import gzip
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(os.path.dirname(os.path.dirname(HERE)), "scripts", "source_line_counts.py")

HEAD = ('"Line No","Source","Address","Source","Warp Stall Sampling (All Samples)",'
        '"Warp Stall Sampling (Not-issued Samples)","Instructions Executed"\n')


def block(path, lines):
    """A file's block: each (line, source, stall, count, [(address, sass, stall, count)])."""
    out = '"File Path","%s"\n"Function Name","k(RunArgs)"\n' % path + HEAD
    for no, src, stall, n, sass in lines:
        out += '"%d","%s","-","-","%d","0","%d"\n' % (no, src, stall, n)
        for addr, text, s, m in sass:
            out += '"","","%s","%s","%d","0","%d"\n' % (addr, text, s, m)
    return out


# kernel.cu line 10: a loop (2 SASS lines, 40 a launch each); line 12: an epilogue calling an
# inlined helper (helper.h line 3) whose one SASS line (0x30) is listed under both.
PAGE = (block("/src/cuda/helper.h", [(3, "return a[i];", 2, 8, [("0x30", "LDS R1, [R2]", 2, 8)])]) +
        block("/src/cuda/kernel.cu", [
            (10, "for (int k = 0; k < n; ++k) s += a[k];", 6, 80,
             [("0x10", "LDS R4, [R5]", 4, 40), ("0x20", "DADD R6, R6, R4", 2, 40)]),
            (12, "out[i] = helper(a, i);", 2, 12,
             [("0x30", "LDS R1, [R2]", 2, 8), ("0x40", "STG.E [R8], R1", 0, 4)])]))


def run(path, *args):
    return subprocess.run([sys.executable, SCRIPT, path, *args], capture_output=True, text=True)


def main():
    failures = []
    with tempfile.TemporaryDirectory() as d:
        plain = os.path.join(d, "page.csv")
        with open(plain, "w") as f:
            f.write(PAGE)
        packed = os.path.join(d, "page.csv.gz")
        with gzip.open(packed, "wt") as f:
            f.write(PAGE)
        for path in (plain, packed):
            r = run(path, "--blocks", "4", "--top", "2")
            out = r.stdout.splitlines()
            if r.returncode != 0 or len(out) != 3:
                failures.append("%s: rc %d, output %r %r" % (path, r.returncode, r.stdout, r.stderr))
                continue
            # Total: SASS 0x10..0x40 once each = 92 warp instructions, 23 a block (0x30's 8
            # counted once although listed twice).
            if out[0] != "23 instructions a block (92 warp instructions, 4 blocks)":
                failures.append("total: %r" % out[0])
            # The loop line: 80 / 4 = 20 a block, 87.0 % of 92, 6 of 8 stall samples.
            if not (out[1].startswith("      20  87.0 % instr  75.0 % stalls  kernel.cu:10  for")):
                failures.append("loop line: %r" % out[1])
            if not out[2].startswith("       3  13.0 % instr  25.0 % stalls  kernel.cu:12  out[i]"):
                failures.append("epilogue line: %r" % out[2])
        r = run(plain, "--blocks", "4")
        if r.returncode != 0 or "helper.h:3  return a[i];" not in r.stdout:
            failures.append("the inlined helper's line is listed: %r" % r.stdout)
        bad = os.path.join(d, "details.csv")
        with open(bad, "w") as f:
            f.write('"File Path","/x.cu"\n"Line No","Source"\n"1","x"\n')
        r = run(bad, "--blocks", "4")
        if r.returncode == 0 or "no 'Instructions Executed' column" not in r.stderr:
            failures.append("page without counts: rc %d, %r" % (r.returncode, r.stderr))
        nosass = os.path.join(d, "nosass.csv")
        with open(nosass, "w") as f:
            f.write('"File Path","/x.cu"\n' + HEAD + '"1","x","0","0","5"\n')
        r = run(nosass, "--blocks", "4")
        if r.returncode == 0 or "no SASS lines" not in r.stderr:
            failures.append("page without SASS lines: rc %d, %r" % (r.returncode, r.stderr))
        r = run(plain)
        if r.returncode == 0:
            failures.append("no --blocks accepted")
    for f in failures:
        print("FAIL:", f)
    print("source_line_counts: %d failure(s)" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
