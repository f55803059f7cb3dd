// The CPU backend runs a frame's groups of patches as one parallel loop across bundles
// (no barrier per bundle). The sink contract stays: bundles in ascending order,
// one call at a time, and a sink error or a cancel stops the extraction. The frame is the same
// bit for bit whatever the thread count or the window (spots cached or not).
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "core/cpu/cpu_backend.h"
#include "core/io/psf.h"
#include "core/plan/geometry.h"
#include "core/sim/simulator.h"  // SimOptions
#include "gtest/gtest.h"
#include "tests/test_support.h"

namespace spexd::core {
namespace {

constexpr int kFibers = 75;  // three bundles of 25

class CpuBackendBundlesTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto psf = Psf::Load(testing::BundledPsfPath());
    ASSERT_TRUE(psf.ok()) << psf.status();
    psf_ = new std::shared_ptr<const Psf>(std::make_shared<const Psf>(std::move(*psf)));
    SimOptions sim;
    sim.nfibers = kFibers;
    sim.wmin = 6000.0; sim.wmax = 6080.0; sim.dw = 0.8;
    sim.seed = 5;
    auto image = testing::SimulatedImage(**psf_, sim);
    ASSERT_TRUE(image.ok()) << image.status();
    image_ = new PreprocImage(std::move(*image));
  }
  static void TearDownTestSuite() {
    delete psf_;
    delete image_;
  }

  struct Sunk {
    absl::Status status;
    std::vector<BundleResult> bundles;
    bool overlapped = false;
    ExtractionSummary summary;
  };

  // Extracts every bundle with `threads` threads; `fail_at` makes the sink refuse that
  // bundle (and record it), `cancel_at` cancels the job in the sink of that bundle (which
  // then takes 0.2 s, a slow consumer: the other threads run ahead meanwhile).
  // `sink_ms`: how long each sink call takes.
  // Spots: kWarm evaluates every bundle's spots before the extraction (the whole frame is
  // one loop), kCold leaves them to it (one bundle at a time), kUncached does not keep
  // them (two bundles at a time).
  enum SpotState { kWarm, kCold, kUncached };
  static Sunk Run(int threads, SpotState spots, int fail_at = -1, int cancel_at = -1,
                  int sink_ms = 5) {
    ExtractionParams p;
    p.wmin = 6000.0; p.wmax = 6080.0; p.dw = 0.8;
    p.nspec = kFibers;
    p.want_model = true;
    auto geo = Geometry::Create(*psf_, p, image_->height, image_->width, spots != kUncached);
    if (!geo.ok()) return Sunk{geo.status(), {}, false, {}};
    if (spots == kWarm) {
      for (int b = 0; b < (*geo)->plan().nbundles; ++b) (*geo)->BundleSpots(b);
    }
    ExtractionJob job;
    job.geometry = *geo;
    job.image = image_;
    job.want_model = true;
    std::atomic<bool> cancel{false};
    job.cancel = &cancel;
    Sunk out;
    std::atomic<int> inside{0};
    auto backend = CreateCpuBackend(threads);
    auto summary = backend->Extract(job, [&](BundleResult&& b) {
      // One call at a time: a second call while this one runs would find inside == 1
      // (the sleep below widens the window).
      if (inside.fetch_add(1) != 0) out.overlapped = true;
      std::this_thread::sleep_for(std::chrono::milliseconds(sink_ms));
      inside.fetch_sub(1);
      const int index = b.bundle;
      out.bundles.push_back(std::move(b));
      if (index == fail_at) return absl::DataLossError("the sink's disk is full");
      if (index == cancel_at) {
        cancel.store(true);
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
      }
      return absl::OkStatus();
    });
    out.status = summary.status();
    if (summary.ok()) out.summary = *summary;
    return out;
  }

  static void ExpectSameBits(const Sunk& a, const Sunk& b) {
    ASSERT_EQ(a.bundles.size(), b.bundles.size());
    for (std::size_t i = 0; i < a.bundles.size(); ++i) {
      const BundleResult& x = a.bundles[i];
      const BundleResult& y = b.bundles[i];
      auto same = [&](const auto& u, const auto& v, const char* what) {
        ASSERT_EQ(u.size(), v.size()) << what << " of bundle " << x.bundle;
        ASSERT_FALSE(u.empty()) << what;
        EXPECT_EQ(std::memcmp(u.data(), v.data(), u.size() * sizeof(u[0])), 0)
            << what << " of bundle " << x.bundle;
      };
      same(x.flux, y.flux, "flux");
      same(x.ivar, y.ivar, "ivar");
      same(x.rdiags, y.rdiags, "rdiags");
      same(x.chi2pix, y.chi2pix, "chi2pix");
      same(x.model, y.model, "model");
      same(x.patch_condition, y.patch_condition, "patch_condition");
      EXPECT_EQ(x.counts.extracted, y.counts.extracted);
    }
  }

  static std::shared_ptr<const Psf>* psf_;
  static PreprocImage* image_;
};
std::shared_ptr<const Psf>* CpuBackendBundlesTest::psf_ = nullptr;
PreprocImage* CpuBackendBundlesTest::image_ = nullptr;

TEST_F(CpuBackendBundlesTest, BundlesReachTheSinkInOrderOneAtATime) {
  const Sunk one = Run(1, kWarm);
  const Sunk three = Run(3, kWarm);
  ASSERT_TRUE(one.status.ok()) << one.status;
  ASSERT_TRUE(three.status.ok()) << three.status;
  ASSERT_EQ(three.bundles.size(), 3u);
  for (int b = 0; b < 3; ++b) {
    EXPECT_EQ(three.bundles[static_cast<std::size_t>(b)].bundle, b);
    EXPECT_GT(three.bundles[static_cast<std::size_t>(b)].counts.extracted, 0);
  }
  EXPECT_FALSE(three.overlapped) << "two sink calls ran at once";
  ExpectSameBits(one, three);
}

TEST_F(CpuBackendBundlesTest, EveryWindowGivesTheSameFrame) {
  const Sunk warm = Run(3, kWarm);          // one window: {0, 1, 2}
  const Sunk cold = Run(3, kCold);          // {0}, {1}, {2}
  const Sunk uncached = Run(3, kUncached);  // {0, 1}, {2}
  ASSERT_TRUE(warm.status.ok()) << warm.status;
  ASSERT_TRUE(cold.status.ok()) << cold.status;
  ASSERT_TRUE(uncached.status.ok()) << uncached.status;
  ExpectSameBits(warm, cold);
  ExpectSameBits(warm, uncached);
}

TEST_F(CpuBackendBundlesTest, ASinkErrorStopsTheExtraction) {
  const Sunk r = Run(3, kWarm, /*fail_at=*/1);
  EXPECT_EQ(r.status.code(), absl::StatusCode::kDataLoss) << r.status;
  EXPECT_NE(r.status.message().find("disk is full"), std::string::npos) << r.status;
  ASSERT_EQ(r.bundles.size(), 2u);  // bundle 2 never reaches the sink
  EXPECT_EQ(r.bundles[0].bundle, 0);
  EXPECT_EQ(r.bundles[1].bundle, 1);
}

TEST_F(CpuBackendBundlesTest, ACancelledJobSinksNoFurtherBundle) {
  // Bundles 1 and 2 finish while bundle 0's sink sleeps; once the job is cancelled none of
  // them may reach the sink (a service's consumer may be slow, or gone).
  const Sunk r = Run(3, kWarm, /*fail_at=*/-1, /*cancel_at=*/0);
  EXPECT_EQ(r.status.code(), absl::StatusCode::kCancelled) << r.status;
  ASSERT_EQ(r.bundles.size(), 1u);
  EXPECT_EQ(r.bundles[0].bundle, 0);
}

// A backend keeps its bundles' arrays from frame to frame (core::BundleArrayPool): a
// frame extracted into arrays that held another frame's results gives the bits of a
// fresh backend's, and its bundles reuse the memory the earlier frame's gave back.
TEST_F(CpuBackendBundlesTest, RecycledArraysGiveAFreshBackendsFrame) {
  ExtractionParams p;
  p.wmin = 6000.0; p.wmax = 6080.0; p.dw = 0.8;
  p.nspec = kFibers;
  auto geo = Geometry::Create(*psf_, p, image_->height, image_->width, true);
  ASSERT_TRUE(geo.ok()) << geo.status();
  PreprocImage brighter = *image_;  // another frame: other values in every array
  for (double& v : brighter.image) v *= 7.0;
  struct Copy {
    std::vector<double> flux, ivar, rdiags, pixmask, chi2;
    const double* flux_memory = nullptr;
  };
  auto extract = [&](Backend& backend, const PreprocImage& image) {
    ExtractionJob job;
    job.geometry = *geo;
    job.image = &image;
    std::vector<Copy> out;
    auto summary = backend.Extract(job, [&](BundleResult&& b) {
      EXPECT_NE(b.recycler, nullptr);
      out.push_back({b.flux, b.ivar, b.rdiags, b.pixmask_fraction, b.chi2pix, b.flux.data()});
      return absl::OkStatus();  // the bundle is dropped: its arrays go back
    });
    EXPECT_TRUE(summary.ok()) << summary.status();
    return out;
  };
  auto warm = CreateCpuBackend(3);
  const std::vector<Copy> other = extract(*warm, brighter);
  const std::vector<Copy> recycled = extract(*warm, *image_);
  auto fresh_backend = CreateCpuBackend(3);
  const std::vector<Copy> fresh = extract(*fresh_backend, *image_);
  ASSERT_EQ(recycled.size(), 3u);
  ASSERT_EQ(fresh.size(), 3u);
  int reused = 0;
  for (std::size_t i = 0; i < fresh.size(); ++i) {
    EXPECT_NE(other[i].flux, fresh[i].flux) << "the two frames must differ";
    EXPECT_EQ(recycled[i].flux, fresh[i].flux) << "bundle " << i;
    EXPECT_EQ(recycled[i].ivar, fresh[i].ivar) << "bundle " << i;
    EXPECT_EQ(recycled[i].rdiags, fresh[i].rdiags) << "bundle " << i;
    EXPECT_EQ(recycled[i].pixmask, fresh[i].pixmask) << "bundle " << i;
    EXPECT_EQ(recycled[i].chi2, fresh[i].chi2) << "bundle " << i;
    for (const Copy& o : other) reused += recycled[i].flux_memory == o.flux_memory ? 1 : 0;
  }
  EXPECT_GE(reused, 1) << "no bundle reused the earlier frame's arrays";
}

// The "patches" stage is the loop's wall, sink calls made inside it included: with one
// thread every sink call runs between groups, so the stage holds at least all of them
// (it once subtracted them, leaving only the extraction of a loop whose threads also sank).
TEST_F(CpuBackendBundlesTest, PatchesStageIsTheLoopsWallWithItsSinkCalls) {
  const Sunk r = Run(1, kWarm, /*fail_at=*/-1, /*cancel_at=*/-1, /*sink_ms=*/400);
  ASSERT_TRUE(r.status.ok()) << r.status;
  const auto& st = r.summary.stage_seconds;
  ASSERT_EQ(st.count("patches"), 1u);
  ASSERT_EQ(st.count("sink"), 1u);
  EXPECT_GE(st.at("sink"), 3 * 0.4);
  EXPECT_GE(st.at("patches"), st.at("sink"));
}

}  // namespace
}  // namespace spexd::core
