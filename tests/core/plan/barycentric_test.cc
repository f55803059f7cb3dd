#include "core/plan/barycentric.h"

#include <cmath>

#include "gtest/gtest.h"

namespace spexd::core {
namespace {

// desispec's value for case A (../shared/data/desispec/frame-bary.fits.gz HELIOCOR:
// RA 150.1, DEC 2.2, MJD-OBS 59620.3, EXPTIME 900), to the 1e-9 the drop-in promises.
TEST(BarycentricTest, MatchesDesispecFactor) {
  const double mjd = 59620.3 + 900.0 / 2.0 / 3600.0 / 24.0;
  EXPECT_NEAR(BarycentricFactor(150.1, 2.2, mjd), 1.00001878333715, 1e-9);
  // astropy 5.2.1 radial_velocity_correction (desispec.heliocentric) at other times and
  // places, to the same 1e-9: the sign and size of the annual term follow.
  EXPECT_NEAR(BarycentricFactor(10.0, -30.0, 58000.1), 1.0000208487863413, 1e-9);
  EXPECT_NEAR(BarycentricFactor(250.0, 60.0, 60500.7), 0.9999814960728437, 1e-9);
}

TEST(BarycentricTest, HeaderSelectionAndErrors) {
  const std::vector<std::string> image = {
      "RA      =                150.1", "DEC     =                  2.2",
      "MJD-OBS =              59620.3", "EXPTIME =                900.0"};
  auto f = BarycentricFactorFromHeaders(image, {});
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_NEAR(*f, 1.00001878333715, 1e-9);
  // No RA/TARGTRA in the image header: the fibermap's keys (early commissioning).
  auto g = BarycentricFactorFromHeaders({"EXPTIME =                900.0"}, image);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(*g, *f);
  // desispec's messages, naming the key.
  EXPECT_EQ(BarycentricFactorFromHeaders({}, {}).status().message(),
            "Barycentric corr requires (TARGT)RA in HDU 0 or fibermap");
  EXPECT_EQ(BarycentricFactorFromHeaders({"RA      = 1.0"}, {}).status().message(),
            "no TARGTDEC nor DEC in header");
  EXPECT_EQ(BarycentricFactorFromHeaders({"TARGTRA = 1.0", "DEC     = 2.0"}, {}).status().message(),
            "no MJD-OBS nor MJD in header");
}

}  // namespace
}  // namespace spexd::core
