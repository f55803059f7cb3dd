#!/usr/bin/python3
"""Every citation of the extraction specification in the repository names a section of
docs/extraction-spec.md: "spec §2.17", "extraction-spec §2.7-2.8", "spec §2.11, §2.17",
"spec §2.6.5" (the fifth entry of the numbered list in §2.6). A citation that names no heading
(or no list item of one) is reported with its file and line.

  /usr/bin/python3 scripts/check_spec_citations.py [ROOT]

ROOT defaults to the repository root; in a git work tree its tracked files are read, else
every file under it. Prints "spec citations: N checked, clean" and exits 0, or one line per
unresolved citation and exits 1. Other documents' sections ("FITS 4.0 §3.1",
"RFC 1952 §2.3") are not the spec's and are not checked.
"""

import os
import re
import subprocess
import sys

SPEC = os.path.join("docs", "extraction-spec.md")
FIXTURE = os.path.join("tests", "data", "spec_citations", "")  # the check's own test
NUM = r"\d+(?:\.\d+)*"
# "spec" or "extraction-spec(.md)", then a chain of sections: §a, §b-c; §d / §e and §f.
CITATION = re.compile(
    r"\b(?:extraction-spec(?:\.md)?|spec)\s*,?\s*"
    r"((?:§\s?" + NUM + r"(?:\s?[-–]\s?" + NUM + r")?(?:'s)?"
    r"(?:\s*(?:,|;|/|and)\s*(?=§))?)+)",
    re.IGNORECASE)


def sections(spec_text):
    """Heading numbers ("0", "2.17", ...) and, for each, its numbered list items."""
    found = set()
    current = None
    for line in spec_text.splitlines():
        m = re.match(r"^#+\s+(" + NUM + r")\.?\s", line)
        if m:
            current = m.group(1)
            found.add(current)
            continue
        if line.startswith("#"):
            current = None
            continue
        item = re.match(r"^(\d+)\.\s", line)
        if item and current:
            found.add(current + "." + item.group(1))
    return found


def files(root):
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "-z"], capture_output=True,
                             check=True).stdout.decode()
        top = subprocess.run(["git", "-C", root, "rev-parse", "--show-toplevel"],
                             capture_output=True, check=True, text=True).stdout.strip()
        if os.path.realpath(top) == os.path.realpath(root):
            return [f for f in out.split("\0") if f]
    except (OSError, subprocess.CalledProcessError):
        pass
    listed = []
    for d, dirs, names in os.walk(root):
        dirs[:] = [x for x in dirs if x != ".git" and not x.startswith("build")]
        listed += [os.path.relpath(os.path.join(d, n), root) for n in names]
    return listed


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(
        os.path.dirname(os.path.abspath(__file__)))
    try:
        with open(os.path.join(root, SPEC), encoding="utf-8") as f:
            known = sections(f.read())
    except OSError as e:
        print(f"spec citations: cannot read {SPEC}: {e}")
        return 1
    checked, bad = 0, []
    for rel in sorted(files(root)):
        if rel == SPEC or rel.startswith(FIXTURE):
            continue
        path = os.path.join(root, rel)
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except (OSError, UnicodeDecodeError):
            continue  # binary or unreadable: no citations
        for lineno, line in enumerate(text.splitlines(), 1):
            for m in CITATION.finditer(line):
                for ref in re.findall(NUM, m.group(1)):
                    checked += 1
                    if ref not in known:
                        bad.append(f"{rel}:{lineno}: §{ref} is no section of {SPEC}: "
                                   f"{line.strip()[:120]}")
    for b in bad:
        print(b)
    if bad:
        print(f"spec citations: {checked} checked, {len(bad)} unresolved")
        return 1
    print(f"spec citations: {checked} checked, clean")
    return 0


if __name__ == "__main__":
    sys.exit(main())
