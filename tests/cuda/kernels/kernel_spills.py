#!/usr/bin/env python3
"""Every CUDA function's register spills, as ptxas reports them, against the budget.

The hot kernels run at the occupancy their registers allow, and a spill inside their loops
costs them (record cuda_frame-h200-issue-scan); a change of a kernel's arithmetic or of a
layout constant can move ptxas's register allocation without changing a result, so no
other test would notice. Each cuda/kernels/*.cu is compiled for each architecture with
its own command from the build's compile_commands.json (the build's flags and per-file
options, its architectures replaced) and `-Xptxas -v` (the maintained compiler's own report;
no GPU needed), and every function's spill stores and loads must stay within
spill_budget.txt beside this script: a function it does not name may not spill at all.

  kernel_spills.py --compile-commands FILE --archs 80,90,100 [--budget FILE]
                   [--only NAME.cu]... [--empty-budget]

--only: those sources alone; --empty-budget: no allowance (the check's own test). The budget
is one ptxas's: its "toolkit X.Y" line names the CUDA release it was measured with, and
another nvcc's allocation may differ, so the check is skipped there (exit 77, ctest's skip).
Prints "kernel spills: N functions checked, within the budget" and exits 0, else one line a
breach and exits 1. A budget line that names no function ptxas reported is a breach too (a
renamed kernel would otherwise keep an allowance nothing uses); one above what the function
spills is printed as a note.
"""
import argparse
import concurrent.futures
import json
import os
import pathlib
import re
import shlex
import subprocess
import sys
import tempfile

ENTRY = re.compile(r"Function properties for (\S+)")
SPILLS = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")


def read_budget(path):
    """The toolkit release and {(function, arch): (stores, loads)} from the lines "toolkit
    X.Y" and "FUNCTION sm_NN STORES LOADS"."""
    budget, toolkit = {}, None
    for n, line in enumerate(pathlib.Path(path).read_text().splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        if parts[0] == "toolkit" and len(parts) == 2:
            toolkit = parts[1]
            continue
        if len(parts) < 4 or not re.fullmatch(r"sm_\d+", parts[1]):
            raise SystemExit("%s:%d: expected FUNCTION sm_NN STORES LOADS" % (path, n))
        budget[(parts[0], parts[1])] = (int(parts[2]), int(parts[3]))
    if toolkit is None:
        raise SystemExit("%s: no \"toolkit X.Y\" line" % path)
    return toolkit, budget


def nvcc_release(nvcc):
    """X.Y of `nvcc --version`'s "release X.Y"."""
    out = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout
    m = re.search(r"release (\d+\.\d+)", out)
    if not m:
        raise SystemExit("kernel_spills.py: no release in %s --version" % nvcc)
    return m.group(1)


def kernel_commands(path, only):
    """{source path: (its compile command as arguments, its directory)} of cuda/kernels/*.cu
    in a compile_commands.json (`only`: those file names alone)."""
    out = {}
    for entry in json.loads(pathlib.Path(path).read_text()):
        source = pathlib.Path(entry["file"])
        if source.suffix != ".cu" or source.parent.parts[-2:] != ("cuda", "kernels"):
            continue
        if only and source.name not in only:
            continue
        args = entry.get("arguments") or shlex.split(entry["command"])
        out[source] = (args, entry["directory"])
    return out


def compile_report(command, directory, source, arch):
    """ptxas's -v report of one source for one architecture: the build's command with its
    architectures and output replaced."""
    args, out = [], False
    for a in command:
        if out:
            out = False
        elif a == "-o":
            out = True
        elif not a.startswith("--generate-code"):
            args.append(a)
    with tempfile.TemporaryDirectory() as tmp:
        cmd = args + ["--generate-code=arch=compute_%s,code=[sm_%s]" % (arch, arch),
                      "-Xptxas", "-v", "-o", os.path.join(tmp, "k.o")]
        run = subprocess.run(cmd, capture_output=True, text=True, cwd=directory)
    if run.returncode != 0:
        raise SystemExit("kernel_spills.py: %s for sm_%s did not compile:\n%s"
                         % (source.name, arch, run.stderr[-2000:]))
    return run.stderr


def spills(report):
    """[(mangled name, stores, loads)] of every function in a ptxas report."""
    out, current = [], None
    for line in report.splitlines():
        m = ENTRY.search(line)
        if m:
            current = m.group(1)
            continue
        m = SPILLS.search(line)
        if m and current:
            out.append((current, int(m.group(1)), int(m.group(2))))
            current = None
    return out


def short_names(mangled):
    """Demangled names less namespaces and parameters (c++filt -p): TileFactorKernel<5>."""
    run = subprocess.run(["c++filt", "-p"], input="\n".join(mangled), capture_output=True,
                         text=True, check=True)
    return [re.sub(r"^(\w+::|\(anonymous namespace\)::)+", "", name)
            for name in run.stdout.splitlines()]


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--compile-commands", required=True, help="the build's compile_commands.json")
    ap.add_argument("--archs", required=True, help="comma-separated: 80,90,100")
    ap.add_argument("--budget", default=str(pathlib.Path(__file__).with_name("spill_budget.txt")))
    ap.add_argument("--only", action="append", default=[], metavar="NAME.cu")
    ap.add_argument("--empty-budget", action="store_true")
    args = ap.parse_args(argv)
    commands = kernel_commands(args.compile_commands, args.only)
    sources = sorted(commands)
    archs = [a.strip() for a in args.archs.split(",") if a.strip()]
    if not sources or not archs:
        raise SystemExit("kernel_spills.py: no sources or no architectures")
    toolkit, budget = read_budget(args.budget)
    release = nvcc_release(commands[sources[0]][0][0])
    if release != toolkit:
        print("kernel spills: skipped: the budget is CUDA %s's ptxas, this nvcc is %s's"
              % (toolkit, release))
        return 77
    if args.empty_budget:
        budget = {}
    jobs = [(s, a) for s in sources for a in archs]
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        reports = list(pool.map(lambda job: compile_report(*commands[job[0]], *job), jobs))
    found = []  # (function, arch, stores, loads)
    for (source, arch), report in zip(jobs, reports):
        rows = spills(report)
        for name, (_, stores, loads) in zip(short_names([r[0] for r in rows]), rows):
            found.append((name, "sm_" + arch, stores, loads))
    breaches, notes, used = [], [], set()
    for name, arch, stores, loads in found:
        allowed = budget.get((name, arch), (0, 0))
        if (name, arch) in budget:
            used.add((name, arch))
        if stores > allowed[0] or loads > allowed[1]:
            breaches.append("%s %s: %d bytes spill stores, %d loads; the budget allows %d, %d"
                            % (name, arch, stores, loads, *allowed))
        elif (stores, loads) != allowed:
            notes.append("note: %s %s spills %d, %d, under its budget %d, %d: lower the budget"
                         % (name, arch, stores, loads, *allowed))
    for key in sorted(set(budget) - used):
        if key[1][3:] in archs and not args.only:
            breaches.append("%s %s: in the budget, but ptxas reported no such function" % key)
    for line in notes:
        print(line)
    for line in breaches:
        print("kernel spills: " + line)
    if breaches:
        return 1
    print("kernel spills: %d functions checked, within the budget" % len(found))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
