// OpenBLAS's kernel choice (core/cpu/blas_core_type.h): the mapping from CPU features, and
// the re-execution a linked program makes, observed in a child process whose environment
// the test controls.
#include "core/cpu/blas_core_type.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "tests/test_support.h"

namespace spexd::core {
namespace {

X86Features Avx512Host() {
  X86Features f;
  f.avx2 = f.fma = f.avx512f = f.avx512bw = f.avx512dq = f.avx512vl = true;
  f.os_ymm = f.os_zmm = true;
  return f;
}

TEST(BlasCoreType, ChoosesFromWhatTheCpuAndOsSupport) {
  X86Features f = Avx512Host();
  EXPECT_STREQ(OpenBlasCoreTypeFor(f), "SkylakeX");
  f.avx512vl = false;  // AVX-512 without VL (Knights Landing): not SkylakeX's kernels
  EXPECT_STREQ(OpenBlasCoreTypeFor(f), "Haswell");
  f = Avx512Host();
  f.os_zmm = false;  // the OS does not save ZMM registers: AVX-512 would fault
  EXPECT_STREQ(OpenBlasCoreTypeFor(f), "Haswell");
  f.fma = false;  // AVX2 without FMA: no Haswell kernels either
  EXPECT_EQ(OpenBlasCoreTypeFor(f), nullptr);
  f = Avx512Host();
  f.os_ymm = f.os_zmm = false;
  EXPECT_EQ(OpenBlasCoreTypeFor(f), nullptr);
  EXPECT_EQ(OpenBlasCoreTypeFor(X86Features{}), nullptr);
}

// The child's half: only when the parent test below started this process, whose main
// (tests/test_main.cc) has made its choice as every program's main does.
TEST(BlasCoreTypeChild, WritesItsReport) {
  const char* out = std::getenv("SPEXD_BLAS_TEST_OUT");
  if (out == nullptr) GTEST_SKIP() << "runs only as the child of BlasCoreType.ReexecutesWith...";
  std::ifstream comm("/proc/self/comm");  // the process's name, after any re-execution
  std::string name;
  std::getline(comm, name);
  std::ofstream(out) << BlasCoreReport();
  std::ofstream(std::string(out) + ".comm") << name;
}

// Runs this test binary afresh for its child test, with `env` changes; returns its report.
std::string ChildReport(const std::string& dir, bool unset_coretype, const char* coretype,
                        const char* loader = nullptr) {
  const std::string out = dir + "/report.txt";
  std::remove(out.c_str());
  std::remove((out + ".comm").c_str());
  const pid_t pid = fork();
  if (pid == 0) {
    setenv("SPEXD_BLAS_TEST_OUT", out.c_str(), 1);
    if (unset_coretype) unsetenv("OPENBLAS_CORETYPE");
    if (coretype != nullptr) setenv("OPENBLAS_CORETYPE", coretype, 1);
    // This binary by its own path (/proc/self/exe is the loader's own once it runs, and
    // executing that name would call the process "exe").
    char self[4096];
    const ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0) _exit(126);
    self[len] = '\0';
    char filter[] = "--gtest_filter=BlasCoreTypeChild.WritesItsReport";
    if (loader != nullptr) {  // "ld.so PROGRAM ARGS", as some launchers run programs
      char ld[256];
      std::snprintf(ld, sizeof ld, "%s", loader);
      char* argv[] = {ld, self, filter, nullptr};
      execv(ld, argv);
      _exit(127);
    }
    char* argv[] = {self, filter, nullptr};
    execv(self, argv);
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  std::ifstream in(out);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(BlasCoreType, ReexecutesWithTheChosenKernelsUnlessTheEnvironmentDecides) {
  const std::string dir = spexd::testing::MakeTempDir();
  const char* choice = OpenBlasCoreTypeFor(DetectX86Features());
  const std::string chosen = ChildReport(dir, true, nullptr);
  const bool openblas = chosen.rfind("OpenBLAS kernels ", 0) == 0;
  if (!openblas) {
    // A reference BLAS: the variable is at most preset, for an OpenBLAS opened later.
    EXPECT_EQ(chosen.rfind("BLAS (not OpenBLAS", 0), 0u) << chosen;
    return;
  }
  if (choice == nullptr) {
    EXPECT_NE(chosen.find("(OpenBLAS's own CPU detection)"), std::string::npos) << chosen;
    return;
  }
  // OpenBLAS runs the chosen family, whether spexd set it or OpenBLAS found it itself.
  const bool skylakex = std::string(choice) == "SkylakeX";
  const bool family = skylakex ? (chosen.find("SkylakeX") != std::string::npos ||
                                  chosen.find("Cooperlake") != std::string::npos ||
                                  chosen.find("SapphireRapids") != std::string::npos)
                               : (chosen.find("Haswell") != std::string::npos ||
                                  chosen.find("Zen") != std::string::npos);
  EXPECT_TRUE(family) << chosen;
  EXPECT_TRUE(chosen.find("the family spexd chooses from CPUID") != std::string::npos ||
              chosen.find("the kernels spexd would choose") != std::string::npos)
      << chosen;
  // Re-executed or not, the process keeps its name (ps, pgrep), not "exe".
  std::ifstream comm(dir + "/report.txt.comm");
  std::string name;
  std::getline(comm, name);
  EXPECT_EQ(name, std::string("spexd_core_tests").substr(0, 15)) << chosen;

  // A user's OPENBLAS_CORETYPE stands, even Prescott, the slowest (never spexd's choice).
  const std::string user = ChildReport(dir, false, "Prescott");
  EXPECT_EQ(user, "OpenBLAS kernels Prescott (OPENBLAS_CORETYPE=Prescott from the environment)");
  // Started through the dynamic loader: no re-execution (it would hand the loader our
  // arguments), OpenBLAS's own kernels, and the program runs.
  const char* loader = "/lib64/ld-linux-x86-64.so.2";
  if (access(loader, X_OK) == 0) {
    const std::string via = ChildReport(dir, true, nullptr, loader);
    EXPECT_EQ(via.rfind("OpenBLAS kernels ", 0), 0u) << via;
    EXPECT_EQ(via.find("spexd chooses"), std::string::npos) << via;
  }
}

}  // namespace
}  // namespace spexd::core
