#!/usr/bin/python3
"""Benchmark plots for docs/performance.md: reads the JSON the benchmarks write
and draws PNGs.

  stage_times.png            time per backend stage, one bar per frame-bench run
                             (spexd_cuda_frame_bench --json, e.g. before and after a change)
  cpu_stage_times.png        CPU seconds per patch stage of a warm frame, one bar per run
                             (spexd_cpu_frame_bench's JSON: warm_stage_seconds, patch.*)
  throughput_vs_inflight.png frames/s against frames in flight (spexd_rpc_bench runs at
                             several --inflight / --client-procs, and the backend alone)
  throughput_vs_gpus.png     frames/s against the number of GPUs: the exposure
                             (spexd_exposure_bench runs with --gpus 0 / 0,1 / 0,1,2,3) and,
                             with --rpc-gpus, the served throughput of spexd_rpc_bench
                             runs with --gpus (client processes, steady state), each with
                             the ideal N x one GPU and 0.9 N

Each plot is drawn only when its inputs are given. A JSON file may hold other lines
(a benchmark's stdout): the last line that parses as a JSON object is used. A label for a
run can be given as LABEL=FILE; otherwise the file name is the label.

  /usr/bin/python3 scripts/perf_plots.py --out docs/img \\
      --frame before=frame-64beb40.json --frame after=frame-new.json \\
      --cpu-frame before=cpu-a98fbc1.json --cpu-frame after=cpu-new.json \\
      --rpc rpc-inflight1.json --rpc rpc-inflight4.json --rpc rpc-inflight8.json \\
      --exposure exposure-1gpu.json --exposure exposure-2gpu.json --exposure exposure-4gpu.json \\
      --rpc-gpus rpc-1gpu.json --rpc-gpus rpc-2gpu.json --rpc-gpus rpc-4gpu.json

Needs Debian's python3-matplotlib (apt-get install python3-matplotlib); no PyPI.
"""

import argparse
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402


def load(spec):
    """(label, object) from LABEL=FILE or FILE."""
    label, _, path = spec.rpartition("=")
    if not label:
        label = os.path.splitext(os.path.basename(path))[0]
    found = None
    with open(path, encoding="utf-8") as f:
        text = f.read()
    try:
        found = json.loads(text)
    except json.JSONDecodeError:
        # A pretty-printed object after other output (the CPU bench's stderr "run N" lines).
        at = text.find("\n{")
        if at >= 0:
            try:
                found = json.loads(text[at + 1:])
            except json.JSONDecodeError:
                found = None
    if found is None:
        for line in text.splitlines():
            line = line.strip()
            if line.startswith("{"):
                try:
                    found = json.loads(line)
                except json.JSONDecodeError:
                    continue
    if not isinstance(found, dict):
        sys.exit(f"perf_plots: no JSON object in {path}")
    return label, found


def plot_stage_bars(runs, stages, values, legend, xlabel, title, out, label=lambda k: k):
    """Grouped horizontal bars, stage x run: values(js) maps a stage to its bar length,
    legend(label, js) names a run; stages are sorted largest first (of the first run), so
    that the plot reads as a profile."""
    first = values(runs[0][1])
    stages = sorted(stages, key=lambda k: -first.get(k, 0.0))
    height = 0.8 / len(runs)
    fig, ax = plt.subplots(figsize=(8, 0.35 * len(stages) * len(runs) + 1.5))
    for i, (name, js) in enumerate(runs):
        v = values(js)
        ys = [s + i * height for s in range(len(stages))]
        ax.barh(ys, [v.get(k, 0.0) for k in stages], height=height, label=legend(name, js))
    ax.set_yticks([s + height * (len(runs) - 1) / 2 for s in range(len(stages))])
    ax.set_yticklabels([label(k) for k in stages])
    ax.invert_yaxis()
    ax.set_xlabel(xlabel)
    ax.set_title(title)
    ax.legend(loc="lower right")
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def stages_of(runs, key, keep=lambda k: True):
    """The stage names under `key` in any run, in first-seen order."""
    stages = []
    for _, js in runs:
        for k in js.get(key, {}):
            if keep(k) and k not in stages:
                stages.append(k)
    return stages


def plot_stages(runs, out):
    """The CUDA backend's stages x run, in milliseconds (cuda_frame_bench)."""
    stages = stages_of(runs, "stage_median_seconds")
    if not stages:
        sys.exit("perf_plots: the --frame files have no stage_median_seconds")

    def legend(label, js):
        total = js.get("median_seconds")
        return f"{label} ({total * 1e3:.0f} ms/frame)" if total else label

    plot_stage_bars(runs, stages, lambda js: {k: v * 1e3 for k, v in js.get("stage_median_seconds", {}).items()},
                    legend, "median time per warm frame (ms)", "CUDA backend, time per stage", out)


def plot_cpu_stages(runs, out):
    """The CPU backend's patch stages x run: thread CPU seconds of a warm frame summed over
    the threads (spexd_cpu_frame_bench's warm_stage_seconds)."""
    stages = stages_of(runs, "warm_stage_seconds", lambda k: k.startswith("patch."))
    if not stages:
        sys.exit("perf_plots: the --cpu-frame files have no warm_stage_seconds patch.* stages")

    def legend(label, js):
        wall = js.get("warm_median_seconds")
        return f"{label} ({wall:.2f} s/frame on {js.get('threads', '?')} threads)" if wall else label

    plot_stage_bars(runs, stages, lambda js: js.get("warm_stage_seconds", {}), legend,
                    "CPU seconds per warm frame, summed over threads",
                    "CPU backend, time per patch stage", out, label=lambda k: k[len("patch."):])


def rpc_points(js):
    """(frames in flight, served frames/s, backend frames/s) of one rpc_bench run."""
    backend = 1.0 / js["backend_s"]["median"] if js.get("backend_s", {}).get("median") else None
    if js.get("client_procs", 0) > 0 and js.get("procs_steady_per_frame_s", 0) > 0:
        return js["client_procs"], 1.0 / js["procs_steady_per_frame_s"], backend, "client processes"
    if js.get("steady_per_frame_inflight_s", 0) > 0:
        return js["inflight"], 1.0 / js["steady_per_frame_inflight_s"], backend, "in-process clients"
    return None


def plot_inflight(runs, out):
    series = {}
    backend = []
    for label, js in runs:
        p = rpc_points(js)
        if p is None:
            print(f"perf_plots: {label}: no frames-in-flight numbers, left out", file=sys.stderr)
            continue
        n, fps, bfps, kind = p
        series.setdefault(kind, []).append((n, fps))
        if bfps:
            backend.append(bfps)
    if not series:
        sys.exit("perf_plots: no --rpc file has frames-in-flight numbers")
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for kind, pts in sorted(series.items()):
        pts.sort()
        ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", label=f"served, {kind}")
    if backend:
        b = sorted(backend)[len(backend) // 2]
        xs = [p[0] for pts in series.values() for p in pts]
        ax.axhline(b, color="gray", ls="--", label=f"backend alone ({b:.2f} frames/s)")
        ax.axhline(0.9 * b, color="gray", ls=":", label="90 % of the backend (goal)")
        ax.set_xlim(0, max(xs) + 1)
    ax.set_xlabel("frames in flight (clients)")
    ax.set_ylabel("frames per second (steady state)")
    ax.set_ylim(bottom=0)
    ax.set_title("Service throughput against frames in flight")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def gpus_of(js):
    """GPUs of an exposure_bench run: its "gpus" field, else the workers it lists."""
    if isinstance(js.get("gpus"), list):
        return len(js["gpus"])
    server = js.get("server", "")
    return len([w for w in server.split("; ") if w.strip()]) or 1


def rpc_gpu_points(runs):
    """(GPUs, served frames/s) of spexd_rpc_bench runs with client processes."""
    pts = []
    for label, js in runs:
        steady = js.get("procs_steady_per_frame_s") or 0
        if steady <= 0:
            print(f"perf_plots: {label}: no client-process throughput, left out", file=sys.stderr)
            continue
        pts.append((len(js.get("gpus") or [0]), 1.0 / steady))
    return sorted(pts)


def plot_gpus(runs, out, rpc_runs=()):
    pts = []
    for label, js in runs:
        passes = js.get("passes") or []
        if not passes or not passes[0].get("exposure_s"):
            print(f"perf_plots: {label}: no exposure time, left out", file=sys.stderr)
            continue
        frames = js.get("frames", 30)
        cold = frames / passes[0]["exposure_s"]
        warm = frames / passes[-1]["exposure_s"] if len(passes) > 1 else None
        pts.append((gpus_of(js), cold, warm))
    if not pts:
        sys.exit("perf_plots: no --exposure file has an exposure time")
    pts.sort()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    xs = [p[0] for p in pts]
    ax.plot(xs, [p[1] for p in pts], "o-", label="exposure, cold (PSFs loaded)")
    if all(p[2] for p in pts):
        ax.plot(xs, [p[2] for p in pts], "s-", label="exposure, again (PSFs cached)")
    one = [p for p in pts if p[0] == 1]
    if one:
        base = one[0][2] or one[0][1]
        ax.plot(xs, [base * x for x in xs], color="gray", ls="--", label="exposure: N x one GPU")
    served = rpc_gpu_points(rpc_runs)
    if served:
        sx = [p[0] for p in served]
        ax.plot(sx, [p[1] for p in served], "D-", color="tab:green", label="served, client processes")
        one = [p for p in served if p[0] == 1]
        if one:
            ax.plot(sx, [one[0][1] * x for x in sx], color="tab:green", ls="--", alpha=0.5,
                    label="served: N x one GPU")
            ax.plot(sx, [0.9 * one[0][1] * x for x in sx], color="tab:green", ls=":", alpha=0.7,
                    label="served: 0.9 N (goal)")
        xs = sorted(set(xs) | set(sx))
    ax.set_xticks(xs)
    ax.set_xlabel("GPUs (one worker each)")
    ax.set_ylabel("frames per second")
    ax.set_ylim(bottom=0)
    ax.set_title("Throughput against GPUs")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="docs/img", help="directory for the PNGs")
    ap.add_argument("--frame", action="append", default=[], help="[LABEL=]cuda_frame_bench JSON")
    ap.add_argument("--cpu-frame", action="append", default=[], help="[LABEL=]cpu_frame_bench JSON")
    ap.add_argument("--rpc", action="append", default=[], help="[LABEL=]rpc_bench JSON")
    ap.add_argument("--exposure", action="append", default=[], help="[LABEL=]exposure_bench JSON")
    ap.add_argument("--rpc-gpus", action="append", default=[],
                    help="[LABEL=]rpc_bench JSON run with --gpus (added to the GPU plot)")
    args = ap.parse_args()
    if not (args.frame or args.cpu_frame or args.rpc or args.exposure):
        ap.error("nothing to plot: give --frame, --cpu-frame, --rpc or --exposure")
    os.makedirs(args.out, exist_ok=True)
    written = []
    if args.frame:
        written.append(os.path.join(args.out, "stage_times.png"))
        plot_stages([load(s) for s in args.frame], written[-1])
    if args.cpu_frame:
        written.append(os.path.join(args.out, "cpu_stage_times.png"))
        plot_cpu_stages([load(s) for s in args.cpu_frame], written[-1])
    if args.rpc:
        written.append(os.path.join(args.out, "throughput_vs_inflight.png"))
        plot_inflight([load(s) for s in args.rpc], written[-1])
    if args.exposure:
        written.append(os.path.join(args.out, "throughput_vs_gpus.png"))
        plot_gpus([load(s) for s in args.exposure], written[-1], [load(s) for s in args.rpc_gpus])
    for w in written:
        print(w)


if __name__ == "__main__":
    main()
