// The output-region layout of the CUDA hand-off (proto CudaOutput): sections in order, each
// 256-byte aligned and large enough, total covering the last one.
#include "core/frame/output_layout.h"

#include <tuple>

#include "gtest/gtest.h"

namespace spexd::core {
namespace {

TEST(OutputLayoutTest, SectionsAreOrderedAlignedAndLargeEnough) {
  for (const auto& [nspec, nwave, ndiag] : {std::tuple{500, 2326, 5}, std::tuple{25, 51, 5},
                                            std::tuple{1, 1, 0}, std::tuple{3, 7, 2}}) {
    const OutputLayout l = MakeOutputLayout(nspec, nwave, ndiag);
    const uint64_t bins = static_cast<uint64_t>(nspec) * nwave;
    EXPECT_EQ(l.flux, 0u);
    const uint64_t starts[] = {l.flux, l.ivar, l.mask, l.resolution, l.chi2pix, l.total_bytes};
    const uint64_t sizes[] = {bins * 8, bins * 8, bins * 4, bins * (2 * ndiag + 1) * 8, bins * 8};
    for (int s = 0; s < 5; ++s) {
      EXPECT_EQ(starts[s] % kOutputAlignment, 0u) << s;
      EXPECT_GE(starts[s + 1], starts[s] + sizes[s]) << s;
      // No more padding than one alignment unit.
      EXPECT_LT(starts[s + 1], starts[s] + sizes[s] + kOutputAlignment) << s;
    }
  }
}

TEST(OutputLayoutTest, FullRFrameSize) {
  // 500 fibres x 2326 bins, 11 diagonals.
  const OutputLayout l = MakeOutputLayout(500, 2326, 5);
  EXPECT_EQ(l.ndiags(), 11u);
  EXPECT_EQ(l.bins(), 1163000u);
  // 14 float64 (flux, ivar, chi2pix, 11 diagonals) and one uint32 per bin, plus at most
  // one alignment unit per section.
  EXPECT_GE(l.total_bytes, 1163000u * (14 * 8 + 4));
  EXPECT_LT(l.total_bytes, 1163000u * (14 * 8 + 4) + 5 * kOutputAlignment);
}

}  // namespace
}  // namespace spexd::core
