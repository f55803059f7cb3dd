"""The harness of the tree checkers' tests: write a scratch tree, run a checker on it, and
compare its findings with the expected ones. A checker prints one finding a line as
"PATH:LINE: what" or "PATH: what", then "N findings", and exits 1 when it finds any."""
import pathlib
import subprocess
import sys
import tempfile


def check_findings(checker, files, expect, allowed):
    """Runs CHECKER (a script) on a scratch tree of FILES ({path: text}); returns the number
    of failures, each printed: an exit other than 1, an EXPECT (path or path:line, text)
    finding missing, an ALLOWED path flagged, or a count other than len(EXPECT)."""
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        for name, text in files.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(text)
        p = subprocess.run([sys.executable, str(checker), str(root)], capture_output=True,
                           text=True)
    out = p.stdout + p.stderr
    if p.returncode != 1:
        failures.append(f"exit {p.returncode}, expected 1")
    for where, what in expect:
        if not any(l.startswith(where + ":") and what in l for l in out.splitlines()):
            failures.append(f"no finding '{what}' at {where}")
    failures += [f"{name} flagged but allowed" for name in allowed if name + ":" in out]
    if f"{len(expect)} findings" not in out:
        failures.append(f"expected {len(expect)} findings")
    for f in failures:
        print("FAIL: " + f)
    if failures:
        print(out)
    return len(failures)
