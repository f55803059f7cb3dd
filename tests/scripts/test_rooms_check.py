#!/usr/bin/python3
"""tests/server/ and tests/cuda/ mirror the rooms of server/ and cuda/, as tests/core/ mirrors
core/: a test sits beside the tests of the code it tests, and a reader finds a room's tests
in the room's name.

  test_rooms_check.py [ROOT]

The rooms of server/ and cuda/ are their folders that hold code (.h, .cc, .cu, .cuh); the
files directly in server/ (the assembled service, its configuration, main) are the room
`top`. Every test source (.h, .cc, .cu, .cuh, .py, .sh) under tests/server/ or tests/cuda/
sits in tests/<folder>/<room>/, at any depth below it. Fails (exit 1, one line a finding) on
  - a file directly in tests/server/ or tests/cuda/ (CMakeLists.txt aside);
  - a file in a folder named for no room of server/ or cuda/.
Prints "test rooms: N files checked, clean" and exits 0 when nothing is found.
"""
import pathlib
import sys

FOLDERS = ("server", "cuda")
CODE = {".h", ".cc", ".cu", ".cuh"}
TEST_SOURCES = CODE | {".py", ".sh"}
TOP = "top"


def rooms(root, folder):
    """The rooms of ROOT/FOLDER: its subfolders holding code, and `top` for code directly in it."""
    base = root / folder
    found = set()
    if not base.is_dir():
        return found
    for path in base.rglob("*"):
        if path.is_file() and path.suffix in CODE:
            rel = path.relative_to(base).parts
            found.add(rel[0] if len(rel) > 1 else TOP)
    return found


def findings(root, folder):
    known = rooms(root, folder)
    listed = ", ".join(sorted(known)) or "none"
    tests = root / "tests" / folder
    out = []
    checked = 0
    if not tests.is_dir():
        return out, checked
    for path in sorted(tests.rglob("*")):
        if not path.is_file() or path.suffix not in TEST_SOURCES or "__pycache__" in path.parts:
            continue
        checked += 1
        rel = path.relative_to(root).as_posix()
        parts = path.relative_to(tests).parts
        if len(parts) == 1:
            out.append(f"{rel}: directly in tests/{folder}/; move it to tests/{folder}/<room>/, "
                       f"the room of the code it tests (rooms of {folder}/: {listed})")
        elif parts[0] not in known:
            out.append(f"{rel}: {parts[0]}/ is no room of {folder}/ (rooms: {listed})")
    return out, checked


def main(argv):
    root = pathlib.Path(argv[0] if argv else pathlib.Path(__file__).resolve().parents[2])
    found = []
    checked = 0
    for folder in FOLDERS:
        f, n = findings(root, folder)
        found += f
        checked += n
    for f in found:
        print(f)
    if found:
        print(f"test rooms: {len(found)} findings in {checked} files")
        return 1
    print(f"test rooms: {checked} files checked, clean")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
