// ShadowParity's queue: sampling follows the fraction, a full queue skips (and
// counts) a check instead of waiting, and a check that cannot run is counted, not fatal.
#include "server/state/shadow_parity.h"

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"
#include "server/platform/health_metrics.h"
#include "tests/synthetic_frames.h"
#include "tests/test_support.h"

namespace spexd::server {
namespace {

TEST(ShadowParityQueueTest, SamplingFollowsTheFraction) {
  ShadowParity off(ShadowParityOptions{0.0, 1, 2, {}}, nullptr);
  int pick = -1;
  EXPECT_FALSE(off.enabled());
  EXPECT_FALSE(off.Sample(20, &pick));
  ShadowParity all(ShadowParityOptions{1.0, 1, 2, {}}, nullptr);
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE(all.Sample(20, &pick));
    EXPECT_GE(pick, 0);
    EXPECT_LT(pick, 20);
  }
  EXPECT_FALSE(all.Sample(0, &pick));
}

// A check slow enough to keep the check thread busy: one bundle over 400 A of a whole
// synthetic frame (a few tenths of a second on the CPU reference).
ShadowCheck SlowCheck(const std::shared_ptr<const core::Psf>& psf) {
  core::ExtractionParams params;
  params.nspec = 25;
  params.wmin = 6000.0;
  params.wmax = 6400.0;
  auto plan = core::ExtractionPlan::Create(params, *psf);
  EXPECT_TRUE(plan.ok()) << plan.status();
  auto geometry = core::Geometry::Create(psf, params, 4128, 4114, /*cache_spots=*/false);
  EXPECT_TRUE(geometry.ok()) << geometry.status();
  ShadowCheck c;
  c.backend = "cuda";
  c.gpu = "0";
  c.psf = psf;
  if (plan.ok()) c.plan = *plan;
  if (geometry.ok()) {
    c.image = std::make_shared<core::PreprocImage>(
        spexd::testing::MakeSyntheticFrame(**geometry, spexd::testing::SyntheticOptions{}));
  }
  c.served.bundle = 0;
  return c;
}

TEST(ShadowParityQueueTest, AFullQueueSkipsAndABadCheckIsCounted) {
  prometheus::Registry registry;
  HealthMetrics metrics(registry);
  metrics.AddUsualSeries("cuda", "0");
  ShadowParity shadow(ShadowParityOptions{1.0, 1, 1, {}}, &metrics);
  const std::shared_ptr<const core::Psf> psf = spexd::testing::LoadBundledPsf();
  ASSERT_NE(psf, nullptr);
  auto bad = [&psf] {
    ShadowCheck c;
    c.backend = "cuda";
    c.gpu = "0";
    c.psf = psf;
    core::ExtractionParams params;
    params.nspec = 25;
    auto plan = core::ExtractionPlan::Create(params, *psf);
    EXPECT_TRUE(plan.ok()) << plan.status();
    if (plan.ok()) c.plan = *plan;
    c.image = std::make_shared<core::PreprocImage>();  // 0 x 0: the reference cannot plan it
    return c;
  };
  // The one slot holds a slow check (waiting or running) while the others are offered:
  // each is skipped at once rather than waited for. The checks are made first, so that
  // the offers follow one another within microseconds.
  constexpr int kOffers = 200;
  std::vector<ShadowCheck> checks;
  for (int i = 0; i < kOffers; ++i) checks.push_back(bad());
  ASSERT_TRUE(shadow.Offer(SlowCheck(psf)));
  int accepted = 0;
  for (ShadowCheck& c : checks) accepted += shadow.Offer(std::move(c)) ? 1 : 0;
  EXPECT_EQ(accepted, 0);
  shadow.WaitIdle();
  ShadowParity::Totals t = shadow.totals();
  EXPECT_EQ(t.skipped, kOffers);
  EXPECT_EQ(t.ok + t.drift + t.failed, 1);  // the slow check, whatever its verdict
  // Room again; a check that cannot run is counted as failed, not fatal.
  const int64_t failed_before = t.failed;
  EXPECT_TRUE(shadow.Offer(bad()));
  shadow.WaitIdle();
  t = shadow.totals();
  EXPECT_EQ(t.failed, failed_before + 1);
  EXPECT_EQ(t.skipped, kOffers);
  const std::string text = prometheus::TextSerializer().Serialize(registry.Collect());
  EXPECT_NE(text.find(absl::StrCat("spexd_shadow_parity_checks_total{backend=\"cuda\",gpu=\"0\",result=\"skipped\"} ",
                                   t.skipped, "\n")),
            std::string::npos)
      << text;
}

// The server shutting down while a check runs stops the check: that is no failure of the
// reference, so no shadow_parity_error (nor a drift) may be logged (a shutdown at the end of
// an exposure bench is the common case).
TEST(ShadowParityQueueTest, AShutdownStopsARunningCheckWithoutAnError) {
  const std::shared_ptr<const core::Psf> psf = spexd::testing::LoadBundledPsf();
  ASSERT_NE(psf, nullptr);
  ShadowCheck c = SlowCheck(psf);
  ASSERT_TRUE(c.plan.has_value());
  ASSERT_NE(c.image, nullptr);
  ::testing::internal::CaptureStderr();
  {
    ShadowParity shadow(ShadowParityOptions{1.0, 1, 2, {}}, nullptr);
    ASSERT_TRUE(shadow.Offer(std::move(c)));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the check is running
  }  // the destructor stops it
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(log.find("shadow_parity_error"), std::string::npos) << log;
  EXPECT_EQ(log.find("shadow_parity_drift"), std::string::npos) << log;
}

}  // namespace
}  // namespace spexd::server
