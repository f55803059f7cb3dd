#include "core/frame/frame.h"

#include "gtest/gtest.h"

namespace spexd::core {
namespace {

// ALLBADPIX: spexd's >= 1 - 1e-12 by default; desispec's == 1.0 under kDesispecExact
// (a fully masked bin whose stamp sums to 1 - 1e-13 is flagged only by spexd's rule).
TEST(SpecMaskTest, AllBadPixRules) {
  Frame f;
  f.nspec = 1;
  f.nwave = 3;
  f.chi2pix = {1, 1, 1};
  f.pixmask_fraction = {1.0, 1.0 - 1e-13, 0.6};
  ComputeSpecMask(&f);
  EXPECT_EQ(f.mask, (std::vector<uint32_t>{kSomeBadPix | kAllBadPix, kSomeBadPix | kAllBadPix,
                                           kSomeBadPix}));
  ComputeSpecMask(&f, MaskPolicy::kDesispecExact);
  EXPECT_EQ(f.mask, (std::vector<uint32_t>{kSomeBadPix | kAllBadPix, kSomeBadPix, kSomeBadPix}));
  ComputeSpecMask(&f, MaskPolicy::kAnyBit);
  EXPECT_EQ(f.mask[1], kSomeBadPix | kAllBadPix);
}

}  // namespace
}  // namespace spexd::core
