#!/usr/bin/env python3
"""No class or struct under the given folders is longer than a screen (200 lines), from
the line that opens it to its closing `};`: a class that grows past that does several
things, and its parts go into classes of their own (the gRPC reactors' watched-call and
response-queue parts, server/rpc/watched_reactor.h and response_queue.h).

Bodies are found by counting braces after comments, string and character literals are
blanked, so a brace inside a message or a comment does not move the count. Forward
declarations (`class X;`) and `enum class` are not classes.

  check_class_length.py ROOT FOLDER...  exit 0: "class length: clean"; 1: the long ones
"""
import pathlib
import re
import sys

LIMIT = 200
OPEN = re.compile(r"^\s*(?:template\s*<[^;{]*>\s*)?(class|struct)\s+(?:\[\[\w+\]\]\s*)?"
                  r"(?:ABSL_\w+(?:\([^)]*\))?\s+)?(\w+)\b[^;]*$")
LITERAL = re.compile(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'')


def code_lines(text):
    """The file's lines with comments and literals blanked (line numbers kept)."""
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    return [LITERAL.sub('""', line.split("//", 1)[0]) for line in text.split("\n")]


def classes(lines):
    """(name, first line, last line) of every class or struct defined in `lines`."""
    found = []
    for i, line in enumerate(lines):
        m = OPEN.match(line)
        if not m or "enum" in line.split(m.group(1))[0]:
            continue
        # The body opens on this line or the next ones (a long base list), before any ';'.
        depth, opened, j = 0, False, i
        while j < len(lines):
            piece = lines[j] if j > i else line[m.end(2):]
            if not opened and ";" in piece.split("{")[0]:
                break
            for ch in piece:
                if ch == "{":
                    depth += 1
                    opened = True
                elif ch == "}":
                    depth -= 1
            if opened and depth <= 0:
                found.append((m.group(2), i + 1, j + 1))
                break
            j += 1
    return found


def main(root, folders):
    root = pathlib.Path(root)
    long_ones, count = [], 0
    for folder in folders:
        for path in sorted((root / folder).rglob("*")):
            if path.suffix not in (".h", ".cc"):
                continue
            for name, first, last in classes(code_lines(path.read_text())):
                count += 1
                if last - first + 1 > LIMIT:
                    long_ones.append(f"{path.relative_to(root)}:{first}: {name} is "
                                     f"{last - first + 1} lines, over {LIMIT}")
    for line in long_ones:
        print(line)
    if long_ones:
        print(f"class length: {len(long_ones)} over {LIMIT} lines")
        return 1
    print(f"class length: clean ({count} classes, none over {LIMIT} lines)")
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2:]))
