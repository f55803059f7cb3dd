#include "core/cpu/blas_core_type.h"

#include <dlfcn.h>
#include <sys/auxv.h>
#include <strings.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace spexd::core {
namespace {

enum class Decision { kNotAsked, kByUs, kByUser, kNoChoice, kAlreadyRight };
Decision g_decision = Decision::kNotAsked;

const char* OpenBlasCoreName() {
  using CoreName = char* (*)();
  void* sym = dlsym(RTLD_DEFAULT, "openblas_get_corename");
  return sym != nullptr ? reinterpret_cast<CoreName>(sym)() : nullptr;
}

// The decision the environment makes, if any; kNotAsked when it leaves it to us. A user
// who wants other kernels sets OpenBLAS's own variable, which is read here and kept. The
// value spexd would set itself (its own, after the re-execution) counts as spexd's choice:
// no marker of who set it is needed, the kernels are the same.
Decision FromEnvironment() {
  const char* set = std::getenv("OPENBLAS_CORETYPE");
  if (set == nullptr) return Decision::kNotAsked;
  const char* choice = OpenBlasCoreTypeFor(DetectX86Features());
  return choice != nullptr && std::strcmp(choice, set) == 0 ? Decision::kByUs : Decision::kByUser;
}

// True when OpenBLAS's `running` kernels do double precision as `choice`'s do: later
// targets reuse these (Cooperlake and SapphireRapids add bfloat16 to SkylakeX's; Zen runs
// Haswell's), and re-executing for them would change nothing.
bool SameDoubleKernels(const char* running, const char* choice) {
  const char* const skylakex[] = {"SkylakeX", "Cooperlake", "SapphireRapids"};
  const char* const haswell[] = {"Haswell", "Zen"};
  auto in = [running](const auto& names) {
    for (const char* n : names) {
      if (strcasecmp(running, n) == 0) return true;
    }
    return false;
  };
  return std::strcmp(choice, "SkylakeX") == 0 ? in(skylakex) : in(haswell);
}

}  // namespace

X86Features DetectX86Features() {
  X86Features f;
#if defined(__x86_64__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  f.fma = (c >> 12) & 1;
  const bool osxsave = (c >> 27) & 1, avx = (c >> 28) & 1;
  if (osxsave && avx) {
    unsigned lo = 0, hi = 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    f.os_ymm = (lo & 0x6) == 0x6;    // SSE and AVX state
    f.os_zmm = (lo & 0xE6) == 0xE6;  // and opmask, ZMM0-15 upper halves, ZMM16-31
  }
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
    f.avx2 = (b >> 5) & 1;
    f.avx512f = (b >> 16) & 1;
    f.avx512dq = (b >> 17) & 1;
    f.avx512bw = (b >> 30) & 1;
    f.avx512vl = (b >> 31) & 1;
  }
#endif
  return f;
}

const char* OpenBlasCoreTypeFor(const X86Features& f) {
  if (f.os_zmm && f.avx512f && f.avx512bw && f.avx512dq && f.avx512vl && f.avx2 && f.fma) {
    return "SkylakeX";
  }
  if (f.os_ymm && f.avx2 && f.fma) return "Haswell";
  return nullptr;
}

void PresetOpenBlasCoreType() {
  if (g_decision != Decision::kNotAsked) return;
  g_decision = FromEnvironment();
  if (g_decision != Decision::kNotAsked) return;
  const char* choice = OpenBlasCoreTypeFor(DetectX86Features());
  if (choice != nullptr && setenv("OPENBLAS_CORETYPE", choice, 0) == 0) {
    g_decision = Decision::kByUs;
  } else {
    g_decision = Decision::kNoChoice;
  }
}

void ReexecForOpenBlasCoreType(char** argv) {
  if (g_decision != Decision::kNotAsked) return;
  g_decision = FromEnvironment();
  if (g_decision != Decision::kNotAsked) return;
  const char* running = OpenBlasCoreName();
  if (running == nullptr) {
    // No OpenBLAS loaded yet (a reference BLAS, or one opened later): preset it instead.
    g_decision = Decision::kNotAsked;
    PresetOpenBlasCoreType();
    return;
  }
  const char* choice = OpenBlasCoreTypeFor(DetectX86Features());
  if (choice == nullptr) {
    g_decision = Decision::kNoChoice;  // no AVX2
    return;
  }
  if (SameDoubleKernels(running, choice)) {
    g_decision = Decision::kAlreadyRight;
    return;
  }
  if (getauxval(AT_BASE) == 0) {
    // Started as "ld.so PROGRAM ...": /proc/self/exe is the loader, which would take our
    // first argument for the program. Keep OpenBLAS's kernels.
    g_decision = Decision::kNoChoice;
    return;
  }
  if (setenv("OPENBLAS_CORETYPE", choice, 1) == 0) {
    // By the file's own path where it still has one: the kernel names the process after
    // the path executed, and "exe" would hide spexd from ps, pgrep and its operators.
    char self[4096];
    const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
      self[n] = '\0';
      if (access(self, X_OK) == 0) execv(self, argv);
    }
    execv("/proc/self/exe", argv);
  }
  std::fprintf(stderr, "spexd: cannot re-execute with OPENBLAS_CORETYPE=%s (%s); "
               "continuing with OpenBLAS's %s kernels\n", choice, std::strerror(errno), running);
  unsetenv("OPENBLAS_CORETYPE");
  g_decision = Decision::kNoChoice;
}

std::string BlasCoreReport() {
  const char* name = OpenBlasCoreName();
  std::string out = name != nullptr ? absl::StrCat("OpenBLAS kernels ", name)
                                    : std::string("BLAS (not OpenBLAS, or not loaded yet)");
  const char* env = std::getenv("OPENBLAS_CORETYPE");
  switch (g_decision) {
    case Decision::kByUs:
      absl::StrAppend(&out, " (OPENBLAS_CORETYPE=", env != nullptr ? env : "",
                      ", the family spexd chooses from CPUID)");
      break;
    case Decision::kByUser:
      absl::StrAppend(&out, " (OPENBLAS_CORETYPE=", env != nullptr ? env : "", " from the environment)");
      break;
    case Decision::kAlreadyRight:
      absl::StrAppend(&out, " (OpenBLAS's own detection: the kernels spexd would choose)");
      break;
    case Decision::kNoChoice:
    case Decision::kNotAsked:
      absl::StrAppend(&out, " (OpenBLAS's own CPU detection)");
      break;
  }
  return out;
}

}  // namespace spexd::core
