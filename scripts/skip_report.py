#!/usr/bin/python3
"""Why tests skipped, from ctest's JUnit report (ctest --output-junit FILE, with the
passed tests' output kept whole: --test-output-size-passed).

    scripts/skip_report.py build/Testing/Temporary/junit.xml

Two kinds of skip are counted, and their sum printed:
- tests ctest skipped: a GoogleTest case that called GTEST_SKIP (its message follows the
  "FILE:LINE: Skipped" line), or a script that exited 77 (its message is its last line
  starting "SKIP:", "SKIPPED:" or "Skipped:", else its last line);
- skips inside tests that ran: each unittest test, class or sub-test reported
  "... skipped 'REASON'" by a Python module that passed as a whole, and each GTEST_SKIP
  inside a GoogleTest binary that ctest runs as one test.
Reasons are grouped: count, reason, and the ctest test (or how many tests) they came from.
Prints nothing when nothing skipped. Scripts/test.sh runs it after ctest.
"""
import ast
import collections
import re
import sys
import xml.etree.ElementTree as ET

GTEST_SKIP = re.compile(r"^\S+:\d+: Skipped$")
SCRIPT_SKIP = re.compile(r"^(?:SKIP|SKIPPED|Skipped):\s*(.+)$")
UNITTEST_SKIP = re.compile(r" \.\.\. skipped ('.*'|\".*\")$")


def gtest_reasons(lines):
    """The message after each "FILE:LINE: Skipped" line, up to a blank or gtest line."""
    out = []
    for i, line in enumerate(lines):
        if GTEST_SKIP.match(line):
            text = []
            for follow in lines[i + 1:]:
                if not follow.strip() or follow.startswith("["):
                    break
                text.append(follow.strip())
            out.append(" ".join(text) or "(GTEST_SKIP without a message)")
    return out


def script_reason(name, lines):
    said = [m.group(1) for m in map(SCRIPT_SKIP.match, lines) if m]
    if said:
        return said[-1]
    nonblank = [line.strip() for line in lines if line.strip()]
    return nonblank[-1] if nonblank else f"(no message: {name} exited with the skip code)"


def unittest_reasons(lines):
    out = []
    for line in lines:
        m = UNITTEST_SKIP.search(line)
        if m:
            out.append(ast.literal_eval(m.group(1)))
    return out


def collect(root):
    """(skipped by ctest: [(test, reason)], skipped inside tests that ran: [(test, reason)])."""
    by_ctest, inside = [], []
    for case in root.iter("testcase"):
        name = case.get("name", "?")
        out = case.find("system-out")
        lines = (out.text or "").splitlines() if out is not None else []
        if case.find("skipped") is not None:
            gtest = gtest_reasons(lines)
            by_ctest.append((name, gtest[0] if gtest else script_reason(name, lines)))
        elif case.get("status") == "run":
            inside += [(name, r) for r in gtest_reasons(lines) + unittest_reasons(lines)]
    return by_ctest, inside


def report(by_ctest, inside):
    """The lines to print (none when nothing skipped)."""
    total = len(by_ctest) + len(inside)
    if not total:
        return []
    groups = collections.defaultdict(list)
    for test, reason in by_ctest + inside:
        groups[reason].append(test)
    lines = [f"Why tests skipped: {total} skips = {len(by_ctest)} tests ctest skipped + "
             f"{len(inside)} skipped inside tests that ran (count, reason, where):"]
    for reason, tests in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        where = sorted(set(tests))
        place = where[0] if len(where) == 1 else f"{len(where)} tests"
        lines.append(f"{len(tests):6d}  {reason}  [{place}]")
    return lines


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
        return 2
    try:
        root = ET.parse(argv[1]).getroot()
    except (OSError, ET.ParseError) as e:
        print(f"skip_report: {argv[1]}: {e}", file=sys.stderr)
        return 1
    for line in report(*collect(root)):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
