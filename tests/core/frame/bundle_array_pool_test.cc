// core::BundleArrayPool: a bundle's arrays come back when its last copy goes (moved-from
// bundles bring nothing, copies bring their own), are lent again to a later bundle
// (the same memory), the idle memory stays under its bound, a large enough set is
// preferred, and bundles may outlive the pool's owner and die on any thread.
#include "core/frame/bundle_array_pool.h"

#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace spexd::core {
namespace {

constexpr std::size_t kBins = 25 * 100;
constexpr std::size_t kRows = 11;

// A bundle lent arrays by `pool`, sized as a backend sizes them.
BundleResult Lent(BundleArrayPool& pool, std::size_t bins = kBins) {
  BundleResult b;
  pool.Lend(&b, bins, kRows);
  b.Allocate(0, 0, 25, static_cast<int>(bins / 25), 5);
  return b;
}

TEST(BundleArrayPoolTest, ArraysComeBackAndAreLentAgain) {
  auto pool = BundleArrayPool::Create();
  const double* flux = nullptr;
  const double* rdiags = nullptr;
  {
    BundleResult b = Lent(*pool);
    EXPECT_EQ(b.recycler, pool);
    flux = b.flux.data();
    rdiags = b.rdiags.data();
    b.flux[7] = 3.5;
  }
  BundleArrayPool::Stats s = pool->stats();
  EXPECT_EQ(s.missed, 1);
  EXPECT_EQ(s.recycled, 1);
  EXPECT_EQ(s.idle_sets, 1);
  EXPECT_GE(s.idle_bytes, static_cast<int64_t>(kBins * (4 + kRows) * sizeof(double) + kBins));
  BundleResult again;
  EXPECT_TRUE(pool->Lend(&again, kBins, kRows));
  EXPECT_EQ(again.flux.data(), flux);
  EXPECT_EQ(again.rdiags.data(), rdiags);
  // Sizes and contents as given back: the caller sizes (and, if it must, zeroes) them.
  ASSERT_EQ(again.flux.size(), kBins);
  EXPECT_EQ(again.flux[7], 3.5);
  again.Allocate(0, 0, 25, static_cast<int>(kBins / 25), 5);
  EXPECT_EQ(again.flux[7], 0.0);
  s = pool->stats();
  EXPECT_EQ(s.lent, 1);
  EXPECT_EQ(s.idle_sets, 0);
  EXPECT_EQ(s.idle_bytes, 0);
}

TEST(BundleArrayPoolTest, AMovedBundleComesBackOnceAndACopyBringsItsOwn) {
  auto pool = BundleArrayPool::Create();
  {
    BundleResult a = Lent(*pool);
    BundleResult moved = std::move(a);
    EXPECT_EQ(a.recycler, nullptr);  // NOLINT(bugprone-use-after-move): checked on purpose
    auto shared = std::make_shared<BundleResult>(std::move(moved));
    const BundleResult copy = *shared;  // the copy's arrays are its own
    EXPECT_NE(copy.flux.data(), shared->flux.data());
  }
  const BundleArrayPool::Stats s = pool->stats();
  EXPECT_EQ(s.recycled, 2);  // the bundle and its copy; the moved-from ones brought nothing
  EXPECT_EQ(s.idle_sets, 2);
}

TEST(BundleArrayPoolTest, ArraysAConsumerMovedAwayAreNotKept) {
  auto pool = BundleArrayPool::Create();
  std::vector<double> flux, ivar, rdiags, pixmask, chi2;
  std::vector<uint8_t> failed;
  {
    BundleResult b = Lent(*pool);
    flux = std::move(b.flux);
    ivar = std::move(b.ivar);
    rdiags = std::move(b.rdiags);
    pixmask = std::move(b.pixmask_fraction);
    chi2 = std::move(b.chi2pix);
    failed = std::move(b.failed_bins);
    b.flux.clear();
    b.ivar.clear();
    b.rdiags.clear();
    b.pixmask_fraction.clear();
    b.chi2pix.clear();
    b.failed_bins.clear();
  }
  EXPECT_EQ(pool->stats().idle_sets, 0);
  EXPECT_EQ(pool->stats().recycled, 0);
  EXPECT_EQ(flux.size(), kBins);
}

TEST(BundleArrayPoolTest, IdleMemoryStaysUnderItsBound) {
  const int64_t set_bytes = static_cast<int64_t>(kBins * (4 + kRows) * sizeof(double) + kBins);
  auto pool = BundleArrayPool::Create(/*max_idle_bytes=*/3 * set_bytes + set_bytes / 2);
  {
    std::vector<BundleResult> frame;
    for (int i = 0; i < 5; ++i) frame.push_back(Lent(*pool));
  }
  const BundleArrayPool::Stats s = pool->stats();
  EXPECT_EQ(s.recycled, 3);
  EXPECT_EQ(s.dropped, 2);
  EXPECT_EQ(s.idle_sets, 3);
  EXPECT_LE(s.idle_bytes, 3 * set_bytes + set_bytes / 2);
}

TEST(BundleArrayPoolTest, PrefersASetLargeEnough) {
  auto pool = BundleArrayPool::Create();
  const double* large_flux = nullptr;
  {
    BundleResult large = Lent(*pool, 2 * kBins);
    BundleResult small = Lent(*pool, kBins);
    large_flux = large.flux.data();
    // `small` goes last: the most recent set, but too small for a large bundle.
  }
  BundleResult b;
  EXPECT_TRUE(pool->Lend(&b, 2 * kBins, kRows));
  EXPECT_EQ(b.flux.data(), large_flux);
  BundleResult c;
  EXPECT_TRUE(pool->Lend(&c, 2 * kBins, kRows));  // none large enough: the most recent
  EXPECT_LT(c.flux.capacity(), 2 * kBins);
}

// A resolution held as float32 bytes (BundleResult::rdiags_file or rdiags_f32: parts of a
// backend's pooled, page-locked blocks) is no array of this pool: a bundle that takes it asks
// for no resolution rows, and is lent a set by its flux alone; the bytes' block goes back to
// its own pool.
TEST(BundleArrayPoolTest, ResolutionBytesAreNoArrayOfThePool) {
  auto pool = BundleArrayPool::Create();
  PlaneBufferPool blocks(int64_t{64} << 20);
  const double* flux = nullptr;
  {
    BundleResult b;
    pool->Lend(&b, kBins, 0);
    b.flux.resize(kBins);
    flux = b.flux.data();
    b.rdiags_file = PlaneBuffer<char>::Make(4 * kBins * kRows, &blocks);
  }
  EXPECT_EQ(pool->stats().idle_sets, 1);
  EXPECT_GE(blocks.cached_bytes(), int64_t{4} * kBins * kRows) << "the bytes' block went back to its pool";
  BundleResult again;
  ASSERT_TRUE(pool->Lend(&again, kBins, 0));
  EXPECT_EQ(again.flux.data(), flux);
  EXPECT_TRUE(again.rdiags_file.empty() && again.rdiags_f32.empty());
  EXPECT_EQ(again.rdiags.capacity(), 0u);
}

TEST(BundleArrayPoolTest, BundlesOutliveTheOwnersReferenceAndDieOnOtherThreads) {
  auto pool = BundleArrayPool::Create();
  std::vector<std::shared_ptr<BundleResult>> bundles;
  for (int i = 0; i < 64; ++i) bundles.push_back(std::make_shared<BundleResult>(Lent(*pool)));
  std::weak_ptr<BundleArrayPool> weak = pool;
  // The owner lends from one thread while consumers drop bundles on others.
  std::vector<std::thread> consumers;
  for (int t = 0; t < 4; ++t) {
    std::vector<std::shared_ptr<BundleResult>> mine(bundles.begin() + 16 * t, bundles.begin() + 16 * (t + 1));
    consumers.emplace_back([mine = std::move(mine)]() mutable {
      for (auto& b : mine) b.reset();
    });
  }
  bundles.clear();
  for (int i = 0; i < 64; ++i) {
    BundleResult b = Lent(*pool);
    b.flux[0] = i;
  }
  for (std::thread& t : consumers) t.join();
  const BundleArrayPool::Stats s = pool->stats();
  EXPECT_EQ(s.lent + s.missed, 128);
  EXPECT_EQ(s.recycled + s.dropped, 128);
  // The pool's owner goes first; a bundle still out keeps the pool alive and gives back
  // its arrays when it goes.
  BundleResult last = Lent(*pool);
  pool.reset();
  EXPECT_FALSE(weak.expired());
  { BundleResult gone = std::move(last); }
  EXPECT_TRUE(weak.expired());
}

}  // namespace
}  // namespace spexd::core
