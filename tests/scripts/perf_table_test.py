#!/usr/bin/python3
"""scripts/perf_table.py catches each fault it is there for: a copy of the repository's
README.md, docs/performance.md and docs/benchmarks/ passes, and each seeded fault (a
document past 200 lines, a hand edit of a generated table, a stale record, a figure that no
record holds, a commit hash in prose, a record without its commit, a record of more than six
figures without a summary, a summary (the record's or its benchmark's) naming a figure the
record lacks, or too many) fails with its message; and a record's table row shows its
summary's figures, not the rest.

  perf_table_test.py REPO_ROOT
"""
import json
import pathlib
import shutil
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parents[2])
SCRIPT = ROOT / "scripts" / "perf_table.py"


def copy_tree(dest):
    (dest / "docs").mkdir()
    shutil.copytree(ROOT / "docs" / "benchmarks", dest / "docs" / "benchmarks")
    shutil.copy(ROOT / "docs" / "performance.md", dest / "docs" / "performance.md")
    shutil.copy(ROOT / "README.md", dest / "README.md")


def run(root):
    p = subprocess.run([sys.executable, str(SCRIPT), str(root)], capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def edit(path, old, new):
    text = path.read_text(encoding="utf-8")
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def first_record(root):
    return sorted((root / "docs" / "benchmarks").glob("*.json"))[0]


def seed_long(root, name):
    path = root / name
    lines = path.read_text(encoding="utf-8").rstrip("\n").split("\n")
    path.write_text("\n".join(lines + ["filler"] * (201 - len(lines))) + "\n", encoding="utf-8")


def seed_hand_edit(root):
    rec = json.loads(first_record(root).read_text(encoding="utf-8"))
    edit(root / "docs" / "performance.md", f"| {rec['date']} | {rec['commit']} |",
         f"| {rec['date']} | {rec['commit']} (edited) |")


def seed_stale_record(root):
    path = first_record(root)
    rec = json.loads(path.read_text(encoding="utf-8"))
    rec["figures"][0]["value"] = rec["figures"][0]["value"] * 1.5 + 1
    path.write_text(json.dumps(rec), encoding="utf-8")


def seed_unrecorded_figure(root):
    edit(root / "docs" / "performance.md", "## What limits each path now\n",
         "## What limits each path now\n\nA warm frame takes 0.0123456 s.\n")


def seed_range_figure(root):
    edit(root / "docs" / "performance.md", "## What limits each path now\n",
         "## What limits each path now\n\nServed at 12.25-99.75 frames/s.\n")


def seed_hash(root):
    edit(root / "docs" / "performance.md", "## What limits each path now\n",
         "## What limits each path now\n\nSince 3f9a2c1 the frame is faster.\n")


def seed_bad_commit(root):
    path = first_record(root)
    rec = json.loads(path.read_text(encoding="utf-8"))
    rec["commit"] = "HEAD"
    path.write_text(json.dumps(rec), encoding="utf-8")


def record_with_summary(root):
    """The path and record of the first record that names a summary."""
    for path in sorted((root / "docs" / "benchmarks").glob("*.json")):
        rec = json.loads(path.read_text(encoding="utf-8"))
        if "summary" in rec:
            return path, rec
    raise AssertionError("no record names a summary")


def seed_summary(root, summary):
    path, rec = record_with_summary(root)
    if summary is None:
        del rec["summary"]
    else:
        rec["summary"] = summary(rec)
    path.write_text(json.dumps(rec), encoding="utf-8")


HOST_COST_HEADLINE = "fits_to_server_fits_cpu_s_per_frame"


def seed_benchmark_summary_gap(root):
    """A record of a benchmark with a summary in perf_table.py (and none of its own, which
    would take its place), less that summary's first figure."""
    for path in sorted((root / "docs" / "benchmarks").glob("spexd_host_cost_bench-*.json")):
        rec = json.loads(path.read_text(encoding="utf-8"))
        if "summary" in rec:
            continue
        rec["figures"] = [f for f in rec["figures"] if f["name"] != HOST_COST_HEADLINE]
        path.write_text(json.dumps(rec), encoding="utf-8")
        return
    raise AssertionError("no spexd_host_cost_bench record")


def check_row_shows_summary(tmp):
    """With a one-figure summary, --write gives the record a row with that figure, a count of
    the rest and a link to the record, and no other figure's label."""
    root = pathlib.Path(tmp) / "summary_row"
    root.mkdir()
    copy_tree(root)
    path, rec = record_with_summary(root)
    first, rest = rec["figures"][0], rec["figures"][1:]
    rec["summary"] = [first["name"]]
    path.write_text(json.dumps(rec), encoding="utf-8")
    p = subprocess.run([sys.executable, str(SCRIPT), str(root), "--write"], capture_output=True,
                       text=True)
    page = (root / "docs" / "performance.md").read_text(encoding="utf-8").split("\n")
    row = next((l for l in page if l.startswith(f"| [`{path.stem}`](benchmarks/{path.name})")), None)
    if p.returncode != 0 or row is None:
        return (f"--write with a one-figure summary: rc {p.returncode}, row {row!r}:\n"
                f"{p.stdout}{p.stderr}")
    figures = row.split(" | ")[1]
    wrong = [f["label"] for f in rest if f"{f['label']}:" in figures]
    if first["label"] not in figures or f"; {len(rest)} more in the record" not in figures or wrong:
        return f"the row of {path.stem} shows {figures!r}"
    return None


CASES = [
    ("performance.md over 200 lines", lambda r: seed_long(r, "docs/performance.md"),
     "docs/performance.md: 201 lines, more than 200"),
    ("README over 200 lines", lambda r: seed_long(r, "README.md"), "README.md: 201 lines, more than 200"),
    ("hand-edited table", seed_hand_edit, "docs/performance.md: its generated table differs"),
    ("stale record", seed_stale_record, "its generated table differs"),
    ("figure without a record", seed_unrecorded_figure, "0.0123456 s is no figure of a record"),
    ("range without a record", seed_range_figure, "12.25 frames/s is no figure of a record"),
    ("commit hash in prose", seed_hash, "commit hash 3f9a2c1 in prose"),
    ("record without a commit", seed_bad_commit, "commit must be a short hash"),
    ("many figures, no summary", lambda r: seed_summary(r, None), "the table shows in \"summary\""),
    ("summary names no figure",
     lambda r: seed_summary(r, lambda rec: rec["summary"][:1] + ["no_such_figure"]),
     "summary names 'no_such_figure', which is no figure of the record"),
    ("summary too long",
     lambda r: seed_summary(r, lambda rec: [f["name"] for f in rec["figures"][:7]]),
     "summary must list 1 to 6 distinct figure names"),
    ("benchmark's summary names no figure", seed_benchmark_summary_gap,
     f"spexd_host_cost_bench's summary in BENCHMARK_SUMMARY names '{HOST_COST_HEADLINE}'"),
    ("summary repeats a figure", lambda r: seed_summary(r, lambda rec: rec["summary"][:1] * 2),
     "summary must list 1 to 6 distinct figure names"),
]


def main():
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        clean = pathlib.Path(tmp) / "clean"
        clean.mkdir()
        copy_tree(clean)
        rc, out = run(clean)
        if rc != 0:
            print(f"FAIL: the repository's documents do not pass:\n{out}")
            failures += 1
        for i, (what, seed, expect) in enumerate(CASES):
            root = pathlib.Path(tmp) / f"case{i}"
            root.mkdir()
            copy_tree(root)
            seed(root)
            rc, out = run(root)
            if rc == 0 or expect not in out:
                print(f"FAIL: {what}: rc {rc}, expected {expect!r} in:\n{out}")
                failures += 1
            else:
                print(f"ok: {what}")
        fault = check_row_shows_summary(tmp)
        if fault:
            print(f"FAIL: {fault}")
            failures += 1
        else:
            print("ok: a row shows its record's summary")
    print("perf_table_test: " + ("PASS" if failures == 0 else f"{failures} FAILED"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
