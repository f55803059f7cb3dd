// PlaneBufferPool with a PlaneMemoryPinner (pinned planes for a GPU backend's upload) and
// PrefaultForWrite (output vectors faulted in ahead of their copy).
#include <cstdint>
#include <cstring>
#include <memory>
#include <set>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "core/io/plane_buffer.h"
#include "core/base/prefault.h"
#include "gtest/gtest.h"

namespace spexd::core {
namespace {

// Records what is pinned; refuses the first `refuse` requests.
class FakePinner : public PlaneMemoryPinner {
 public:
  explicit FakePinner(int refuse = 0) : refuse_(refuse) {}
  bool Pin(void* data, std::size_t bytes) override {
    absl::MutexLock lock(&mu_);
    EXPECT_GT(bytes, 0u);
    if (refuse_ > 0) {
      --refuse_;
      return false;
    }
    EXPECT_TRUE(pinned_.insert(data).second) << "pinned twice";
    ++pins_;
    return true;
  }
  void Unpin(void* data) override {
    absl::MutexLock lock(&mu_);
    EXPECT_EQ(pinned_.erase(data), 1u) << "unpinned a block it did not pin";
  }
  int pins() {
    absl::MutexLock lock(&mu_);
    return pins_;
  }
  std::size_t pinned_now() {
    absl::MutexLock lock(&mu_);
    return pinned_.size();
  }

 private:
  absl::Mutex mu_;
  int refuse_ ABSL_GUARDED_BY(mu_);
  int pins_ ABSL_GUARDED_BY(mu_) = 0;
  std::set<void*> pinned_ ABSL_GUARDED_BY(mu_);
};

TEST(PlanePinningTest, BlocksArePinnedOnceAndUnpinnedBeforeTheyAreFreed) {
  auto pinner = std::make_shared<FakePinner>();
  auto pool = std::make_unique<PlaneBufferPool>(int64_t{4} << 20);  // two 2 MiB blocks
  pool->set_pinner(pinner);
  void* first = nullptr;
  {
    auto a = PlaneBuffer<float>::Make(1000, pool.get());
    first = a.data();
    EXPECT_EQ(pinner->pins(), 1);
  }
  auto b = PlaneBuffer<float>::Make(1000, pool.get());
  EXPECT_EQ(b.data(), first);
  EXPECT_EQ(pinner->pins(), 1) << "a reused block is pinned already";
  {
    // Three more back at once: the bound keeps two, the third is unpinned and freed.
    std::vector<PlaneBuffer<float>> many;
    for (int i = 0; i < 3; ++i) many.push_back(PlaneBuffer<float>::Make(1000, pool.get()));
    EXPECT_EQ(pinner->pins(), 4);
  }
  EXPECT_EQ(pinner->pinned_now(), 3u) << "b and the two cached blocks";
  pool->set_max_cached_bytes(int64_t{2} << 20);
  EXPECT_EQ(pinner->pinned_now(), 2u);
  pool.reset();  // b keeps the cache alive: everything goes when b does
  EXPECT_EQ(pinner->pinned_now(), 2u);
  b.Release();
  EXPECT_EQ(pinner->pinned_now(), 0u);
}

TEST(PlanePinningTest, ARefusedPinLeavesAUsablePageableBlockThatIsNotKept) {
  auto pinner = std::make_shared<FakePinner>(/*refuse=*/1);
  PlaneBufferPool pool(int64_t{8} << 20);
  pool.set_pinner(pinner);
  {
    auto a = PlaneBuffer<double>::Make(100, &pool);
    a[99] = 3.0;
    EXPECT_EQ(a[99], 3.0);
    EXPECT_EQ(pinner->pins(), 0);
  }
  EXPECT_EQ(pool.cached_bytes(), 0) << "a pageable block would never be pinned once cached";
  auto b = PlaneBuffer<double>::Make(100, &pool);
  EXPECT_EQ(pinner->pins(), 1) << "the next block is pinned";
}

TEST(PlanePinningTest, ANewPinnerDropsTheCacheAndOldBlocksGoBackToTheirOwn) {
  auto old_pinner = std::make_shared<FakePinner>();
  auto new_pinner = std::make_shared<FakePinner>();
  PlaneBufferPool pool(int64_t{8} << 20);
  pool.set_pinner(old_pinner);
  auto held = PlaneBuffer<float>::Make(10, &pool);
  { auto cached = PlaneBuffer<float>::Make(10, &pool); }
  EXPECT_EQ(old_pinner->pinned_now(), 2u);
  pool.set_pinner(new_pinner);
  EXPECT_EQ(old_pinner->pinned_now(), 1u) << "the cached block was dropped";
  EXPECT_EQ(pool.cached_bytes(), 0);
  held.Release();
  EXPECT_EQ(old_pinner->pinned_now(), 0u) << "unpinned by the pinner that pinned it";
  EXPECT_EQ(pool.cached_bytes(), 0) << "not kept under the new pinner";
  auto fresh = PlaneBuffer<float>::Make(10, &pool);
  EXPECT_EQ(new_pinner->pins(), 1);
  pool.set_pinner(nullptr);
  fresh.Release();
  EXPECT_EQ(new_pinner->pinned_now(), 0u);
}

TEST(PrefaultTest, KeepsContentsAndToleratesAnyRange) {
  std::vector<double> v(3 * 4096 + 7);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i) * 0.5;
  PrefaultForWrite(v.data() + 1, (v.size() - 1) * sizeof(double));  // unaligned both ends
  PrefaultForWrite(v.data(), 3);                                     // inside one page
  PrefaultForWrite(v.data(), 0);
  for (std::size_t i = 0; i < v.size(); ++i) ASSERT_EQ(v[i], static_cast<double>(i) * 0.5) << i;
  // Reserved, not yet written capacity (what the CUDA backend's bundle assembly prefaults).
  std::vector<double> w;
  w.reserve(1 << 20);
  PrefaultForWrite(w.data(), (std::size_t{1} << 20) * sizeof(double));
  w.assign(v.begin(), v.end());
  EXPECT_EQ(w, v);
}

}  // namespace
}  // namespace spexd::core
