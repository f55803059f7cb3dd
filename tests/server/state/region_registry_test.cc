// The CUDA region registry: ids, lookups, the three ways a region ends
// (unregister, the holding call ending, drain), that the holding call is ended exactly
// once, that Unregister waits for extractions still holding the region, and which peers
// count as local.
#include "server/state/region_registry.h"

#include <atomic>
#include <thread>

#include "gtest/gtest.h"

namespace spexd::server {
namespace {

class FakeRegion final : public core::ImportedRegion {
 public:
  explicit FakeRegion(std::atomic<int>* unmapped) : unmapped_(unmapped) {}
  ~FakeRegion() override { ++*unmapped_; }
  int device() const override { return 0; }
  uint64_t size() const override { return 1024; }
  void* data() const override { return nullptr; }
  absl::Status WriteFromHost(uint64_t, const void*, std::size_t) override { return absl::OkStatus(); }

 private:
  std::atomic<int>* unmapped_;
};

struct Ended {
  int calls = 0;
  absl::Status status;
};

std::shared_ptr<const RegisteredRegion> AddRegion(RegionRegistry& reg, std::atomic<int>* unmapped, Ended* ended) {
  return reg.Add(std::make_unique<FakeRegion>(unmapped), "r", "unix:x", [ended](const absl::Status& s) {
    ++ended->calls;
    ended->status = s;
  });
}

TEST(RegionRegistryTest, UnregisterEndsTheCallOnceAndUnmaps) {
  RegionRegistry reg(nullptr);
  std::atomic<int> unmapped{0};
  Ended ended;
  std::string id = AddRegion(reg, &unmapped, &ended)->id;
  EXPECT_EQ(id.size(), 32u);
  EXPECT_TRUE(reg.Find(id).ok());
  EXPECT_EQ(reg.size(), 1);
  EXPECT_TRUE(reg.Unregister(id, absl::Now() + absl::Seconds(5)).ok());
  EXPECT_EQ(ended.calls, 1);
  EXPECT_TRUE(ended.status.ok());
  EXPECT_EQ(unmapped.load(), 1);
  EXPECT_EQ(reg.Find(id).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(reg.Unregister(id, absl::Now()).code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(reg.Detach(id));  // the call ending afterwards finds nothing to release
  EXPECT_EQ(ended.calls, 1);
}

TEST(RegionRegistryTest, UnregisterWaitsForAnExtractionHoldingTheRegion) {
  RegionRegistry reg(nullptr);
  std::atomic<int> unmapped{0};
  Ended ended;
  std::string id = AddRegion(reg, &unmapped, &ended)->id;
  auto held = reg.Find(id);  // what a job holds
  ASSERT_TRUE(held.ok());
  EXPECT_EQ(reg.Unregister(id, absl::Now() + absl::Milliseconds(50)).code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(unmapped.load(), 0);  // still mapped for the job
  held->reset();                  // the job ends
  EXPECT_EQ(unmapped.load(), 1);

  std::string id2 = AddRegion(reg, &unmapped, &ended)->id;
  auto job = reg.Find(id2);
  std::thread finisher([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    job->reset();
  });
  EXPECT_TRUE(reg.Unregister(id2, absl::Now() + absl::Seconds(10)).ok());
  EXPECT_EQ(unmapped.load(), 2);
  finisher.join();
}

TEST(RegionRegistryTest, DetachAndCloseAll) {
  RegionRegistry reg(nullptr);
  std::atomic<int> unmapped{0};
  Ended a, b, c;
  std::string ida = AddRegion(reg, &unmapped, &a)->id;
  AddRegion(reg, &unmapped, &b);
  AddRegion(reg, &unmapped, &c);
  EXPECT_TRUE(reg.Detach(ida));  // the holder ends its own call
  EXPECT_EQ(a.calls, 0);
  EXPECT_EQ(unmapped.load(), 1);
  reg.CloseAll(absl::UnavailableError("draining"));
  EXPECT_EQ(b.calls, 1);
  EXPECT_EQ(c.calls, 1);
  EXPECT_EQ(b.status.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(reg.size(), 0);
  EXPECT_EQ(unmapped.load(), 3);
}

TEST(RegionRegistryTest, IdsDiffer) {
  RegionRegistry reg(nullptr);
  std::atomic<int> unmapped{0};
  Ended e;
  EXPECT_NE(AddRegion(reg, &unmapped, &e)->id, AddRegion(reg, &unmapped, &e)->id);
}

TEST(RegionRegistryTest, LocalPeers) {
  for (const char* local : {"unix:/tmp/spexd.sock", "unix-abstract:spexd", "ipv4:127.0.0.1:5000",
                            "ipv4:127.1.2.3:1", "ipv6:[::1]:50051", "ipv6:%5B::1%5D:50051"}) {
    EXPECT_TRUE(IsLocalPeer(local)) << local;
  }
  for (const char* remote : {"ipv4:10.0.0.5:5000", "ipv6:[2001:db8::1]:50051", "ipv4:128.0.0.1:1",
                             "", "unixx:/tmp", "ipv4:1127.0.0.1:1"}) {
    EXPECT_FALSE(IsLocalPeer(remote)) << remote;
  }
}

}  // namespace
}  // namespace spexd::server
