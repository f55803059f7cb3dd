#!/usr/bin/python3
"""Load and soak test of spexd over loopback (CPU backend, small frames).

Phase 1 (soak): one spexd; CLIENTS concurrent client processes (tests/load/load_client.cc:
one connection each, extracting as `spexctl extract --server` does, half uploading the
image and PSF, half naming server paths) extract small frames for DURATION seconds. Every
frame file must equal the local extraction of the same input (spexctl --local) record for
record (only CHECKSUM/DATASUM cards may differ); any failed call is an error. The server's
RSS, open file descriptors and threads are sampled every second: after warm-up (the first
quarter) the mean of the last quarter must be within 5% of the mean of the second.
Phase 2 (overload): a spexd with --max_queue=2 gets CLIENTS requests at once: some must
be answered RESOURCE_EXHAUSTED, every other one must be right, and sequential requests
afterwards must all succeed (recovery).

Writes summary.json, samples.csv and latencies.csv to --out, and a plot with --plot.
Needs Debian's python3-astropy/numpy (and matplotlib for --plot): run with /usr/bin/python3.
Exit status 0 only when every check passes.
"""
import argparse
import csv
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np
from astropy.io import fits

WMIN, WMAX, DW = 5760.0, 5800.0, 0.8
NSPEC = 10


def make_frame(psf_path, seed, path):
    """A small preproc frame covering fibres 0-9 on the test grid (random sky + noise)."""
    with fits.open(psf_path) as psf:
        xt, yt = psf["XTRACE"], psf["YTRACE"]
        wlo, whi = xt.header["WAVEMIN"], xt.header["WAVEMAX"]
        waves = np.arange(WMIN - 40, WMAX + 100, 5.0)
        u = 2 * (waves - wlo) / (whi - wlo) - 1
        xmax = max(np.polynomial.legendre.legval(u, xt.data[f]).max() for f in range(NSPEC))
        ymax = max(np.polynomial.legendre.legval(u, yt.data[f]).max() for f in range(NSPEC))
    height, width = int(ymax) + 40, int(xmax) + 40
    rng = np.random.default_rng(seed)
    model = 40.0 + 10.0 * rng.random((height, width))
    var = model + 9.0
    image = (model + np.sqrt(var) * rng.normal(size=model.shape)).astype(np.float32)
    ivar = (1.0 / var).astype(np.float32)
    mask = np.zeros((height, width), np.int16)
    mask[height // 2, width // 3] = 2
    hdus = fits.HDUList([fits.PrimaryHDU(image), fits.ImageHDU(ivar, name="IVAR"),
                         fits.ImageHDU(mask, name="MASK")])
    hdus[0].header["EXTNAME"] = "IMAGE"
    hdus[0].header["CAMERA"] = "r0"
    hdus[0].header["EXPID"] = 1000 + seed
    hdus.writeto(path, overwrite=True)


class Server:
    def __init__(self, build, data_dir, log_path, extra):
        self.log_path = log_path
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen(
            [f"{build}/server/spexd", "--listen=127.0.0.1:0", "--metrics_listen=",
             "--backend=cpu", f"--data_roots={data_dir}"] + extra,
            stderr=self.log, stdout=subprocess.DEVNULL)
        self.port = 0
        end = time.time() + 60
        while time.time() < end and self.port == 0:
            m = re.search(r'"event":"listening".*"port":([0-9]+)', open(log_path).read())
            if m:
                self.port = int(m.group(1))
            elif self.proc.poll() is not None:
                break
            time.sleep(0.1)
        if self.port == 0:
            raise RuntimeError("spexd did not start:\n" + open(log_path).read())

    def sample(self):
        pid = self.proc.pid
        status = open(f"/proc/{pid}/status").read()
        rss = int(re.search(r"VmRSS:\s+(\d+)", status).group(1)) * 1024
        threads = int(re.search(r"Threads:\s+(\d+)", status).group(1))
        fds = len(os.listdir(f"/proc/{pid}/fd"))
        return rss, fds, threads

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def local_extract_args(build, frame, psf, out):
    return [f"{build}/client/spexctl", "extract", "-i", frame, "-p", psf, "-w",
            f"{WMIN},{WMAX},{DW}", "-n", str(NSPEC), "--bundlesize", "5", "--nsubbundles", "1",
            "-q", "-o", out, "--local", "--threads", "1"]


def load_clients(build, frames, refs, psf, port, n, seconds, count, first=0):
    """Starts n load client processes (load_client.cc); odd ones name server paths,
    even ones upload the image and PSF."""
    procs = []
    for c in range(n):
        args = [f"{build}/tests/load/spexd_load_client", "--seconds", str(seconds),
                "--count", str(count), "--first", str(first + c),
                "--inputs", ",".join(frames), "--references", ",".join(refs), "--",
                "-p", psf, "-w", f"{WMIN},{WMAX},{DW}", "-n", str(NSPEC),
                "--bundlesize", "5", "--nsubbundles", "1", "-q",
                "--server", f"127.0.0.1:{port}", "--retries", "1", "--deadline", "300"]
        if c % 2 == 1:
            args.append("--server-path")
        procs.append(subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True))
    return procs


def collect(procs, t_offset=0.0):
    """(t, latency, outcome) of every call, and the clients that failed to run."""
    calls, broken = [], []
    for c, p in enumerate(procs):
        out, err = p.communicate()
        if p.returncode != 0:
            broken.append(f"client {c} exited {p.returncode}: {err.strip()[-300:]}")
        for line in out.splitlines():
            t, dt, outcome = line.split(" ", 2)
            calls.append((float(t) + t_offset, float(dt), outcome))
    return sorted(calls), broken


def soak(args, build, frames, refs, psf, data, work):
    srv = Server(build, data, os.path.join(work, "spexd-soak.log"),
                 ["--max_queue=256", f"--cpu_threads={args.server_threads}"])
    t_start = time.monotonic()
    procs = load_clients(build, frames, refs, psf, srv.port, args.clients, args.duration,
                         1 << 30)
    samples = []
    while any(p.poll() is None for p in procs):
        rss, fds, threads = srv.sample()
        samples.append((time.monotonic() - t_start, rss, fds, threads))
        time.sleep(1.0)
    calls, broken = collect(procs)
    problems = broken + [f"t={t:.1f}s: {o}" for t, _, o in calls if o != "ok"]
    # Idle after the load: resources should come back, not keep growing.
    time.sleep(2)
    idle = srv.sample()
    srv.stop()
    return calls, samples, problems, idle


def overload(args, build, frames, refs, psf, data, work):
    srv = Server(build, data, os.path.join(work, "spexd-overload.log"),
                 ["--max_queue=2", "--cpu_threads=1"])
    calls, broken = collect(load_clients(build, frames, refs, psf, srv.port, args.clients,
                                         600, 1))
    after, broken_after = collect(load_clients(build, frames, refs, psf, srv.port, 1, 600, 4))
    srv.stop()
    outcomes = [o for _, _, o in calls]
    exhausted = [o for o in outcomes if o.startswith("RESOURCE_EXHAUSTED")]
    return {
        "concurrent": args.clients,
        "ok": outcomes.count("ok"),
        "resource_exhausted": len(exhausted),
        "example_rejection": exhausted[0] if exhausted else None,
        "other": broken + [o for o in outcomes if o != "ok" and o not in exhausted],
        "after_overload": [o for _, _, o in after] + broken_after,
    }


def flat(samples, column, duration):
    """Mean of the last quarter relative to the second quarter (after warm-up), over the
    samples taken while every client was still running (t <= duration)."""
    samples = [s for s in samples if s[0] <= duration]
    n = len(samples)
    if n < 8:
        return None
    q = n // 4
    early = np.mean([s[column] for s in samples[q:2 * q]])
    late = np.mean([s[column] for s in samples[3 * q:]])
    return float(late / early - 1)


def plot(path, lat, samples, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    t = np.array([s[0] for s in samples])
    fig, ax = plt.subplots(2, 2, figsize=(11, 7))
    lt = np.array([x[0] for x in lat])
    ld = np.array([x[1] for x in lat])
    ax[0, 0].plot(lt, ld, ".", ms=2, alpha=0.4)
    # p50/p99 per 30 s window
    edges = np.arange(0, lt.max() + 30, 30)
    mids, p50, p99 = [], [], []
    for a, b in zip(edges[:-1], edges[1:]):
        sel = ld[(lt >= a) & (lt < b)]
        if len(sel):
            mids.append((a + b) / 2)
            p50.append(np.percentile(sel, 50))
            p99.append(np.percentile(sel, 99))
    ax[0, 0].plot(mids, p50, "-o", label="p50 (30 s windows)")
    ax[0, 0].plot(mids, p99, "-o", label="p99")
    ax[0, 0].set(xlabel="time [s]", ylabel="call latency [s]", title="spexctl extract latency")
    ax[0, 0].legend()
    ax[0, 1].plot(t, [s[1] / 2**20 for s in samples])
    ax[0, 1].set(xlabel="time [s]", ylabel="RSS [MiB]", title="server RSS")
    ax[1, 0].plot(t, [s[2] for s in samples])
    ax[1, 0].set(xlabel="time [s]", ylabel="open fds", title="server file descriptors")
    ax[1, 1].plot(t, [s[3] for s in samples])
    ax[1, 1].set(xlabel="time [s]", ylabel="threads", title="server threads")
    for a in ax.flat:
        a.grid(alpha=0.3)
        a.set_ylim(bottom=0)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default="build")
    p.add_argument("--psf", default="tests/data/psf-r0-00051060.fits")
    p.add_argument("--duration", type=float, default=600)
    p.add_argument("--clients", type=int, default=32)
    p.add_argument("--frames", type=int, default=4, help="distinct input frames")
    p.add_argument("--server_threads", type=int, default=2)
    p.add_argument("--min_extractions", type=int, default=0)
    p.add_argument("--tolerance", type=float, default=0.05, help="resource drift allowed")
    p.add_argument("--skip_flat", action="store_true",
                   help="report the resource drift but do not require it (a short CI run is "
                        "mostly warm-up)")
    p.add_argument("--out", default=None)
    p.add_argument("--plot", default=None)
    args = p.parse_args()
    build = os.path.abspath(args.build)
    out = args.out or tempfile.mkdtemp(prefix="spexd-soak-")
    os.makedirs(out, exist_ok=True)
    work = tempfile.mkdtemp(prefix="spexd-soak-work-")
    data = os.path.join(work, "data")
    os.makedirs(data)
    psf = os.path.join(data, "psf.fits")
    with open(args.psf, "rb") as src, open(psf, "wb") as dst:
        dst.write(src.read())
    frames, refs = [], []
    for k in range(args.frames):
        frame = os.path.join(data, f"frame-{k}.fits")
        make_frame(psf, k, frame)
        ref = os.path.join(work, f"ref-{k}.fits")
        r = subprocess.run(local_extract_args(build, frame, psf, ref),
                           capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"local reference extraction failed: {r.stderr}")
        frames.append(frame)
        refs.append(ref)

    lat, samples, problems, idle = soak(args, build, frames, refs, psf, data, work)
    over = overload(args, build, frames, refs, psf, data, work)
    ok_lat = np.array([x[1] for x in lat if x[2] == "ok"])
    summary = {
        "duration_s": args.duration,
        "clients": args.clients,
        "extractions": len(lat),
        "ok": int(len(ok_lat)),
        "problems": problems[:20],
        "problem_count": len(problems),
        "latency_p50_s": float(np.percentile(ok_lat, 50)) if len(ok_lat) else None,
        "latency_p99_s": float(np.percentile(ok_lat, 99)) if len(ok_lat) else None,
        "rss_drift": flat(samples, 1, args.duration),
        "fds_drift": flat(samples, 2, args.duration),
        "threads_drift": flat(samples, 3, args.duration),
        "rss_mib_first_last": [samples[0][1] / 2**20, samples[-1][1] / 2**20] if samples else None,
        "fds_first_last": [samples[0][2], samples[-1][2]] if samples else None,
        "threads_first_last": [samples[0][3], samples[-1][3]] if samples else None,
        "idle_after": {"rss_mib": idle[0] / 2**20, "fds": idle[1], "threads": idle[2]},
        "overload": over,
    }
    checks = {
        "no_unexpected_errors": len(problems) == 0,
        "enough_extractions": len(lat) >= args.min_extractions,
        "rss_flat": summary["rss_drift"] is not None and abs(summary["rss_drift"]) <= args.tolerance,
        "fds_flat": summary["fds_drift"] is not None and abs(summary["fds_drift"]) <= args.tolerance,
        "threads_flat": summary["threads_drift"] is not None and abs(summary["threads_drift"]) <= args.tolerance,
        "overload_rejects": over["resource_exhausted"] > 0 and not over["other"],
        "recovers": all(o == "ok" for o in over["after_overload"]),
    }
    if args.skip_flat:
        for k in ("rss_flat", "fds_flat", "threads_flat"):
            checks[k] = f"not required (--skip_flat): {checks[k]}"
    summary["checks"] = checks
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    with open(os.path.join(out, "samples.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["t_s", "rss_bytes", "fds", "threads"])
        w.writerows(samples)
    with open(os.path.join(out, "latencies.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["t_s", "seconds", "outcome"])
        w.writerows(lat)
    if args.plot:
        plot(args.plot, lat, samples,
             f"spexd soak: {args.clients} client processes, {len(lat)} extractions, "
             f"{args.duration:.0f} s (CPU backend, loopback)")
    print(json.dumps(summary, indent=1))
    failed = [k for k, v in checks.items() if v is False]
    if failed:
        print("soak: FAILED:", ", ".join(failed))
        sys.exit(1)
    print("soak: all checks passed")


if __name__ == "__main__":
    main()
