// Shared helpers for tests: data locations, files, the bundled PSF, backend options.
#ifndef SPEXD_TESTS_TEST_SUPPORT_H_
#define SPEXD_TESTS_TEST_SUPPORT_H_

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/backend/backend.h"
#include "core/io/preproc.h"
#include "core/io/psf.h"
#include "core/plan/geometry.h"

namespace spexd::core {
struct SimOptions;  // core/sim/simulator.h
}  // namespace spexd::core

namespace spexd::testing {

// tests/data/<name> (committed fixtures).
std::string TestDataPath(const std::string& name);
// The reference data's <name> (SPEXD_SHARED_DATA_DIR, tests/CMakeLists.txt), or "" when the
// reference data is absent (a user's fresh clone).
std::string SharedDataPath(const std::string& name);
// The bundled PSF (tests/data/psf-r0-00051060.fits).
std::string BundledPsfPath();
// The bundled PSF, loaded: from $SPEXD_SHARED_DATA/psf when set (a GPU machine, where the
// build tree's path does not exist), else the repository's copy; nullptr if neither loads.
std::shared_ptr<const core::Psf> LoadBundledPsf();
// A 50-fibre geometry of the bundled PSF on 6000-6080 A (two bundles of 100 wavelengths,
// the r CCD's size, no spots cached): for tests that assemble frames.
absl::StatusOr<std::shared_ptr<const core::Geometry>> SmallBundledGeometry();
// The whole file ("" when it cannot be read), and its inverse (false on failure).
std::string ReadBytes(const std::string& path);
bool WriteBytes(const std::string& path, const std::string& bytes);
// Options for the CUDA backend of a test or benchmark run (the defaults; a StatusOr so
// that callers keep one shape if a test setting ever needs parsing).
absl::StatusOr<core::BackendOptions> CudaTestOptions();
// The job's bundles from `backend`, in the order its sink received them.
absl::StatusOr<std::vector<core::BundleResult>> ExtractBundles(core::Backend& backend,
                                                               const core::ExtractionJob& job);
// A frame from the core simulator (core/sim/simulator.h: GenerateSpectra, SimulateFrame),
// decoded as the extraction reads it (ToPreprocImage): the one frame synthesizer for tests
// and benchmarks that need a whole-CCD frame in memory.
absl::StatusOr<core::PreprocImage> SimulatedImage(const core::Psf& psf,
                                                  const core::SimOptions& options);
// The frame's planes rounded to float32, in buffers from `pool` (null: unpooled), as
// PreprocOptions::keep_float32 decodes a preproc file; `exact` (if set) says whether no
// value changed.
core::PreprocImage Float32Planes(const core::PreprocImage& in, core::PlaneBufferPool* pool,
                                 bool* exact = nullptr);
// A fresh empty directory under the system temp dir, removed at process exit.
std::string MakeTempDir();

// Runs `command` with /bin/sh and reads its standard output to the end: the text, and
// pclose's wait status (-1 when the shell could not be started).
struct CommandResult {
  int status = -1;
  std::string output;
};
CommandResult RunCommand(const std::string& command);

// Raw HTTP over loopback for the metrics endpoint's tests: connects to 127.0.0.1:`port`,
// sends `request` (in pieces of `piece` bytes `pause_ms` apart when piece > 0; sending
// stops at the first error), then reads until the server closes or `timeout_s` passes.
struct RawHttpResult {
  bool connected = false;
  bool closed = false;  // the server closed the connection (EOF or reset)
  std::string response;
  double seconds = 0;   // from connect to the close (or the timeout)
};
RawHttpResult RawHttpExchange(int port, const std::string& request, double timeout_s = 15,
                              std::size_t piece = 0, int pause_ms = 0);
// The status code of a response's status line ("HTTP/1.1 404 ..."), -1 when there is none.
int HttpStatusOf(const std::string& response);

}  // namespace spexd::testing

// Skips the current test with a message when the shared reference data are absent.
#define SPEXD_REQUIRE_SHARED_DATA(path_var, name)                                      \
  const std::string path_var = ::spexd::testing::SharedDataPath(name);                 \
  if (path_var.empty()) {                                                              \
    GTEST_SKIP() << "needs " << (name) << " of the reference data"                     \
                 << " (large reference data beside the clone; present in CI, not in a " \
                    "fresh clone)";                                                    \
  }

#endif  // SPEXD_TESTS_TEST_SUPPORT_H_
