#!/usr/bin/env python3
"""scripts/perf_passes.py names each sample's pass from its stack: a synthetic `perf script`
output (the layout perf prints: a header line per sample, then its frames from the leaf out)
with one sample of each kind, and the shares and CPU-s a frame it must report.

  perf_passes_test.py ROOT    prints "perf_passes_test: PASS" when every check holds
"""
import re
import subprocess
import sys

SAMPLES = [
    # (command, frames from the leaf outward)
    ("spexd-host", ["[unknown] (/usr/lib/libcrypto.so.3)",
                    "spexd::server::Sha256Stream::Update+0x23 (/x/spexd)",
                    "spexd::core::TaskPool::Loop+0x10 (/x/spexd)"]),
    ("spexd-host", ["clear_page_erms+0x7 ([kernel.kallsyms])",
                    "asm_exc_page_fault+0x22 ([kernel.kallsyms])",
                    "spexd::core::FitsFile::RawBytes::Read+0x203 (/x/spexd)"]),
    ("spexd-load", ["fits_rdecomp_short+0x2bc (/usr/lib/libcfitsio.so)",
                    "spexd::core::internal::DecodeRiceTiles16+0x50 (/x/spexd)",
                    "spexd::core::FitsFile::RawBytes::Read+0x10 (/x/spexd)"]),
    ("spexctl", ["copy_folio_from_iter_atomic+0xcd ([kernel.kallsyms])",
                 "spexd::core::WriteFully+0x4d (/x/spexctl)"]),
    # A cut stack: kernel frames only, named by them.
    ("spexd-load", ["_copy_to_iter+0x80 ([kernel.kallsyms])",
                    "shmem_file_read_iter+0x11b ([kernel.kallsyms])",
                    "__x64_sys_pread64+0x9 ([kernel.kallsyms])"]),
    ("spexd-stream", ["spexd::core::internal::SelectMiddle+0x198 (/x/spexd)",
                      "spexd::core::ComputeRawScores+0x40 (/x/spexd)"]),
    ("bench-lane", ["mystery+0x1 (/x/other)"]),
    ("swapper", ["pv_native_safe_halt+0x5 ([kernel.kallsyms])"]),  # idle: left out
]


def perf_script_text():
    out = []
    for i, (comm, frames) in enumerate(SAMPLES):
        out.append("%s  1234/%d  [000]  1.%06d:  5025125 cpu-clock:" % (comm, 1234 + i, i))
        out.extend("\t    %x %s" % (0x1000 + j, f) for j, f in enumerate(frames))
        out.append("")
    return "\n".join(out) + "\n"


def main():
    root = sys.argv[1]
    run = subprocess.run([sys.executable, root + "/scripts/perf_passes.py", "--cpu-s-per-frame", "0.7",
                          "--detail", "2"], input=perf_script_text(), capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit("perf_passes_test: exit %d: %s" % (run.returncode, run.stderr))
    out = run.stdout
    # pass: its share of the 7 samples (the idle one left out) and the spexd, spexctl and
    # rest-of-host columns, then CPU-s a frame (0.7 x 1/7)
    want = {
        "SHA-256 of the written file": ["14.3%", "14.3%", "0.0%", "0.0%", "0.1000"],
        "input planes read (pread, page cache)": ["14.3%", "14.3%", "0.0%", "0.0%", "0.1000"],
        "MASK Rice decode (CFITSIO)": ["14.3%", "14.3%", "0.0%", "0.0%", "0.1000"],
        "output file write (write, page cache)": ["14.3%", "0.0%", "14.3%", "0.0%", "0.1000"],
        "file reads (kernel copy, page cache)": ["14.3%", "14.3%", "0.0%", "0.0%", "0.1000"],
        "RAW scores": ["14.3%", "14.3%", "0.0%", "0.0%", "0.1000"],
        "other": ["14.3%", "0.0%", "0.0%", "14.3%", "0.1000"],
    }
    rows = {}
    for line in out.splitlines():
        cells = re.split(r"\s{2,}", line.strip())
        if len(cells) == 6:
            rows[cells[0]] = cells[1:]
    bad = ["%s: %s, want %s" % (n, rows.get(n), w) for n, w in want.items() if rows.get(n) != w]
    if "samples: 7" not in out:
        bad.append("the sample count (idle CPUs left out)")
    if "  14.3%  spexd::core::internal::DecodeRiceTiles16" not in out:
        bad.append("--detail names the pass's spexd function")
    if bad:
        sys.exit("perf_passes_test: FAIL\n  " + "\n  ".join(bad) + "\n" + out)
    print("perf_passes_test: PASS")


if __name__ == "__main__":
    main()
