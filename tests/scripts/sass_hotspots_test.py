#!/usr/bin/python3
"""scripts/sass_hotspots.py on a small source page in ncu's CSV layout: the straight runs
(equal execution counts) by instructions per block, the classes, and the refusal of a CSV
without the counts."""

import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(os.path.dirname(os.path.dirname(HERE)), "scripts", "sass_hotspots.py")

HEADER = ('"Kernel Name","k(RunArgs)",\n'
          '"Address","Source","Warp Stall Sampling (All Samples)",'
          '"Warp Stall Sampling (Not-issued Samples)","# Samples","Instructions Executed"\n')
# A prologue run once a block (4 blocks: 4 executions), a loop of three lines run 10 times
# a block, an epilogue: the loop is the largest run, 30 instructions a block.
LINES = [("0x1000", "LDC R1, c[0x0][0x28]", 0, 4),
         ("0x1010", "IMAD R2, R1, 0x8, RZ", 1, 4),
         ("0x1020", "@P0 LDG.E.64 R4, desc[UR4][R2.64]", 6, 40),
         ("0x1030", "DMMA.8x8x4 R8, R4, R6, R8", 2, 40),
         ("0x1040", "@!P1 BRA 0x1020", 2, 40),
         ("0x1050", "EXIT", 1, 4)]


def run(path, *args):
    return subprocess.run([sys.executable, SCRIPT, path, *args], capture_output=True, text=True)


def main():
    failures = []
    with tempfile.TemporaryDirectory() as d:
        good = os.path.join(d, "source.csv")
        with open(good, "w") as f:
            f.write(HEADER)
            for addr, sass, stall, n in LINES:
                f.write('"%s","%s","%d","0","%d","%d"\n' % (addr, sass, stall, stall, n))
        r = run(good, "--blocks", "4", "--top", "2")
        out = r.stdout.splitlines()
        if r.returncode != 0 or len(out) != 4:
            failures.append("good CSV: rc %d, output %r %r" % (r.returncode, r.stdout, r.stderr))
        else:
            if not out[0].startswith("33 instructions a block (6 SASS lines, 132 warp"):
                failures.append("total: %r" % out[0])
            # The loop: lines +0x20..+0x40, 10 a block x 3 = 30, 90.9 % of instructions,
            # 10 of 12 stall samples.
            if not (out[1].startswith("+00020..+00040     10.00 x   3 =      30  90.9 %")
                    and "83.3 % stalls" in out[1] and out[1].endswith("LDG.E.64 DMMA.8x8x4 BRA")):
                failures.append("loop run: %r" % out[1])
            if not out[2].startswith("+00000..+00010      1.00 x   2 =       2"):
                failures.append("prologue run: %r" % out[2])
            want = "by class: memory 11 (33.3 %), tensor 10 (30.3 %), control 11 (33.3 %)"
            classes = dict(x.split(" ", 1) for x in out[3][len("by class: "):].split(", "))
            if classes.get("memory") != "11 (33.3 %)" or classes.get("tensor") != "10 (30.3 %)" \
                    or classes.get("control") != "11 (33.3 %)" or classes.get("integer") != "1 (3.0 %)":
                failures.append("classes: %r (want %s, integer 1)" % (out[3], want))
        bad = os.path.join(d, "details.csv")
        with open(bad, "w") as f:
            f.write('"Address","Source"\n"0x1000","EXIT"\n')
        r = run(bad, "--blocks", "4")
        if r.returncode == 0 or "no 'Instructions Executed' column" not in r.stderr:
            failures.append("CSV without counts: rc %d, %r" % (r.returncode, r.stderr))
        r = run(good)
        if r.returncode == 0:
            failures.append("no --blocks accepted")
    for f in failures:
        print("FAIL:", f)
    print("sass_hotspots: %d failure(s)" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
