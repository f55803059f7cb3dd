// The CUDA backend tests' fixture (ctest label "gpu"): the module loaded through
// core::CreateBackend({.kind = BackendKind::kCuda}) exactly as the server does, beside a CPU
// backend for reference; without a device or module every test skips with the reason.
// Parity with core::CpuBackend at the bar of the spec's "Decisions": FLUX, IVAR within
// 1e-10 of each spectrum's maximum, RESOLUTION 1e-10 absolute, PIXMASK_FRACTION 1e-12,
// CHI2PIX 1e-8 relative.
#ifndef SPEXD_TESTS_CUDA_CUDA_BACKEND_FIXTURE_H_
#define SPEXD_TESTS_CUDA_CUDA_BACKEND_FIXTURE_H_

#include <cstdint>
#include <iostream>
#include <memory>
#include <string>

#include "core/backend/backend.h"
#include "core/cpu/cpu_backend.h"
#include "core/io/preproc.h"
#include "core/io/psf.h"
#include "core/plan/geometry.h"
#include "gtest/gtest.h"
#include "tests/cuda/host/backend_parity.h"
#include "tests/synthetic_frames.h"
#include "tests/test_support.h"

namespace spexd::testing {

class CudaBackendTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<core::BackendOptions> options = spexd::testing::CudaTestOptions();
    // A misspelt SPEXD_CUDA_* value must fail, not skip: the status becomes the backend's.
    absl::StatusOr<std::unique_ptr<core::Backend>> b =
        options.ok() ? core::CreateBackend(*options) : options.status();
    if (b.ok()) {
      gpu_ = std::move(b).value().release();
    } else {
      skip_reason_ = new std::string(b.status().ToString());
    }
    cpu_ = core::CreateCpuBackend(0).release();
    psf_ = new std::shared_ptr<const core::Psf>(LoadBundledPsf());
  }
  static void TearDownTestSuite() {
    delete gpu_;
    delete cpu_;
    delete psf_;
    delete skip_reason_;
    gpu_ = nullptr;
    cpu_ = nullptr;
    psf_ = nullptr;
    skip_reason_ = nullptr;
  }
  void SetUp() override {
    if (gpu_ == nullptr) GTEST_SKIP() << "CUDA backend unavailable: " << *skip_reason_;
    ASSERT_NE(*psf_, nullptr) << "PSF fixture not found";
  }

  static std::shared_ptr<const core::Geometry> MakeGeometry(core::ExtractionParams p, int height = 4128,
                                                            int width = 4114) {
    auto g = core::Geometry::Create(*psf_, p, height, width, /*cache_spots=*/false);
    EXPECT_TRUE(g.ok()) << g.status();
    return g.ok() ? *g : nullptr;
  }

  // The bundled r PSF's geometry for fibres [specmin, specmin + nspec) on [wmin, wmax].
  static std::shared_ptr<const core::Geometry> MakeGeometry(int specmin, int nspec, double wmin, double wmax,
                                                            core::Compat compat = core::Compat::kGpu) {
    core::ExtractionParams p;
    p.specmin = specmin;
    p.nspec = nspec;
    p.wmin = wmin;
    p.wmax = wmax;
    p.compat = compat;
    return MakeGeometry(p);
  }

  // A synthetic frame for `geometry` (tests/synthetic_frames.h) from `seed`.
  static core::PreprocImage Synthetic(const core::Geometry& geometry, uint64_t seed,
                                       int masked_pixels = SyntheticOptions{}.masked_pixels) {
    SyntheticOptions so;
    so.seed = seed;
    so.masked_pixels = masked_pixels;
    return MakeSyntheticFrame(geometry, so);
  }

  // Huge pixel values on three rows of `bad`'s window overflow A^T N d to inf, so that
  // the patch's solve and its retry fail (flagged, outputs zero: spec §2.15).
  static void OverflowPatch(const core::PatchPlan& plan, const core::PatchDesc& bad,
                            core::PreprocImage* image) {
    const int cy = bad.y0 + bad.ny / 2, cx = plan.corner_x(bad.fiber0, bad.wave0 + plan.nwavetot / 2) + 8;
    for (int y = cy - 1; y <= cy + 1; ++y) {
      image->image[static_cast<std::size_t>(y) * image->width + cx] = 1e308;
      image->ivar[static_cast<std::size_t>(y) * image->width + cx] = 1e308;
    }
  }

  // CPU vs GPU on one job; returns the GPU output. `ill_conditioned`: the job has
  // truncated or heavily masked windows, judged with IllConditionedAllowance.
  static RunOutput CheckParity(const std::string& what, const core::ExtractionJob& job,
                               bool ill_conditioned = false) {
    auto ref = RunJob(*cpu_, job);
    EXPECT_TRUE(ref.ok()) << ref.status();
    auto got = RunJob(*gpu_, job);
    EXPECT_TRUE(got.ok()) << got.status();
    if (!ref.ok() || !got.ok()) return RunOutput{};
    if (ill_conditioned) {
      int64_t flagged = 0;
      const Allowance al = IllConditionedAllowance(*job.geometry, *job.image, ref->bundles, &flagged);
      std::cout << "[parity] " << what << ": " << flagged << " ill-conditioned patches" << std::endl;
      ExpectParity(what, Compare(ref->bundles, got->bundles, &al));
    } else {
      ExpectParity(what, Compare(ref->bundles, got->bundles));
    }
    std::cout << "[timing] " << what << ": cpu " << ref->summary.seconds << " s, gpu "
              << got->summary.seconds << " s (" << got->summary.counts.extracted << " patches, "
              << got->summary.counts.failed << " failed, " << got->summary.counts.retried
              << " retried)" << std::endl;
    return std::move(got).value();
  }

  static inline core::Backend* gpu_ = nullptr;
  static inline core::Backend* cpu_ = nullptr;
  static inline std::shared_ptr<const core::Psf>* psf_ = nullptr;
  static inline std::string* skip_reason_ = nullptr;
};

}  // namespace spexd::testing

#endif  // SPEXD_TESTS_CUDA_CUDA_BACKEND_FIXTURE_H_
