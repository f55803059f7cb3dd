// Every kernel configuration the CUDA planner can choose, run on the device against the CPU
// backend. The planner's choices follow the patch width nwavetot = nwavestep + 2 x 12
// (BatchExtractor::PanelP, DiagUpdateInFactor, the tiled factor's register tiles,
// kCoreGramMaxNt, TridiagNeedsRotationLog):
//   64   the factor's 4 x 4 register tiles (TileFactorKernel<4>), DMMA panel with P_j,
//        diagonal updates in the factor, core Gram kernel, twisted eigenvectors;
//   74   the same with 5 x 5 tiles (the DESI r, b and z frames);
//   84   6 x 6 tiles with register-step inversion, CUDA-core panel (6 column lanes), the
//        inversion's first GEMM and the Grams by cuBLAS, QL with logged rotations;
//   108  7 x 7 tiles, 7 column lanes: the widest patch an A100's shared memory holds;
//   112  the widest the geometry takes (kTiledMaxNt), over an A100's shared memory.
// The shared memory a block is the planner's other input (SPEXD_TEST_CUDA_FAULTS=
// shared_memory_cap, cuda/host/fault_injection.h): it selects no other kernel, so each
// width runs under the device's own limit, an A100's (166912 bytes) and the least the
// planner asks for (read from its refusal), with bit-identical results; a cap one byte
// under that, or an A100's for nwavetot 112, is refused with UNIMPLEMENTED before any
// launch and the backend stays healthy. Label "gpu": skips without a module or device.
#include <stdlib.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "core/backend/backend.h"
#include "core/cpu/cpu_backend.h"
#include "core/io/psf.h"
#include "core/plan/geometry.h"
#include "gtest/gtest.h"
#include "tests/cuda/host/backend_parity.h"
#include "tests/synthetic_frames.h"
#include "tests/test_support.h"

namespace spexd::testing {
namespace {

constexpr int64_t kA100SharedPerBlock = 166912;  // cudaDevAttrMaxSharedMemoryPerBlockOptin, sm_80

// A CUDA backend created with `faults` added to the environment's SPEXD_TEST_CUDA_FAULTS
// (a device run may set a cap for the whole binary; a later item wins), which is restored
// after (the backend reads it at creation only).
absl::StatusOr<std::unique_ptr<core::Backend>> CreateCudaBackendWithFaults(const std::string& faults) {
  const char* env = std::getenv("SPEXD_TEST_CUDA_FAULTS");
  const std::optional<std::string> before = env != nullptr ? std::optional<std::string>(env) : std::nullopt;
  const std::string spec = before && !before->empty() ? *before + "," + faults : faults;
  setenv("SPEXD_TEST_CUDA_FAULTS", spec.c_str(), 1);
  absl::StatusOr<core::BackendOptions> options = CudaTestOptions();
  auto b = options.ok() ? core::CreateBackend(*options) : options.status();
  if (before) {
    setenv("SPEXD_TEST_CUDA_FAULTS", before->c_str(), 1);
  } else {
    unsetenv("SPEXD_TEST_CUDA_FAULTS");
  }
  return b;
}

// The bytes in "... need N bytes ... allows L" of the planner's refusal (batch_config.cc).
int64_t NumberAfter(const std::string& message, const std::string& word) {
  const std::string key = word + " ";
  for (std::size_t at = message.find(key); at != std::string::npos;
       at = message.find(key, at + 1)) {
    const std::size_t begin = at + key.size();
    std::size_t end = begin;
    while (end < message.size() && absl::ascii_isdigit(static_cast<unsigned char>(message[end]))) {
      ++end;
    }
    int64_t n = 0;
    if (end > begin && absl::SimpleAtoi(message.substr(begin, end - begin), &n)) return n;
  }
  return -1;
}

class CudaKernelPaths : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    auto probe = CreateCudaBackendWithFaults("");
    if (!probe.ok()) GTEST_SKIP() << "CUDA backend unavailable: " << probe.status();
    psf_ = LoadBundledPsf();
    ASSERT_NE(psf_, nullptr);
    core::ExtractionParams p;
    p.specmin = 0;
    p.nspec = 25;
    p.nwavestep = GetParam() - 24;  // wavepad 10 + trunc(10 x 0.2)
    p.wmin = 6000.0;
    p.wmax = p.wmin + p.dw * (2 * p.nwavestep - 1);  // two patches a sub-bundle
    auto g = core::Geometry::Create(psf_, p, 4128, 4114, /*cache_spots=*/false);
    ASSERT_TRUE(g.ok()) << g.status();
    geometry_ = *g;
    ASSERT_EQ(geometry_->plan().nwavetot, GetParam());
    SyntheticOptions so;
    so.seed = 23;
    image_ = MakeSyntheticFrame(*geometry_, so);
    job_.geometry = geometry_;
    job_.image = &image_;
    job_.want_model = true;
    auto cpu = core::CreateCpuBackend(0);
    auto ref = RunJob(*cpu, job_);
    ASSERT_TRUE(ref.ok()) << ref.status();
    reference_ = std::move(ref->bundles);
  }

  // The job on a backend created with `faults`: its status, and its bundles when it ran
  // (each checked against the CPU backend). A refusal must leave the backend healthy.
  absl::StatusOr<RunOutput> Run(const std::string& faults, const std::string& what) {
    auto b = CreateCudaBackendWithFaults(faults);
    if (!b.ok()) return b.status();
    auto got = RunJob(**b, job_);
    EXPECT_TRUE((*b)->healthy()) << what << ": " << got.status();
    if (got.ok()) ExpectParity(what, Compare(reference_, got->bundles));
    return got;
  }

  std::shared_ptr<const core::Psf> psf_;
  std::shared_ptr<const core::Geometry> geometry_;
  core::PreprocImage image_;
  core::ExtractionJob job_;
  std::vector<core::BundleResult> reference_;
};

TEST_P(CudaKernelPaths, EachSharedMemoryLimitRunsTheSameKernelsOrIsRefused) {
  const std::string nt = "nwavetot " + std::to_string(GetParam());
  // The least shared memory a block the planner asks for, from its refusal under 48 KB
  // (which every CUDA GPU has, and no width needs less than: the DMMA panel alone takes more).
  auto small = Run("shared_memory_cap=49152", nt + " under 48 KB");
  ASSERT_TRUE(absl::IsUnimplemented(small.status())) << small.status();
  const std::string refusal(small.status().message());
  const int64_t need = NumberAfter(refusal, "need");
  ASSERT_GT(need, 49152) << refusal;
  EXPECT_EQ(NumberAfter(refusal, "allows"), 49152) << refusal;

  auto own = Run("", nt + " device limit");
  if (!own.ok()) {  // refused only where the device (or the run's own cap) has too little
    ASSERT_TRUE(absl::IsUnimplemented(own.status())) << own.status();
    EXPECT_LT(NumberAfter(std::string(own.status().message()), "allows"), need) << own.status();
    GTEST_SKIP() << nt << " needs " << need << " bytes a block: " << own.status();
  }

  auto least = Run("shared_memory_cap=" + std::to_string(need), nt + " at the least it needs");
  ASSERT_TRUE(least.ok()) << least.status();
  EXPECT_TRUE(BitIdentical(own->bundles, least->bundles)) << nt << ": the cap changed the results";

  auto under = Run("shared_memory_cap=" + std::to_string(need - 1), nt + " one byte under");
  EXPECT_TRUE(absl::IsUnimplemented(under.status())) << under.status();

  auto a100 = Run("shared_memory_cap=" + std::to_string(kA100SharedPerBlock), nt + " A100 limit");
  if (need <= kA100SharedPerBlock) {
    ASSERT_TRUE(a100.ok()) << a100.status();
    EXPECT_TRUE(BitIdentical(own->bundles, a100->bundles)) << nt << ": the A100 cap changed the results";
  } else {
    EXPECT_TRUE(absl::IsUnimplemented(a100.status())) << a100.status();
  }
  std::cout << "[kernel paths] " << nt << ": " << need << " bytes of shared memory a block" << std::endl;
}

INSTANTIATE_TEST_SUITE_P(Widths, CudaKernelPaths, ::testing::Values(64, 74, 84, 108, 112),
                         [](const auto& param_info) { return "nwavetot" + std::to_string(param_info.param); });

}  // namespace
}  // namespace spexd::testing
