#!/usr/bin/python3
"""scripts/check_tree.py catches what it is there for, in a scratch tree written here (the
seeded lines are assembled at run time, so that the repository itself stays clean): an
absolute path of a machine's folders, the reference-data folder outside the tests' data
lookup, a citation of notes outside docs/; and it passes the allowed forms (the data lookup, a cited file of docs/,
a container's own paths, ordinary words).

  check_tree_test.py REPO_ROOT
"""
import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parents[2])
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


def main():
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        for files in (BAD, GOOD):
            for name, lines in files.items():
                (root / name).parent.mkdir(parents=True, exist_ok=True)
                (root / name).write_text("\n".join(lines) + "\n")
        p = subprocess.run([sys.executable, str(ROOT / "scripts" / "check_tree.py"), str(root)],
                           capture_output=True, text=True)
        out = p.stdout + p.stderr
        if p.returncode != 1:
            print(f"FAIL: exit {p.returncode}, expected 1")
            failures += 1
        for where, what in EXPECT:
            if not any(l.startswith(where + ":") and what in l for l in out.splitlines()):
                print(f"FAIL: no finding '{what}' at {where}")
                failures += 1
        for name in GOOD:
            if name + ":" in out:
                print(f"FAIL: {name} flagged but allowed")
                failures += 1
        if f"{len(EXPECT)} findings" not in out:
            print(f"FAIL: expected {len(EXPECT)} findings")
            failures += 1
        if failures:
            print(out)
    print("check_tree_test: " + ("PASS" if failures == 0 else f"{failures} FAILED"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
