#!/usr/bin/python3
"""scripts/perf_plots.py on the fixtures in tests/data/perf: every plot is written as a
PNG (the GPU plot with the served throughput of --rpc-gpus runs; one without client
processes is left out with a message), and a file without JSON is refused. Exits 77 (skipped) without matplotlib."""

import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DATA = os.path.join(ROOT, "tests", "data", "perf")
SCRIPT = os.path.join(ROOT, "scripts", "perf_plots.py")

try:
    import matplotlib  # noqa: F401
except ImportError:
    print("SKIP: python3-matplotlib is not installed (apt-get install python3-matplotlib)")
    sys.exit(77)


def run(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True)


def main():
    failures = []
    with tempfile.TemporaryDirectory() as out:
        d = lambda name: os.path.join(DATA, name)  # noqa: E731
        r = run("--out", out, "--frame", "before=" + d("frame_a.json"), "--frame", "after=" + d("frame_b.json"),
                "--cpu-frame", "before=" + d("cpu_frame_a.json"), "--cpu-frame", "after=" + d("cpu_frame_b.json"),
                "--rpc", d("rpc_1.json"), "--rpc", d("rpc_4.json"), "--rpc", d("rpc_8.json"),
                "--exposure", d("exposure_1.json"), "--exposure", d("exposure_2.json"),
                "--exposure", d("exposure_4.json"), "--rpc-gpus", d("rpc_gpus_1.json"),
                "--rpc-gpus", d("rpc_gpus_2.json"), "--rpc-gpus", d("rpc_gpus_4.json"),
                "--rpc-gpus", "no-procs=" + d("frame_a.json"))
        if "no-procs: no client-process throughput, left out" not in r.stderr:
            failures.append(f"an rpc run without client processes was not left out: {r.stderr}")
        if r.returncode != 0:
            failures.append(f"script failed ({r.returncode}): {r.stderr}")
        for name in ("stage_times.png", "cpu_stage_times.png", "throughput_vs_inflight.png",
                     "throughput_vs_gpus.png"):
            path = os.path.join(out, name)
            if not os.path.exists(path):
                failures.append(f"{name} not written")
                continue
            with open(path, "rb") as f:
                head = f.read(8)
            if head != b"\x89PNG\r\n\x1a\n" or os.path.getsize(path) < 5000:
                failures.append(f"{name} is not a plot ({os.path.getsize(path)} bytes)")
        bad = os.path.join(out, "bad.json")
        with open(bad, "w", encoding="utf-8") as f:
            f.write("no json here\n")
        r = run("--out", out, "--frame", bad)
        if r.returncode == 0 or "no JSON object" not in r.stderr:
            failures.append(f"a file without JSON was accepted: {r.returncode} {r.stderr}")
        r = run("--out", out, "--cpu-frame", d("frame_a.json"))
        if r.returncode == 0 or "no warm_stage_seconds" not in r.stderr:
            failures.append(f"a CUDA frame JSON was accepted as a CPU one: {r.returncode} {r.stderr}")
    for f in failures:
        print("FAIL:", f)
    if not failures:
        print("perf_plots: 4 plots written, bad input refused")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
