#!/usr/bin/python3
"""Rules on the repository's text that keep it a clone's own: a reader of a clone has no build
machine's folders, no reference-data folder at a fixed place and no notes outside it.

  /usr/bin/python3 scripts/check_tree.py [ROOT]

Fails (exit 1, one line a finding: file:line: rule) on
  - an absolute path of a machine's home or work folders (/home/..., /work/..., /Users/...,
    /tmp/s<N>...): a path on the machine a file was written on means nothing in a clone;
  - "../shared" anywhere but tests/CMakeLists.txt, the one place the tests look for the large
    reference data beside the clone (SPEXD_SHARED_DATA_DIR); everything else calls it the
    reference data;
  - a citation of style.md or toolchain.md, unless it names a file of docs/ that exists:
    what the code relies on is written in docs/ (docs/design.md, "Conventions");
  - a source file (.cc, .h, .cu, .cuh, .py) outside tests/data/ of more than 550 lines:
    split it by responsibility into small files named for what they do.
In a git work tree its tracked and untracked, not ignored files are read, else every file
under ROOT but build*/. Skipped: binary files and this script (it names the patterns).
Prints "tree rules: N files checked, clean" and exits 0 when nothing is found.
"""
import os
import pathlib
import re
import subprocess
import sys

SELF = "scripts/check_tree.py"
DATA_LOOKUP = {"tests/CMakeLists.txt"}
ABSOLUTE = re.compile(r"(?<![\w.~-])/(?:home|work|Users)/[\w.-]|(?<![\w.~-])/tmp/s\d")
SHARED = re.compile(r"\.\./shared\b")
OUTSIDE_NOTES = re.compile(r"(?:[\w./-]*/)?(?:style|toolchain)\.md\b")
MAX_LINES = 550
LENGTH_CHECKED = re.compile(r"\.(?:cc|h|cu|cuh|py)$")


def files(root):
    try:
        out = subprocess.run(["git", "-C", str(root), "ls-files", "-co", "--exclude-standard", "-z"],
                             capture_output=True, check=True).stdout
        names = [n for n in out.decode().split("\0") if n]
    except (OSError, subprocess.CalledProcessError):
        names = []
        for dirpath, dirnames, filenames in os.walk(root):
            rel = os.path.relpath(dirpath, root)
            dirnames[:] = [d for d in dirnames if not (rel == "." and d.startswith("build")) and d != ".git"]
            names += [os.path.normpath(os.path.join(rel, f)) for f in filenames]
    return sorted(n.replace(os.sep, "/") for n in names)


def length_findings(name, data):
    if not LENGTH_CHECKED.search(name) or name.startswith("tests/data/"):
        return []
    lines = len(data.decode("utf-8", "replace").splitlines())
    if lines > MAX_LINES:
        return [f"{name}: {lines} lines, more than {MAX_LINES}: split it by responsibility into "
                "small files named for what they do"]
    return []


def findings(root, name):
    path = root / name
    try:
        data = path.read_bytes()
    except OSError:
        return []
    if b"\0" in data[:8192]:
        return []
    out = length_findings(name, data)
    for i, line in enumerate(data.decode("utf-8", "replace").split("\n"), 1):
        if ABSOLUTE.search(line):
            out.append(f"{name}:{i}: an absolute path of a machine's folders: {line.strip()[:120]}")
        if SHARED.search(line) and name not in DATA_LOOKUP:
            out.append(f"{name}:{i}: ../shared outside the tests' data lookup (tests/CMakeLists.txt): "
                       f"{line.strip()[:120]}")
        for m in OUTSIDE_NOTES.finditer(line):
            cited = m.group(0)
            target = cited if cited.startswith("docs/") else None
            if target is None or not (root / target).is_file():
                out.append(f"{name}:{i}: cites {cited}, which is not a file of docs/: write what the "
                           f"code relies on in docs/ and cite that")
    return out


def main(argv):
    root = pathlib.Path(argv[0] if argv else pathlib.Path(__file__).resolve().parent.parent)
    names = [n for n in files(root) if n != SELF]
    found = [f for n in names for f in findings(root, n)]
    for f in found:
        print(f)
    if found:
        print(f"tree rules: {len(found)} findings in {len(names)} files")
        return 1
    print(f"tree rules: {len(names)} files checked, clean")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
