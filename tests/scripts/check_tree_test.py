#!/usr/bin/python3
"""scripts/check_tree.py catches what it is there for, in a scratch tree written here (the
seeded lines are assembled at run time, so that the repository itself stays clean): an
absolute path of a machine's folders, the reference-data folder outside the tests' data
lookup, a citation of notes outside docs/, a source file over the length cap, a listed long
file that is no longer over it; and it passes the allowed forms (the data lookup, a cited
file of docs/, a container's own paths, ordinary words, a source file at the cap, long
files that are no sources or lie in tests/data/).

  check_tree_test.py REPO_ROOT
"""
import pathlib
import sys

from scratch_tree import check_findings

ROOT = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parents[2])
sys.path.insert(0, str(ROOT / "scripts"))
import check_tree  # noqa: E402  (the line cap)
SHARED = ".." + "/shared"
HOME = "/" + "home"
WORK = "/" + "work"
TMP_S = "/" + "tmp/s3"
STYLE = "style" + ".md"
TOOLCHAIN = "toolchain" + ".md"

BAD = {
    "scripts/a.sh": [f"cd {WORK}/main && make", f"out={TMP_S}/x"],
    "docs/b.md": [f"see {HOME}/alice/notes", f"data in `{SHARED}/data/caseA`"],
    "core/c.h": [f'// errors as {STYLE} "Errors" says', f"// ({TOOLCHAIN} §4.1)",
                 f"// shared/docs/{STYLE}"],
}
GOOD = {
    "tests/CMakeLists.txt": [f"set(SPEXD_SHARED_DATA_DIR ${{PROJECT_SOURCE_DIR}}/{SHARED}/data)"],
    "docs/" + TOOLCHAIN: ["# notes"],
    "server/d.h": [f"// see docs/{TOOLCHAIN}, section 2", "// shared_ptr, a shared library, /dev/shm",
                   "ARG CCACHE_DIR=/root/.cache/ccache", "x = a/work/b  # not a root path"],
}
EXPECT = [
    ("scripts/a.sh:1", "absolute path"), ("scripts/a.sh:2", "absolute path"),
    ("docs/b.md:1", "absolute path"), ("docs/b.md:2", "outside the tests' data lookup"),
    ("core/c.h:1", f"cites {STYLE}"), ("core/c.h:2", f"cites {TOOLCHAIN}"),
    ("core/c.h:3", f"cites shared/docs/{STYLE}"),
]

CAP = check_tree.MAX_LINES
BAD["core/long.cc"] = ["int x;"] * (CAP + 1)
BAD["scripts/long.py"] = ["x = 1"] * (CAP + 1)
GOOD["core/at_cap.cu"] = ["int x;"] * CAP
GOOD["tests/data/long/long.cc"] = ["int x;"] * (CAP + 1)
GOOD["docs/long.md"] = ["text"] * (CAP + 1)
EXPECT += [("core/long.cc", f"{CAP + 1} lines, more than {CAP}"),
           ("scripts/long.py", f"{CAP + 1} lines, more than {CAP}")]


def main():
    files = {name: "\n".join(lines) + "\n" for name, lines in {**BAD, **GOOD}.items()}
    failures = check_findings(ROOT / "scripts" / "check_tree.py", files, EXPECT, list(GOOD))
    print("check_tree_test: " + ("PASS" if failures == 0 else f"{failures} FAILED"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
