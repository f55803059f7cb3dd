#!/usr/bin/env python3
"""Where a served frame's time goes, from one throughput run.

  throughput_breakdown.py SPEXD_LOG FIRST_LINE WALL_S GPUS CLIENT_LOG...

SPEXD_LOG's extract_done lines from FIRST_LINE on (the run's requests) give the server's
per-request seconds and stages; the CLIENT_LOGs (each spexctl's stderr, with a line
"wall START END" that the driver appends per invocation) give the client's side. Prints medians
and the GPUs' busy fraction: the sum of extract_s over GPUS x WALL_S.
"""
import json
import re
import statistics
import sys


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def main():
    log, first, wall, gpus = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
    done = []
    with open(log, errors="replace") as f:
        for i, line in enumerate(f):
            if i < first or '"extract_done"' not in line:
                continue
            try:
                done.append(json.loads(line))
            except ValueError:
                pass
    if done:
        busy = sum(d.get("extract_s", 0.0) for d in done) / (gpus * wall)
        keys = ["upload_s", "queue_s", "load_s", "extract_s", "total_s"]
        print("[server] %d requests; GPU busy %.2f; medians: %s" % (
            len(done), busy, ", ".join("%s %.3f" % (k, med([d.get(k, 0.0) for d in done])) for k in keys)))
        stages = {}
        for d in done:
            for k, v in (d.get("stages") or {}).items():
                stages.setdefault(k, []).append(v)
        host = [k for k in sorted(stages) if k.startswith(("output_", "stream", "worker", "input", "load", "decode"))]
        print("[server] stage medians: " + ", ".join("%s %.4f" % (k, med(stages[k])) for k in host))
        backend = [k for k in sorted(stages) if k not in host]
        print("[server] backend stage medians: " + ", ".join("%s %.4f" % (k, med(stages[k])) for k in backend))
    pat = re.compile(r"(upload|queue|load|extract|server total|client total|write) ([0-9.]+) s")
    rows, walls = {}, []
    for path in sys.argv[5:]:
        with open(path, errors="replace") as f:
            for line in f:
                if line.startswith("wall "):
                    start, end = map(float, line.split()[1:3])
                    walls.append(end - start)
                elif line.startswith("spexctl:") and "server total" in line:
                    for k, v in pat.findall(line):
                        rows.setdefault(k, []).append(float(v))
    if walls:
        extra = []
        if "client total" in rows and "server total" in rows:
            extra = [c - s for c, s in zip(rows["client total"], rows["server total"])]
        print("[client] %d invocations; medians: process wall %.3f, %s; client total - server total %.3f" % (
            len(walls), med(walls), ", ".join("%s %.3f" % (k, med(v)) for k, v in rows.items()), med(extra)))


if __name__ == "__main__":
    main()
