#include "core/plan/barycentric.h"

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

#include "gtest/gtest.h"

namespace spexd::core {
namespace {

// desispec's value for case A (the reference data's desispec/frame-bary.fits.gz HELIOCOR:
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

// Values no observation can have are refused, not turned into a plausible HELIOCOR: the
// ranges of barycentric.h, and numbers that are not decimal (strtod alone reads "0x96" as
// 150, and "inf", "nan").
TEST(BarycentricTest, ImplausibleOrNonDecimalValuesAreRefused) {
  auto with = [](const std::string& key, const std::string& value) {
    std::vector<std::string> cards = {"RA      = 150.1", "DEC     = 2.2", "MJD-OBS = 59620.3",
                                      "EXPTIME = 900.0"};
    for (std::string& c : cards) {
      if (c.compare(0, key.size(), key) == 0) c = absl::StrCat(c.substr(0, 10), value);
    }
    return BarycentricFactorFromHeaders(cards, {});
  };
  for (const auto& [key, value] : std::vector<std::pair<std::string, std::string>>{
           {"RA", "0x96"}, {"RA", "-0.001"}, {"RA", "360.0"}, {"RA", "1E300"}, {"RA", "-1E300"},
           {"RA", "inf"}, {"RA", "nan"}, {"RA", "T"}, {"DEC", "95.0"}, {"DEC", "-90.5"},
           {"DEC", "1E300"}, {"MJD-OBS", "-1E9"}, {"MJD-OBS", "1E15"}, {"MJD-OBS", "1E300"},
           {"MJD-OBS", "36933.9"}, {"MJD-OBS", "88069.5"}, {"EXPTIME", "-1E12"},
           {"EXPTIME", "-1.0"}, {"EXPTIME", "86401"}, {"EXPTIME", "0x10"}}) {
    auto f = with(key, value);
    EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument) << key << " = " << value;
    EXPECT_NE(f.status().message().find(key), std::string::npos) << f.status();
  }
  // The edges that are inside, FITS's D exponent, and signs, are accepted.
  for (const auto& [key, value] : std::vector<std::pair<std::string, std::string>>{
           {"RA", "0"}, {"RA", "359.999"}, {"RA", "+1.501D2"}, {"DEC", "-90"}, {"DEC", "90.0"},
           {"MJD-OBS", "36934"}, {"MJD-OBS", "88069"}, {"EXPTIME", "0"}, {"EXPTIME", "86400"},
           {"EXPTIME", ".5e3"}}) {
    auto f = with(key, value);
    ASSERT_TRUE(f.ok()) << key << " = " << value << ": " << f.status();
    EXPECT_NEAR(*f, 1.0, 1e-3);
  }
  EXPECT_EQ(*with("RA", "1.501D2"), *with("RA", "150.1"));
}

}  // namespace
}  // namespace spexd::core
