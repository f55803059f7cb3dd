#!/usr/bin/env python3
"""Sums one warm frame's kernel times by kernel, from `ncu --csv --page raw` of a
frame benchmark run with two warm frames (scripts/cuda_kernel_profile_device.sh).

The warm frames launch the same kernels in the same order, so the last frame is the
longest tail of the launch list that repeats just before itself; the cold frame and
the benchmark's set-up come first and are left out.

  kernel_profile_summary.py NCU_CSV [--top N]
"""
import csv
import re
import sys
from collections import defaultdict


def read_launches(path):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    head = next(i for i, r in enumerate(rows) if "Kernel Name" in r)
    cols = rows[head]
    name_col = cols.index("Kernel Name")
    time_col = cols.index("gpu__time_duration.sum")
    unit = rows[head + 1][time_col]  # the row after the header holds the units
    scale = {"nsecond": 1e-6, "ns": 1e-6, "usecond": 1e-3, "us": 1e-3, "msecond": 1.0, "ms": 1.0,
             "second": 1e3, "s": 1e3}[unit]
    out = []
    for r in rows[head + 2:]:
        if len(r) <= max(name_col, time_col) or not r[time_col]:
            continue
        out.append((r[name_col], float(r[time_col].replace(",", "")) * scale))
    return out


def short_name(name):
    """A kernel's name without its arguments; templates kept, namespaces dropped."""
    name = name[5:] if name.startswith("void ") else name
    name = re.sub(r"\((?:[^()]|\([^()]*\))*\)$", "", name)  # the argument list
    name = re.sub(r"spexd::cuda::|\(anonymous namespace\)::|spexd::", "", name)
    if "cutlass" in name or "gemm" in name.lower():
        m = re.search(r"(\d+x\d+x\d+)", name)
        tn = re.search(r"_(nn|nt|tn|tt)_", name)
        return "gemm %s %s" % (tn.group(1) if tn else "", m.group(1) if m else name[:40])
    return name[:90]


def last_frame(launches):
    names = [n for n, _ in launches]
    n = len(names)
    for w in range(n // 2, 0, -1):  # the longest repeat: one short kernel run twice also repeats
        if names[n - w:] == names[n - 2 * w:n - w]:
            return launches[n - w:]
    raise SystemExit("no repeated frame at the end of the launch list")


def main():
    top = 40
    args = sys.argv[1:]
    if "--top" in args:
        i = args.index("--top")
        top = int(args[i + 1])
        del args[i:i + 2]
    frame = last_frame(read_launches(args[0]))
    by = defaultdict(lambda: [0, 0.0])
    for name, ms in frame:
        k = short_name(name)
        by[k][0] += 1
        by[k][1] += ms
    total = sum(v[1] for v in by.values())
    print("one warm frame: %d launches, %.2f ms of kernels (serialised)" % (len(frame), total))
    for k, (count, ms) in sorted(by.items(), key=lambda kv: -kv[1][1])[:top]:
        print("%8.3f ms %5.1f %%  %4d x  %s" % (ms, 100 * ms / total, count, k))


if __name__ == "__main__":
    main()
