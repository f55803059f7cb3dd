#!/usr/bin/env python3
"""Names that would collide in a unity build of the test binaries (cmake/SpexdUnityTests.cmake).

A unity build compiles several test files as one translation unit, so two files' helpers in
anonymous namespaces share a scope. Most clashes stop the compile, but a file-local helper
with the same name and a compatible signature as a helper of the shared test headers (or of
another file) would silently be called instead. This check lists, per test binary, every
namespace-level function, struct, class or constant that two of its files define, or that a
file defines while a shared header declares it, so the clash is named before the compiler
meets it, whatever files a batch happens to group.

  unity_names_check.py SOURCE_DIR        exit 0: "unity names: clean"; 1: the clashes
"""
import pathlib
import re
import sys

# Namespace-level definitions start in column 0 (clang-format keeps namespace bodies
# unindented): functions, types and constants. TEST bodies and macros are not names.
DEFINITION = re.compile(
    r"^(?:(?:static|inline|constexpr|const|template\s*<[^>]*>)\s+)*"
    r"(?:(struct|class|enum(?:\s+class)?)\s+(\w+)\s*(?:[:{]|final\b)"
    r"|[\w:<>,*&\s]+?[\s*&](\w+)\s*\((?!\))?.*\)\s*(?:const\s*)?(?:->.*)?\{\s*$"
    r"|[\w:<>,*&\s]+?[\s*&](\w+)\s*(?:\[[^\]]*\])?\s*=.*;\s*$)")
DECLARATION = re.compile(r"^[\w:<>,*&\s]+?[\s*&](\w+)\s*\(")
SKIP = {"main", "operator"}

# The test binaries: their source files (globs as in tests/**/CMakeLists.txt) and the shared
# test headers they may include.
COMMON_HEADERS = ["tests/*.h"]
BINARIES = {
    "spexd_core_tests": (["tests/core/**/*_test.cc"], COMMON_HEADERS),
    "spexd_server_tests": (["tests/server/**/*_test.cc"],
                           COMMON_HEADERS + ["tests/server/**/*.h"]),
    "spexd_integration_tests": (["tests/integration/*_test.cc"],
                                COMMON_HEADERS + ["tests/integration/*.h"]),
    "spexd_client_tests": (["tests/client/*_test.cc"], COMMON_HEADERS),
}


NAMESPACE_OPEN = re.compile(r"^(?:inline\s+)?namespace\s*([\w:]*)\s*\{")
NAMESPACE_CLOSE = re.compile(r"^\}\s*//\s*namespace")


def scan(path, pattern):
    """(enclosing named namespace, name) -> line, for lines matching `pattern` at namespace
    level. An anonymous namespace adds nothing: its names share the enclosing scope with
    every other file's in a unity translation unit."""
    out = {}
    stack = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        m = NAMESPACE_OPEN.match(line)
        if m:
            stack.append(m.group(1))
            continue
        if NAMESPACE_CLOSE.match(line):
            if stack:
                stack.pop()
            continue
        if line.startswith(("TEST", "#", "//", "using ", "namespace ", "}", " ", "\t")):
            continue
        m = pattern.match(line)
        if not m:
            continue
        # The last group that matched is the name (a type's kind comes before it).
        name = next((g for g in reversed(m.groups()) if g), None)
        if name and name not in SKIP:
            scope = "::".join(n for n in stack if n)
            out.setdefault((scope, name), number)
    return out


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    clashes = []
    for binary, (sources, headers) in BINARIES.items():
        shared = {}
        for pattern in headers:
            for header in sorted(root.glob(pattern)):
                for key in scan(header, DECLARATION):
                    shared.setdefault(key, header.relative_to(root))
        seen = {}
        for pattern in sources:
            for path in sorted(root.glob(pattern)):
                rel = path.relative_to(root)
                for (scope, name), line in scan(path, DEFINITION).items():
                    if (scope, name) in shared:
                        clashes.append(f"{binary}: {rel}:{line} defines {scope}::{name}, "
                                       f"which {shared[(scope, name)]} declares")
                    if (scope, name) in seen:
                        clashes.append(f"{binary}: {rel}:{line} and {seen[(scope, name)]} both "
                                       f"define {scope}::{name}")
                    else:
                        seen[(scope, name)] = f"{rel}:{line}"
    if clashes:
        print("\n".join(clashes))
        print(f"unity names: {len(clashes)} clash(es): rename one of each pair, or share the "
              "helper through a header (cmake/SpexdUnityTests.cmake says why)")
        return 1
    print("unity names: clean")
    return 0


if __name__ == "__main__":
    sys.exit(main())
