// core::FrameArrayPool: an assembled frame's per-bin arrays come back for the next
// frame's assembler (same memory, emptied, the frame assembled from them identical to one
// in new memory), within the idle bound.
#include "core/frame/frame_array_pool.h"

#include <cstring>
#include <memory>
#include <vector>

#include "core/io/psf.h"
#include "core/plan/geometry.h"
#include "gtest/gtest.h"
#include "tests/test_support.h"

namespace spexd::core {
namespace {

std::shared_ptr<const Geometry> SmallGeometry() {
  auto geo = testing::SmallBundledGeometry();
  EXPECT_TRUE(geo.ok()) << geo.status();
  return geo.ok() ? *geo : nullptr;
}

// The frame of `geometry` assembled from bundles whose values depend on `seed`.
Frame Assemble(const Geometry& geometry, FrameAssembler::Keep keep, FrameArrayPool* arrays,
               int seed) {
  FrameAssembler assembler(geometry, false, keep, arrays);
  const PatchPlan& plan = geometry.plan();
  for (int b = 0; b < plan.nbundles; ++b) {
    BundleResult r;
    r.Allocate(b, plan.bundle_fiber_begin(b), plan.bundlesize, plan.nwave, plan.ndiag);
    for (std::size_t i = 0; i < r.flux.size(); ++i) {
      const double x = static_cast<double>((i * 7 + static_cast<std::size_t>(seed + b)) % 29);
      r.flux[i] = x;
      r.ivar[i] = 0.5 * x;
      r.chi2pix[i] = 1.0 + x / 10 + (i % 997 == 3 ? 40.0 : 0.0);  // BAD2DFIT here and there
      r.pixmask_fraction[i] = static_cast<double>(i % 13) / 12.0;
      r.failed_bins[i] = i % 101 == 0 ? 1 : 0;
    }
    for (std::size_t i = 0; i < r.rdiags.size(); ++i) r.rdiags[i] = 0.01 * static_cast<double>(i % 11);
    r.per_angstrom = true;
    EXPECT_TRUE(assembler.Add(r).ok());
  }
  return assembler.Finish();
}

void ExpectSameArrays(const Frame& a, const Frame& b) {
  EXPECT_EQ(a.nspec, b.nspec);
  EXPECT_EQ(a.flux, b.flux);
  EXPECT_EQ(a.ivar, b.ivar);
  EXPECT_EQ(a.rdiags, b.rdiags);
  EXPECT_EQ(a.pixmask_fraction, b.pixmask_fraction);
  EXPECT_EQ(a.chi2pix, b.chi2pix);
  EXPECT_EQ(a.mask, b.mask);
  EXPECT_EQ(a.failed_bins, b.failed_bins);
}

TEST(FrameArrayPoolTest, AFramesArraysServeTheNextFrame) {
  const std::shared_ptr<const Geometry> geo = SmallGeometry();
  ASSERT_NE(geo, nullptr);
  FrameArrayPool pool(int64_t{1} << 30);
  Frame none;
  EXPECT_FALSE(pool.Lend(&none));
  for (FrameAssembler::Keep keep : {FrameAssembler::Keep::kSpectra, FrameAssembler::Keep::kAll}) {
    Frame first = Assemble(*geo, keep, &pool, 1);
    ExpectSameArrays(first, Assemble(*geo, keep, nullptr, 1));
    const double* flux = first.flux.data();
    const double* chi2pix = first.chi2pix.data();
    const uint32_t* mask = first.mask.data();
    pool.Recycle(&first);
    EXPECT_TRUE(first.flux.empty() && first.chi2pix.empty() && first.mask.empty());
    EXPECT_GT(pool.idle_bytes(), 0);
    const int64_t lent = pool.lent();
    // Other values in the same memory: the frame is that of new memory.
    const Frame second = Assemble(*geo, keep, &pool, 5);
    EXPECT_EQ(pool.lent(), lent + 1);
    EXPECT_EQ(second.flux.data(), flux);
    EXPECT_EQ(second.chi2pix.data(), chi2pix);
    EXPECT_EQ(second.mask.data(), mask);
    ExpectSameArrays(second, Assemble(*geo, keep, nullptr, 5));
    Frame done = second;
    pool.Recycle(&done);
  }
}

TEST(FrameArrayPoolTest, SetsBeyondTheBoundAreFreed) {
  const std::shared_ptr<const Geometry> geo = SmallGeometry();
  ASSERT_NE(geo, nullptr);
  Frame a = Assemble(*geo, FrameAssembler::Keep::kSpectra, nullptr, 2);
  Frame b = a;
  FrameArrayPool pool(int64_t{1} << 30);
  pool.Recycle(&a);
  const int64_t one = pool.idle_bytes();
  ASSERT_GT(one, 0);
  pool.set_max_idle_bytes(one);  // room for one set
  pool.Recycle(&b);
  EXPECT_EQ(pool.idle_bytes(), one);
  EXPECT_TRUE(b.flux.empty());  // taken from the frame all the same
  pool.set_max_idle_bytes(0);
  EXPECT_EQ(pool.idle_bytes(), 0);
  Frame c;
  EXPECT_FALSE(pool.Lend(&c));
}

}  // namespace
}  // namespace spexd::core
