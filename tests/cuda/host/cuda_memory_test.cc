// Device memory accounting and release of the CUDA backend (Backend::Memory,
// Backend::Release: ListPsfs and spexd_gpu_memory_bytes report it, UnloadPsf and
// eviction free it). Label "gpu": skips without a module or device.
#include <atomic>
#include <chrono>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "core/backend/backend.h"
#include "core/plan/geometry.h"
#include "core/plan/patch_plan.h"
#include "core/io/psf.h"
#include "gtest/gtest.h"
#include "tests/synthetic_frames.h"
#include "tests/test_support.h"

namespace spexd::testing {
namespace {

using Clock = std::chrono::steady_clock;

// Small geometries (one bundle of 25 fibres, 50 or 100 bins) so the tests take well under
// a second on the GPU.
core::ExtractionParams SmallParams(double wmax) {
  core::ExtractionParams p;
  p.specmin = 25;
  p.nspec = 25;
  p.wmin = 6000.0;
  p.wmax = wmax;
  return p;
}

// What GeometryState holds on the device: the plan as uploaded, the stamp corners and
// every spot of the plan's fibres (float64).
int64_t ExpectedStateBytes(const core::Geometry& g) {
  const core::PatchPlan& plan = g.plan();
  return static_cast<int64_t>(plan.patches.size() * sizeof(core::PatchDesc) +
                              (plan.xc.size() + plan.yc.size()) * sizeof(int32_t) +
                              static_cast<std::size_t>(plan.nspec) * plan.fullwave.size() *
                                  static_cast<std::size_t>(plan.stamp_ny * plan.stamp_nx) *
                                  sizeof(double));
}

int64_t GeometryBytes(const core::BackendMemory& m, const core::Geometry* g) {
  auto it = m.geometry_bytes.find(g);
  return it == m.geometry_bytes.end() ? -1 : it->second;
}

class CudaMemoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<core::BackendOptions> options = CudaTestOptions();
    ASSERT_TRUE(options.ok()) << options.status();
    auto b = core::CreateBackend(*options);
    if (!b.ok()) GTEST_SKIP() << "CUDA backend unavailable: " << b.status();
    backend_ = *std::move(b);
    psf_ = LoadBundledPsf();
    ASSERT_NE(psf_, nullptr);
  }

  std::shared_ptr<const core::Geometry> MakeGeometry(double wmax) {
    auto g = core::Geometry::Create(psf_, SmallParams(wmax), 4128, 4114, /*cache_spots=*/false);
    EXPECT_TRUE(g.ok()) << g.status();
    return g.ok() ? *g : nullptr;
  }

  absl::StatusOr<std::vector<core::BundleResult>> Run(const std::shared_ptr<const core::Geometry>& g,
                                                      const core::PreprocImage& image,
                                                      const core::BundleSink* sink = nullptr) {
    core::ExtractionJob job;
    job.geometry = g;
    job.image = &image;
    std::vector<core::BundleResult> out;
    auto s = backend_->Extract(job, [&](core::BundleResult&& b) {
      if (sink != nullptr) {
        absl::Status st = (*sink)(core::BundleResult(b));
        if (!st.ok()) return st;
      }
      out.push_back(std::move(b));
      return absl::OkStatus();
    });
    if (!s.ok()) return s.status();
    return out;
  }

  std::unique_ptr<core::Backend> backend_;
  std::shared_ptr<const core::Psf> psf_;
};

TEST_F(CudaMemoryTest, ReportsWorkspaceAndPerGeometryStateAndReleaseFreesIt) {
  const core::BackendMemory empty = backend_->Memory();
  EXPECT_EQ(empty.device, CudaTestOptions()->device);
  EXPECT_EQ(empty.device_bytes, 0);
  EXPECT_TRUE(empty.geometry_bytes.empty());

  auto g1 = MakeGeometry(6039.2);
  auto g2 = MakeGeometry(6079.2);
  ASSERT_TRUE(g1 != nullptr && g2 != nullptr);
  SyntheticOptions so;
  so.seed = 5;
  const core::PreprocImage image = MakeSyntheticFrame(*g2, so);  // same CCD for both

  auto first = Run(g1, image);
  ASSERT_TRUE(first.ok()) << first.status();
  const core::BackendMemory one = backend_->Memory();
  EXPECT_EQ(GeometryBytes(one, g1.get()), ExpectedStateBytes(*g1));
  const int64_t workspace = one.device_bytes - ExpectedStateBytes(*g1);
  EXPECT_GT(workspace, 0);
  std::cout << "[memory] workspace " << workspace << " B, geometry " << ExpectedStateBytes(*g1)
            << " B" << std::endl;

  ASSERT_TRUE(Run(g2, image).ok());
  const core::BackendMemory two = backend_->Memory();
  EXPECT_EQ(two.geometry_bytes.size(), 2u);
  EXPECT_EQ(GeometryBytes(two, g2.get()), ExpectedStateBytes(*g2));
  const int64_t workspace2 = two.device_bytes - ExpectedStateBytes(*g1) - ExpectedStateBytes(*g2);
  EXPECT_GE(workspace2, workspace);  // grow-only

  // Idle backend: Release frees at once.
  backend_->Release(g1);
  const core::BackendMemory after = backend_->Memory();
  EXPECT_EQ(GeometryBytes(after, g1.get()), -1);
  EXPECT_EQ(after.device_bytes, two.device_bytes - ExpectedStateBytes(*g1));

  // A released geometry used again is rebuilt, gives the same results, and is dropped
  // again when that request ends (a job queued before its PSF was unloaded).
  auto again = Run(g1, image);
  ASSERT_TRUE(again.ok()) << again.status();
  ASSERT_EQ(again->size(), first->size());
  for (std::size_t b = 0; b < first->size(); ++b) {
    EXPECT_EQ((*again)[b].flux, (*first)[b].flux);
    EXPECT_EQ((*again)[b].ivar, (*first)[b].ivar);
  }
  EXPECT_EQ(GeometryBytes(backend_->Memory(), g1.get()), -1);

  // The last geometry released: the workspace goes too (an unloaded server gives its
  // device memory back).
  backend_->Release(g2);
  const core::BackendMemory none = backend_->Memory();
  EXPECT_EQ(none.device_bytes, 0);
  EXPECT_TRUE(none.geometry_bytes.empty());
  // And the backend still works. A PSF loaded again makes a new Geometry (the released
  // object is only used by jobs queued before the release): that one stays warm.
  auto g3 = MakeGeometry(6079.2);
  ASSERT_NE(g3, nullptr);
  ASSERT_TRUE(Run(g3, image).ok());
  EXPECT_EQ(GeometryBytes(backend_->Memory(), g3.get()), ExpectedStateBytes(*g3));
  EXPECT_GT(backend_->Memory().device_bytes, ExpectedStateBytes(*g3));
}

TEST_F(CudaMemoryTest, MemoryAndReleaseDoNotWaitForARunningExtraction) {
  auto g = MakeGeometry(6039.2);
  ASSERT_NE(g, nullptr);
  SyntheticOptions so;
  so.seed = 6;
  const core::PreprocImage image = MakeSyntheticFrame(*g, so);
  ASSERT_TRUE(Run(g, image).ok());  // warm
  const int64_t state = ExpectedStateBytes(*g);

  // Hold the extraction inside its sink (the backend's lock is held there).
  absl::Notification in_sink, proceed;
  core::BundleSink hold = [&](core::BundleResult&&) {
    in_sink.Notify();
    proceed.WaitForNotification();
    return absl::OkStatus();
  };
  std::thread worker([&] { EXPECT_TRUE(Run(g, image, &hold).ok()); });
  in_sink.WaitForNotification();
  const auto t0 = Clock::now();
  const core::BackendMemory busy = backend_->Memory();
  backend_->Release(g);
  const double waited = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_LT(waited, 0.5);
  EXPECT_EQ(GeometryBytes(busy, g.get()), state);
  // Still warm while the request that uses it runs.
  EXPECT_EQ(GeometryBytes(backend_->Memory(), g.get()), state);
  proceed.Notify();
  worker.join();
  // Freed when that request ended.
  const core::BackendMemory after = backend_->Memory();
  EXPECT_EQ(GeometryBytes(after, g.get()), -1);
  EXPECT_EQ(after.device_bytes, 0);
}

TEST_F(CudaMemoryTest, StateOfAGeometryNobodyHoldsIsFreedByTheNextRequest) {
  auto keep = MakeGeometry(6039.2);
  ASSERT_NE(keep, nullptr);
  SyntheticOptions so;
  so.seed = 7;
  const core::PreprocImage image = MakeSyntheticFrame(*keep, so);
  {
    auto temporary = MakeGeometry(6079.2);
    ASSERT_NE(temporary, nullptr);
    ASSERT_TRUE(Run(temporary, image).ok());
  }  // the caller dropped it without Release
  ASSERT_TRUE(Run(keep, image).ok());
  const core::BackendMemory m = backend_->Memory();
  ASSERT_EQ(m.geometry_bytes.size(), 1u);
  EXPECT_EQ(GeometryBytes(m, keep.get()), ExpectedStateBytes(*keep));
  const int64_t workspace = m.device_bytes - ExpectedStateBytes(*keep);
  backend_->Release(keep);
  EXPECT_EQ(backend_->Memory().device_bytes, 0);
  EXPECT_GT(workspace, 0);
}

}  // namespace
}  // namespace spexd::testing
