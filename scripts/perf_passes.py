#!/usr/bin/env python3
"""The host's CPU by pass, from `perf script` output of DWARF call graphs on stdin.

  perf script -i perf.data | scripts/perf_passes.py [--cpu-s-per-frame X] [--top N]

Each sample goes to the first pass whose pattern matches a frame of its stack, searched from
the caller that spexd's or spexctl's code names outward (so a page fault or a kernel copy
counts for the pass that caused it), else from the leaf; a stack cut short (perf copies a
bounded piece of each thread's stack) is named by its kernel frames where it has them. Prints each pass's share of the
samples by process group (spexd: its threads; spexctl; the rest of the host; idle CPUs
left out), and, with
--cpu-s-per-frame (the run's host CPU a frame, clients included), each pass in CPU-s a frame;
then the --top leaf symbols left in "other", where the next pass to name would be found.
"""
import argparse
import collections
import re
import sys

# (pass, regex over a frame's symbol), in priority order: a stack that holds several is
# counted once, for the first listed.
PASSES = [
    ("SHA-256 of the written file", r"Sha256Stream|Sha256Hex|sha256_block"),
    ("gzip inflate of the input", r"isal_inflate|decode_huffman|Inflate|inflate"),
    ("CRC-32 of the written file", r"libdeflate_crc32|FileDigest"),
    ("gzip deflate of the output", r"isal_deflate|GzipImage|deflate"),
    ("MASK Rice decode (CFITSIO)", r"DecodeRiceTiles|fits_rdecomp"),
    ("input planes read (pread, page cache)", r"RawBytes::Read"),
    ("other FITS reading (CFITSIO, PSF)", r"^ff|^fits_|Psf::|PsfCache|LegendreClenshaw"),
    ("output file write (write, page cache)", r"WriteFully|BackgroundWriter"),
    ("RAW scores", r"ComputeRawScores|ScoresToWrite"),
    ("specmask and chi2pix medians", r"ComputeSpecMask|WaveMediansWhereDeciding|FinalizeBundle|"
     r"RowMedian|LocalMaskBits|FrameAssembler::Finish"),
    ("health metrics", r"HealthAccumulator|ObserveBundle|CountUsableBins|ServerMetrics"),
    ("byte order and DATASUM encoding", r"EncodeFloat32|EncodeValues|EncodeUint32|ToBigEndian|"
     r"OnesComplement|State::Encode|AddRows"),
    ("frame assembly copies", r"FrameAssembler::Add|BundleArrayPool|CopyBundle"),
    ("CUDA backend host work", r"spexd::cuda::"),
    ("replay backend (bench only)", r"spexd::bench::Replay"),
    ("gRPC and protobuf", r"grpc|google::protobuf|EncodeBundleParts|ProtoBuffer"),
    ("process start (loader)", r"_dl_|dl_main|_dl_start"),
]
# Where a sample's user stack was cut short (perf copies a bounded piece of it), its kernel
# frames still say what the time was: these name it.
KERNEL = [
    ("page faults (first touch of memory)", r"asm_exc_page_fault|do_huge_pmd_anonymous_page"),
    ("file reads (kernel copy, page cache)", r"sys_pread64|sys_read\b|ksys_read|filemap_read|shmem_file_read_iter"),
    ("file writes (kernel copy, page cache)", r"sys_pwrite64|sys_write\b|ksys_write|generic_perform_write"),
    ("sockets (kernel)", r"tcp_|sock_|unix_stream|skb_"),
    ("scheduling and futex waits (kernel)", r"futex|schedule|sys_sched_yield|do_nanosleep|ep_poll"),
]
COMPILED = [(name, re.compile(pat)) for name, pat in PASSES]
KERNEL_COMPILED = [(name, re.compile(pat)) for name, pat in KERNEL]
OWN = re.compile(r"spexd::")


def group(comm):
    if comm.startswith("spexctl"):
        return "spexctl"
    if comm.startswith(("spexd", "grpc", "default-execu", "resolver", "event_engine")):
        return "spexd"
    return "host"


def classify(stack):
    """stack: symbols from the leaf outward."""
    first_own = next((i for i, s in enumerate(stack) if OWN.search(s)), 0)
    for start in (first_own, 0):
        for name, pat in COMPILED:
            if any(pat.search(s) for s in stack[start:]):
                return name
    for name, pat in KERNEL_COMPILED:
        if any(pat.search(s) for s in stack):
            return name
    return "other"


def samples(lines):
    comm, stack = None, []
    for line in lines:
        if not line.strip():
            if comm is not None:
                yield comm, stack
            comm, stack = None, []
        elif not line[0].isspace():
            comm, stack = line.split()[0], []
        else:
            parts = line.strip().split(None, 1)
            if len(parts) == 2:
                stack.append(parts[1].rsplit(" (", 1)[0])
    if comm is not None:
        yield comm, stack


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cpu-s-per-frame", type=float, default=0.0)
    ap.add_argument("--top", type=int, default=12)
    ap.add_argument("--detail", type=int, default=0,
                    help="also each pass's N most sampled functions of spexd's code")
    args = ap.parse_args()
    counts = collections.Counter()
    leftover = collections.Counter()
    detail = collections.Counter()
    total = 0
    for comm, stack in samples(sys.stdin):
        if comm.startswith("swapper"):  # an idle CPU
            continue
        g = group(comm)
        p = classify(stack)
        counts[(p, g)] += 1
        own = next((x for x in stack if OWN.search(x)), None)
        if own is not None:
            detail[(p, re.sub(r"\(.*|\+0x[0-9a-f]+$", "", own)[:90])] += 1
        total += 1
        if p == "other" and stack:
            leftover[(g, re.sub(r"\+0x[0-9a-f]+$", "", stack[0])[:70])] += 1
    if total == 0:
        sys.exit("perf_passes.py: no samples on stdin")
    groups = ["spexd", "spexctl", "host"]
    names = [n for n, _ in PASSES] + [n for n, _ in KERNEL] + ["other"]
    by_pass = {n: sum(counts[(n, g)] for g in groups) for n in names}
    head = "%-40s %7s" % ("pass", "share") + "".join(" %8s" % g for g in groups)
    if args.cpu_s_per_frame > 0:
        head += "  CPU-s/frame"
    print(head)
    for n in sorted(names, key=lambda n: -by_pass[n]):
        if by_pass[n] == 0:
            continue
        row = "%-40s %6.1f%%" % (n, 100.0 * by_pass[n] / total)
        row += "".join(" %7.1f%%" % (100.0 * counts[(n, g)] / total) for g in groups)
        if args.cpu_s_per_frame > 0:
            row += "  %.4f" % (args.cpu_s_per_frame * by_pass[n] / total)
        print(row)
    print("samples: %d" % total)
    if args.detail > 0:
        for n in sorted(names, key=lambda n: -by_pass[n]):
            rows = sorted(((c, f) for (p, f), c in detail.items() if p == n), reverse=True)
            if not rows:
                continue
            print("%s, by spexd function:" % n)
            for c, f in rows[:args.detail]:
                print("  %5.1f%%  %s" % (100.0 * c / total, f))
    print("other, by leaf symbol:")
    for (g, sym), c in leftover.most_common(args.top):
        print("  %5.1f%%  %-7s %s" % (100.0 * c / total, g, sym))


if __name__ == "__main__":
    main()
