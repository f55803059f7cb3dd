#include "server/state/psf_cache.h"

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "server/platform/content_id.h"
#include "server/platform/metrics.h"
#include "tests/test_support.h"

namespace spexd::server {
namespace {

std::string PsfBytes() { return testing::ReadBytes(testing::BundledPsfPath()); }

core::ExtractionParams SmallParams() {
  core::ExtractionParams p;
  p.wmin = 5760.0;
  p.wmax = 5800.0;
  p.nspec = 50;
  return p;
}

// The request validated against `psf`, as the server does when the header arrives.
core::ExtractionPlan PlanOf(const core::ExtractionParams& params, const core::Psf& psf) {
  absl::StatusOr<core::ExtractionPlan> plan = core::ExtractionPlan::Create(params, psf);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return *std::move(plan);
}

TEST(ContentIdTest, Sha256Hex) {
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(PsfCacheTest, LoadIsIdempotentAndKeyedByContent) {
  ServerMetrics metrics;
  PsfCache cache(int64_t{1} << 30, &metrics);
  const std::string bytes = PsfBytes();
  auto a = cache.Load(bytes, "first");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->id, Sha256Hex(bytes));
  EXPECT_FALSE(a->already_loaded);
  EXPECT_EQ(a->nspec, 500);
  auto b = cache.Load(bytes, "second");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->id, a->id);
  EXPECT_TRUE(b->already_loaded);
  EXPECT_EQ(b->source, "first");
  EXPECT_EQ(cache.List().size(), 1u);
  EXPECT_TRUE(cache.Get(a->id).ok());
  EXPECT_EQ(cache.Get("feed").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(cache.Load("not a fits file", "junk").status().code(), absl::StatusCode::kInvalidArgument);
  const std::string m = metrics.Serialize();
  EXPECT_NE(m.find("spexd_psf_cache_hits_total{kind=\"psf\"} 2"), std::string::npos) << m;
  EXPECT_NE(m.find("spexd_psf_cache_misses_total{kind=\"psf\"} 3"), std::string::npos) << m;
}

// Clients that start together load the same PSF at once: it is parsed once, the others
// wait for it and count as hits. A parse's failure is shared the same way, not cached.
TEST(PsfCacheTest, ConcurrentLoadsOfTheSameBytesParseOnce) {
  ServerMetrics metrics;
  PsfCache cache(int64_t{1} << 30, &metrics);
  const std::string bytes = PsfBytes();
  constexpr int kThreads = 8;
  std::vector<int> first(kThreads, -1);
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      ready.fetch_add(1);
      while (ready.load() < kThreads) std::this_thread::yield();
      auto s = cache.Load(bytes, "psf");
      ASSERT_TRUE(s.ok()) << s.status();
      first[static_cast<std::size_t>(t)] = s->already_loaded ? 0 : 1;
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(std::count(first.begin(), first.end(), 1), 1) << "one load parses";
  EXPECT_EQ(std::count(first.begin(), first.end(), 0), kThreads - 1);
  const std::string m = metrics.Serialize();
  EXPECT_NE(m.find("spexd_psf_cache_misses_total{kind=\"psf\"} 1\n"), std::string::npos) << m;
  EXPECT_NE(m.find("spexd_psf_cache_hits_total{kind=\"psf\"} 7\n"), std::string::npos) << m;

  std::vector<absl::StatusCode> codes(kThreads);
  threads.clear();
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      codes[static_cast<std::size_t>(t)] = cache.Load("not a fits file", "junk").status().code();
    });
  }
  for (std::thread& t : threads) t.join();
  for (absl::StatusCode c : codes) EXPECT_EQ(c, absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cache.Load("not a fits file", "junk").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cache.List().size(), 1u);
}

TEST(PsfCacheTest, GeometriesAreWarmAndCounted) {
  PsfCache cache(int64_t{1} << 30, nullptr);
  auto info = cache.Load(PsfBytes(), "psf");
  ASSERT_TRUE(info.ok());
  auto psf = cache.Get(info->id);
  ASSERT_TRUE(psf.ok());
  // The r-camera CCD the PSF was fitted on (its NPIX_Y x NPIX_X).
  constexpr int kH = 4128, kW = 4114;
  auto g1 = cache.GetGeometry(info->id, *psf, PlanOf(SmallParams(), **psf), kH, kW);
  ASSERT_TRUE(g1.ok()) << g1.status();
  auto g2 = cache.GetGeometry(info->id, *psf, PlanOf(SmallParams(), **psf), kH, kW);
  ASSERT_TRUE(g2.ok());
  EXPECT_EQ(g1->get(), g2->get());  // the same warm object
  core::ExtractionParams other = SmallParams();
  other.nwavestep = 30;
  auto other_geometry = cache.GetGeometry(info->id, *psf, PlanOf(other, **psf), kH, kW);
  ASSERT_TRUE(other_geometry.ok());
  EXPECT_NE(other_geometry->get(), g1->get());
  EXPECT_EQ(cache.List()[0].geometries, 2);
  core::ExtractionParams bad = SmallParams();
  bad.nspec = 0;
  // Parameters reach the cache only validated (ExtractionPlan): refused before it.
  EXPECT_EQ(core::ExtractionPlan::Create(bad, **psf).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      cache.GetGeometry(info->id, *psf, PlanOf(SmallParams(), **psf), kH + 1, kW).status().code(),
      absl::StatusCode::kInvalidArgument);  // larger than the PSF's CCD
  // Spots filled in by a job are counted after Rebalance.
  const int64_t before = cache.bytes();
  (*g1)->BundleSpots(0);
  cache.Rebalance();
  EXPECT_GT(cache.bytes(), before);
}

// Frames that arrive together for a geometry not yet warm: one creates it, the others wait
// for it and get the same object, so it is planned once (one miss, the rest hits).
TEST(PsfCacheTest, ConcurrentFirstRequestsCreateTheGeometryOnce) {
  ServerMetrics metrics;
  PsfCache cache(int64_t{1} << 30, &metrics);
  auto info = cache.Load(PsfBytes(), "psf");
  ASSERT_TRUE(info.ok());
  auto psf = cache.Get(info->id);
  ASSERT_TRUE(psf.ok());
  const core::ExtractionPlan plan = PlanOf(SmallParams(), **psf);
  constexpr int kThreads = 8;
  std::vector<const core::Geometry*> got(kThreads, nullptr);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto g = cache.GetGeometry(info->id, *psf, plan, 4128, 4114);
      ASSERT_TRUE(g.ok()) << g.status();
      got[static_cast<std::size_t>(t)] = g->get();
    });
  }
  for (std::thread& t : threads) t.join();
  for (const core::Geometry* g : got) EXPECT_EQ(g, got[0]);
  const std::string m = metrics.Serialize();
  EXPECT_NE(m.find("spexd_psf_cache_misses_total{kind=\"geometry\"} 1\n"), std::string::npos) << m;
  EXPECT_NE(m.find("spexd_psf_cache_hits_total{kind=\"geometry\"} 7\n"), std::string::npos) << m;
  // A failure is shared the same way and is not cached: a later request tries again.
  std::vector<absl::StatusCode> codes(kThreads);
  threads.clear();
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      codes[static_cast<std::size_t>(t)] =
          cache.GetGeometry(info->id, *psf, plan, 4129, 4114).status().code();
    });
  }
  for (std::thread& t : threads) t.join();
  for (absl::StatusCode c : codes) EXPECT_EQ(c, absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cache.GetGeometry(info->id, *psf, plan, 4129, 4114).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(PsfCacheTest, EvictsLeastRecentlyUsedUnderTheBudgetAndUnloadFrees) {
  const std::string bytes = PsfBytes();
  auto probe = core::Psf::LoadFromMemory(bytes.data(), bytes.size(), "probe");
  ASSERT_TRUE(probe.ok());
  const int64_t one = static_cast<int64_t>(probe->MemoryBytes());
  ServerMetrics metrics;
  PsfCache cache(one * 5 / 2, &metrics);
  // Three distinct contents of the same PSF: a trailing FITS block of blanks changes the
  // bytes (and the id) but not the parsed model.
  std::vector<std::string> ids;
  std::vector<int64_t> sizes;
  for (int k = 0; k < 3; ++k) {
    auto info = cache.Load(bytes + std::string(2880 * k, ' '), "v" + std::to_string(k));
    ASSERT_TRUE(info.ok()) << info.status();
    ids.push_back(info->id);
    sizes.push_back(info->host_bytes);
    if (k == 1) {
      ASSERT_TRUE(cache.Get(ids[0]).ok());  // touch v0: v1 becomes the LRU
    }
  }
  EXPECT_EQ(cache.List().size(), 2u);
  EXPECT_TRUE(cache.Get(ids[0]).ok());
  EXPECT_EQ(cache.Get(ids[1]).status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(cache.Get(ids[2]).ok());
  EXPECT_LE(cache.bytes(), cache.budget());
  EXPECT_NE(metrics.Serialize().find("spexd_psf_cache_evictions_total{kind=\"psf\"} 1"),
            std::string::npos);
  auto freed = cache.Unload(ids[0]);
  ASSERT_TRUE(freed.ok());
  EXPECT_EQ(*freed, sizes[0]);
  EXPECT_EQ(cache.List().size(), 1u);
  EXPECT_EQ(cache.Unload(ids[0]).status().code(), absl::StatusCode::kNotFound);
  // A PSF larger than the whole budget is refused.
  PsfCache tiny(one / 2, nullptr);
  EXPECT_EQ(tiny.Load(bytes, "big").status().code(), absl::StatusCode::kResourceExhausted);
}

// Every geometry the cache drops goes to the releaser (the server frees the backends'
// device state for it), alive during the call: on UnloadPsf and on eviction.
TEST(PsfCacheTest, DroppedGeometriesGoToTheReleaser) {
  const std::string bytes = PsfBytes();
  auto probe = core::Psf::LoadFromMemory(bytes.data(), bytes.size(), "probe");
  ASSERT_TRUE(probe.ok());
  const int64_t one = static_cast<int64_t>(probe->MemoryBytes());
  std::vector<const core::Geometry*> released;
  auto releaser = [&](const std::shared_ptr<const core::Geometry>& g) {
    ASSERT_NE(g, nullptr);
    EXPECT_GT(g->plan().nbundles, 0);  // alive during the call
    released.push_back(g.get());
  };
  constexpr int kH = 4128, kW = 4114;
  core::ExtractionParams other = SmallParams();
  other.nwavestep = 30;

  // Unload: both geometries of the PSF.
  PsfCache cache(int64_t{1} << 30, nullptr, releaser);
  auto info = cache.Load(bytes, "psf");
  ASSERT_TRUE(info.ok());
  auto psf = cache.Get(info->id);
  ASSERT_TRUE(psf.ok());
  auto g1 = cache.GetGeometry(info->id, *psf, PlanOf(SmallParams(), **psf), kH, kW);
  auto g2 = cache.GetGeometry(info->id, *psf, PlanOf(other, **psf), kH, kW);
  ASSERT_TRUE(g1.ok() && g2.ok());
  EXPECT_TRUE(released.empty());
  const std::vector<PsfSummary> listed = cache.List();
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].geometry_refs.size(), 2u);
  ASSERT_TRUE(cache.Unload(info->id).ok());
  std::sort(released.begin(), released.end());
  std::vector<const core::Geometry*> expected = {g1->get(), g2->get()};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(released, expected);

  // Eviction: the least recently used PSF goes with its geometry.
  released.clear();
  PsfCache small(one * 5 / 2, nullptr, releaser);
  auto v0 = small.Load(bytes, "v0");
  ASSERT_TRUE(v0.ok());
  auto psf0 = small.Get(v0->id);
  ASSERT_TRUE(psf0.ok());
  auto g0 = small.GetGeometry(v0->id, *psf0, PlanOf(SmallParams(), **psf0), kH, kW);
  ASSERT_TRUE(g0.ok());
  for (int k = 1; k < 3 && released.empty(); ++k) {
    ASSERT_TRUE(small.Load(bytes + std::string(2880 * k, ' '), "v" + std::to_string(k)).ok());
  }
  EXPECT_EQ(small.Get(v0->id).status().code(), absl::StatusCode::kNotFound);
  ASSERT_EQ(released.size(), 1u);
  EXPECT_EQ(released[0], g0->get());
}

}  // namespace
}  // namespace spexd::server
