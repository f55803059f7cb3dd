#!/usr/bin/env python3
"""scripts/kernel_traffic.py sums ncu's CSV by kernel and by stage, a frame: a synthetic CSV
(the layout `ncu --csv --metrics` prints, after other stdout lines) of two batches, and the
figures it must report; with the issue counters (kernel_traffic.sh ISSUE=1) on some
kernels, their issue table too.

  kernel_traffic_test.py ROOT    prints "kernel_traffic_test: PASS" when every check holds
"""
import subprocess
import sys
import tempfile

# (launch id, kernel name, time ns, DRAM read bytes, DRAM written bytes, share %)
LAUNCHES = [
    (1, "EvaluateSpotsKernel(spexd::cuda::SpotArgs)", 5_000_000, 1e9, 0, 10),
    (2, "BuildNormalEquationsDmmaKernel(spexd::cuda::RunArgs)", 2_000_000, 1e9, 2e9, 30),
    (3, "sm90_xmma_gemm_f64f64_f64f64_f64_nt_n_tilesize64x64x16_cublas", 500_000, 4e8, 1e8, 40),
    (4, "sm90_xmma_gemm_f64f64_f64f64_f64_nn_n_tilesize32x64x32_cublas", 1_000_000, 1e9, 5e8, 50),
    (5, "RegisterReduceKernel(spexd::cuda::RunArgs)", 1_500_000, 2e8, 2e8, 6),
    (6, "BuildNormalEquationsDmmaKernel(spexd::cuda::RunArgs)", 2_000_000, 1e9, 2e9, 30),
    (7, "sm90_xmma_gemm_f64f64_f64f64_f64_nn_n_tilesize64x128x16_cublas", 1_000_000, 1e9, 5e8, 44),
    (8, "RegisterReduceKernel(spexd::cuda::RunArgs)", 1_500_000, 2e8, 2e8, 8),
]
METRICS = [("gpu__time_duration.sum", "nsecond", 2), ("dram__bytes_read.sum", "byte", 3),
           ("dram__bytes_write.sum", "byte", 4),
           ("dram__throughput.avg.pct_of_peak_sustained_elapsed", "%", 5)]


# The issue counters of the normal-equations launches (ids 2 and 6), each: instructions,
# shared wavefronts and bank conflicts (ld, st), local bytes (ld, st).
ISSUE = [("smsp__inst_executed.sum", "inst", 1e9),
         ("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum", "", 3e8),
         ("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum", "", 1e8),
         ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum", "", 1e8),
         ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum", "", 0),
         ("l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum", "byte", 5e8),
         ("l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum", "byte", 5e8)]


def csv_text(issue=False):
    out = ['{"benchmark": "cuda_frame", "median_seconds": 0.05}',  # the bench's own stdout
           '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream",'
           '"Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit",'
           '"Metric Value"']
    for launch in LAUNCHES:
        metrics = [(name, unit, launch[col]) for name, unit, col in METRICS]
        if issue and launch[0] in (2, 6):
            metrics += ISSUE
        for name, unit, value in metrics:
            text = "{:,}".format(int(value)) if value >= 1000 else str(value)
            out.append('"%d","1","bench","h","%s","1","7","(128, 1, 1)","(99, 1, 1)","0","9.0",'
                       '"Command line profiler metrics","%s","%s","%s"' % (launch[0], launch[1], name,
                                                                           unit, text))
    return "\n".join(out) + "\n"


def main():
    root = sys.argv[1]
    failures = []
    with tempfile.NamedTemporaryFile("w", suffix=".csv") as f:
        f.write(csv_text())
        f.flush()
        # Two batches at two a frame: one frame.
        run = subprocess.run(["/usr/bin/python3", root + "/scripts/kernel_traffic.py", f.name,
                              "--batches-per-frame", "2", "--copy-rate", "2"],
                             capture_output=True, text=True)
    out = run.stdout
    if run.returncode != 0:
        failures.append("exit %d: %s" % (run.returncode, run.stderr))
    expected = [
        "2 batches, 1 frames of 2 batches",
        # cuBLAS's two nn tile shapes in one row; the shares' mean.
        "cuBLAS DGEMM nn                                     2      2.00      3.00      47",
        "BuildNormalEquationsDmmaKernel                      2      4.00      6.00      30",
        # The nt GEMMs are the Cholesky's updates, the nn ones the inverse blocks.
        "tiled Cholesky                                      1      0.50      0.50      40",
        "inverse blocks                                      2      2.00      3.00      47",
        "inverse square roots, decorrelation                 2      3.00      0.80       7",
        "PSF spots (a cold frame's)                          1      5.00      1.00      10",
        # The cold frame's spots left out of the totals: 9.5 ms, 10.3 GB, at 2 TB/s 5.2 ms.
        "every kernel but a cold frame's: 7 launches, 9.5 ms a frame, 10.3 GB a frame of DRAM "
        "traffic (5.2 ms at 2.0 TB/s)",
    ]
    for line in expected:
        if line not in out:
            failures.append("missing: %r" % line)
    if "issue %" in out:
        failures.append("an issue table without the issue counters")
    # With the counters: 2e9 instructions in 4 ms at 500 schedulers of 2 GHz: an issue rate of 50 %;
    # 8e8 shared wavefronts, a quarter of them conflicts; 2 GB of local traffic, a frame.
    with tempfile.NamedTemporaryFile("w", suffix=".csv") as f:
        f.write(csv_text(issue=True))
        f.flush()
        iss = subprocess.run(["/usr/bin/python3", root + "/scripts/kernel_traffic.py", f.name,
                              "--batches-per-frame", "2", "--schedulers", "500", "--clock-ghz", "2"],
                             capture_output=True, text=True)
    row = "%-44s %8s %7s %9s %10s %9s" % ("BuildNormalEquationsDmmaKernel", "2.00", "50.0", "0.80",
                                          "25.0", "2.00")
    if iss.returncode != 0 or row not in iss.stdout:
        failures.append("issue table: no %r in %r (%s)" % (row, iss.stdout, iss.stderr))
    if "RegisterReduceKernel" in iss.stdout.split("issue %")[-1]:
        failures.append("a kernel without the counters in the issue table")
    if "warning" in run.stderr:
        failures.append("a whole-batch window warned: %s" % run.stderr)
    # A window that cuts a batch (the last reduction left out) is named.
    with tempfile.NamedTemporaryFile("w", suffix=".csv") as f:
        f.write("\n".join(l for l in csv_text().splitlines() if not l.startswith('"8"')) + "\n")
        f.flush()
        cut = subprocess.run(["/usr/bin/python3", root + "/scripts/kernel_traffic.py", f.name],
                             capture_output=True, text=True)
    if "the window cuts a batch (RegisterReduceKernel" not in cut.stderr:
        failures.append("no warning for a cut batch: %r" % cut.stderr)
    for msg in failures:
        print("kernel_traffic_test: FAIL", msg)
    if failures:
        print(out)
        return 1
    print("kernel_traffic_test: PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
