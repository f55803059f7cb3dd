// OpenBLAS picks its compute kernels once, when the library initialises, from the CPU's
// family/model numbers. A model it does not know (a new CPU, or a VM that reports a generic
// one, like the GPU host's "Intel Xeon Processor", model 207) gets the SSE3 "Prescott"
// kernels: the CPU backend's frame took 1.7x the CPU time there that the AVX-512 kernels
// take. So spexd's programs choose the kernel family from what the
// CPU and OS actually support (CPUID + XGETBV), unless the user chose: OPENBLAS_CORETYPE
// (OpenBLAS's own variable) already set is kept.
#ifndef SPEXD_CORE_CPU_BLAS_CORE_TYPE_H_
#define SPEXD_CORE_CPU_BLAS_CORE_TYPE_H_

#include <string>

namespace spexd::core {

// What the kernels need: the instruction sets, and the OS saving their registers.
struct X86Features {
  bool avx2 = false, fma = false;
  bool avx512f = false, avx512bw = false, avx512dq = false, avx512vl = false;
  bool os_ymm = false, os_zmm = false;  // XCR0: AVX state; opmask and ZMM state
};
X86Features DetectX86Features();  // all false off x86-64

// OPENBLAS_CORETYPE for these features: "SkylakeX" (AVX-512 F/BW/DQ/VL: OpenBLAS's fastest
// double kernels on x86), "Haswell" (AVX2 + FMA), or nullptr (leave OpenBLAS alone).
const char* OpenBlasCoreTypeFor(const X86Features& f);

// For a program that opens BLAS later (spexctl's on-demand LAPACK): sets
// OPENBLAS_CORETYPE as above unless the environment decides. Call before the dlopen and
// before other threads run (setenv). Idempotent.
void PresetOpenBlasCoreType();

// For a program linked to BLAS (spexd, the benchmarks): OpenBLAS has initialised before
// main, so when its kernels differ from the choice above the program executes itself
// again (/proc/self/exe, same arguments, PID unchanged) with OPENBLAS_CORETYPE set; with
// no OpenBLAS loaded yet it presets the variable as above. Call first thing in main,
// before any thread starts; returns when nothing needs doing or the exec failed (then
// with a line on stderr). Every program of the project calls one of the two (the tests
// through tests/test_main.cc), so that all run the same kernels and agree bit for bit.
void ReexecForOpenBlasCoreType(char** argv);

// One line for logs and benchmark output: the kernels OpenBLAS runs (its own name for
// them, when OpenBLAS is the BLAS loaded) and who chose them.
std::string BlasCoreReport();

}  // namespace spexd::core

#endif  // SPEXD_CORE_CPU_BLAS_CORE_TYPE_H_
