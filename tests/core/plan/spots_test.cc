#include "core/plan/spots.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "absl/strings/str_format.h"
#include "core/io/fits_file.h"
#include "core/base/task_pool.h"
#include "gtest/gtest.h"
#include "tests/bundled_psf_test.h"
#include "tests/test_support.h"

namespace spexd::core {
namespace {

class SpotTest : public testing::BundledPsfTest {};

// Every fibre and wavelength of the gpu_specter reference (shared/data/README.md),
// including 10 Å outside the PSF domain: spots within 1e-14 absolute, corners exact.
TEST_F(SpotTest, MatchesGpuSpecterStamps) {
  auto file = FitsFile::OpenRead(testing::TestDataPath("psf-eval-00051060.fits.gz"));
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_TRUE(file->MoveToHdu("WAVELENGTH").ok());
  const std::vector<double> waves = *file->ReadImage<double>();
  ASSERT_TRUE(file->MoveToHdu("FIBER").ok());
  const std::vector<int32_t> fibers = *file->ReadImage<int32_t>();
  ASSERT_TRUE(file->MoveToHdu("SPOTS").ok());
  const std::vector<double> ref = *file->ReadImage<double>();
  ASSERT_TRUE(file->MoveToHdu("XC").ok());
  const std::vector<int32_t> ref_xc = *file->ReadImage<int32_t>();
  ASSERT_TRUE(file->MoveToHdu("YC").ok());
  const std::vector<int32_t> ref_yc = *file->ReadImage<int32_t>();
  constexpr int kNy = 11, kNx = 17;
  ASSERT_EQ(ref.size(), fibers.size() * waves.size() * kNy * kNx);

  double max_abs = 0;
  for (std::size_t f = 0; f < fibers.size(); ++f) {
    const Spots spots = EvaluateSpots(*psf_, fibers[f], 1, waves);
    ASSERT_EQ(spots.ny, kNy);
    ASSERT_EQ(spots.nx, kNx);
    for (std::size_t w = 0; w < waves.size(); ++w) {
      const std::size_t fw = f * waves.size() + w;
      const int wi = static_cast<int>(w);
      EXPECT_EQ(spots.corner_x(0, wi), ref_xc[fw]) << "fibre " << fibers[f] << " wave " << waves[w];
      EXPECT_EQ(spots.corner_y(0, wi), ref_yc[fw]) << "fibre " << fibers[f] << " wave " << waves[w];
      const double* got = spots.stamp(0, wi);
      const double* want = ref.data() + fw * kNy * kNx;
      for (int p = 0; p < kNy * kNx; ++p) max_abs = std::max(max_abs, std::abs(got[p] - want[p]));
      // The single-stamp helper is the same computation.
      std::vector<double> one(kNy * kNx);
      int32_t xc = 0, yc = 0;
      EvaluateSpot(*psf_, fibers[f], waves[w], one.data(), &xc, &yc);
      EXPECT_TRUE(std::equal(one.begin(), one.end(), got));
      EXPECT_EQ(xc, ref_xc[fw]);
      EXPECT_EQ(yc, ref_yc[fw]);
    }
  }
  RecordProperty("max_abs_err_spots", absl::StrFormat("%.3g", max_abs));
  EXPECT_LE(max_abs, 1e-14);
}

TEST_F(SpotTest, StampsAreNormalisedNonNegativeAndCentred) {
  std::vector<double> stamp(11 * 17);
  for (int fiber : {0, 123, 499}) {
    for (double wave : {5600.0, 6543.21, 7800.0}) {
      int32_t xc = 0, yc = 0;
      EvaluateSpot(*psf_, fiber, wave, stamp.data(), &xc, &yc);
      EXPECT_NEAR(std::accumulate(stamp.begin(), stamp.end(), 0.0), 1.0, 1e-14);
      EXPECT_GE(*std::min_element(stamp.begin(), stamp.end()), 0.0);
      // Centre pixel is the nearest pixel to the trace (spec §1.4 step 2).
      EXPECT_EQ(xc + 8, static_cast<int32_t>(std::floor(psf_->X(fiber, wave) + 0.5)));
      EXPECT_EQ(yc + 5, static_cast<int32_t>(std::floor(psf_->Y(fiber, wave) + 0.5)));
      // The peak lies in the central 3x3 pixels.
      const auto peak = std::max_element(stamp.begin(), stamp.end()) - stamp.begin();
      EXPECT_LE(std::abs(static_cast<int>(peak / 17) - 5), 1);
      EXPECT_LE(std::abs(static_cast<int>(peak % 17) - 8), 1);
    }
  }
}

// Threaded evaluation splits work by (fibre, wavelength): bit-identical to one stamp at a
// time, whatever the thread count.
TEST_F(SpotTest, ManyStampsEqualSingleStamps) {
  std::vector<double> waves;
  for (int i = 0; i < 600; ++i) waves.push_back(5760.0 + 3.1 * i);
  TaskPool pool;
  pool.AddThreads(3);
  const Spots spots = EvaluateSpots(*psf_, 240, 5, waves, &pool);  // 2 chunks of 2048 stamps
  ASSERT_EQ(spots.values.size(), 5u * 600 * 11 * 17);
  const Spots serial = EvaluateSpots(*psf_, 240, 5, waves);
  EXPECT_EQ(serial.values, spots.values);
  EXPECT_EQ(serial.xc, spots.xc);
  EXPECT_EQ(serial.yc, spots.yc);
  EXPECT_EQ(spots.fiber_begin, 240);
  std::vector<double> one(11 * 17);
  for (int f = 0; f < 5; ++f) {
    for (int w = 0; w < 600; w += 7) {
      int32_t xc = 0, yc = 0;
      EvaluateSpot(*psf_, 240 + f, waves[static_cast<std::size_t>(w)], one.data(), &xc, &yc);
      ASSERT_TRUE(std::equal(one.begin(), one.end(), spots.stamp(f, w))) << f << " " << w;
      ASSERT_EQ(xc, spots.corner_x(f, w));
      ASSERT_EQ(yc, spots.corner_y(f, w));
    }
  }
  const Spots empty = EvaluateSpots(*psf_, 0, 0, waves);
  EXPECT_TRUE(empty.values.empty());
}

}  // namespace
}  // namespace spexd::core
