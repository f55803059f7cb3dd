// How many geometries a CUDA backend keeps warm (cuda/host/warm_geometries.h): host arithmetic,
// no GPU needed.
#include "cuda/host/warm_geometries.h"

#include <cstddef>
#include <vector>

#include "gtest/gtest.h"

namespace spexd::cuda {
namespace {

constexpr std::size_t kGiB = std::size_t{1} << 30;

TEST(WarmGeometries, StateBytesAreThePlanTheCornersAndEverySpot) {
  core::PatchPlan plan;
  plan.nspec = 500;
  plan.fullwave.assign(2500, 0.0);
  plan.stamp_ny = 11;  // a DESI PSF: HSIZEY 5, HSIZEX 8
  plan.stamp_nx = 17;
  plan.xc.assign(500 * 2500, 0);
  plan.yc.assign(500 * 2500, 0);
  plan.patches.resize(1000);
  // 56 bytes a patch (14 int32), 8 a stamp's corners, 187 doubles a stamp.
  const std::size_t expected = 1000 * 56 + 500 * 2500 * 8 + std::size_t{500} * 2500 * 187 * 8;
  EXPECT_EQ(GeometryStateBytes(plan), expected);
  EXPECT_GT(GeometryStateBytes(plan), std::size_t{1750} << 20);  // ~1.8 GB: why few fit
}

TEST(WarmGeometries, KeepsEveryStateWhileTheNewOneFitsAboveTheReserve) {
  // 80 GiB device, 30 GiB free: a 2 GiB state fits with the 20 GiB reserve kept.
  const std::vector<std::size_t> warm(10, 2 * kGiB);
  EXPECT_EQ(WarmStatesToDrop(warm, 2 * kGiB, 30 * kGiB, 80 * kGiB), 0);
  EXPECT_EQ(WarmStatesToDrop({}, 2 * kGiB, 30 * kGiB, 80 * kGiB), 0);
}

TEST(WarmGeometries, DropsTheLeastRecentlyUsedUntilTheNewOneFits) {
  // 21 GiB free against 2 + 20 needed: the least recently used (last) 1 GiB state is not
  // enough alone; the next (3 GiB) makes it.
  const std::vector<std::size_t> warm{2 * kGiB, 3 * kGiB, 1 * kGiB};
  EXPECT_EQ(WarmStatesToDrop(warm, 2 * kGiB, 20 * kGiB, 80 * kGiB), 2);
  EXPECT_EQ(WarmStatesToDrop(warm, 2 * kGiB, 21 * kGiB, 80 * kGiB), 1);
  EXPECT_EQ(WarmStatesToDrop(warm, 2 * kGiB, 22 * kGiB, 80 * kGiB), 0);
  // Not even all of them make room: all go (the build reports the shortage itself).
  EXPECT_EQ(WarmStatesToDrop(warm, 2 * kGiB, 1 * kGiB, 80 * kGiB), 3);
}

TEST(WarmGeometries, NeverMoreThanTheCountBound) {
  const std::vector<std::size_t> many(kMaxWarmGeometries, 1 << 20);
  EXPECT_EQ(WarmStatesToDrop(many, 1 << 20, 70 * kGiB, 80 * kGiB), 1);
  const std::vector<std::size_t> two(2, 1 << 20);
  EXPECT_EQ(WarmStatesToDrop(two, 1 << 20, 70 * kGiB, 80 * kGiB, /*max_states=*/2), 1);
  EXPECT_EQ(WarmStatesToDrop(two, 1 << 20, 70 * kGiB, 80 * kGiB, /*max_states=*/3), 0);
}

}  // namespace
}  // namespace spexd::cuda
