// Shared helpers for tests: data locations and small FITS fixtures.
#ifndef SPEXD_TESTS_TEST_SUPPORT_H_
#define SPEXD_TESTS_TEST_SUPPORT_H_

#include <string>

#include "core/backend.h"

namespace spexd::testing {

// tests/data/<name> (committed fixtures).
std::string TestDataPath(const std::string& name);
// ../shared/data/<name>, or "" when ../shared/data is absent (a user's fresh clone).
std::string SharedDataPath(const std::string& name);
// The bundled PSF (tests/data/psf-r0-00051060.fits).
std::string BundledPsfPath();
// Options for the CUDA backend, with the solver switches taken from the environment of
// the test or benchmark run (SPEXD_CUDA_SOLVER, SPEXD_CUDA_EIGEN, SPEXD_CUDA_STATS=1).
core::BackendOptions CudaOptionsFromEnv();
// A fresh empty directory under the system temp dir, removed at process exit.
std::string MakeTempDir();

}  // namespace spexd::testing

// Skips the current test with a message when the shared reference data are absent.
#define SPEXD_REQUIRE_SHARED_DATA(path_var, name)                                      \
  const std::string path_var = ::spexd::testing::SharedDataPath(name);                 \
  if (path_var.empty()) {                                                              \
    GTEST_SKIP() << "needs ../shared/data/" << (name)                                  \
                 << " (large reference data beside the clone; present in CI, not in a " \
                    "fresh clone)";                                                    \
  }

#endif  // SPEXD_TESTS_TEST_SUPPORT_H_
