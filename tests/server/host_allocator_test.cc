#include "server/host_allocator.h"

#include <malloc.h>
#include <sys/resource.h>

#include <cstdlib>
#include <cstring>
#include <thread>

#include "gtest/gtest.h"

namespace spexd::server {
namespace {

// A bundle array's size class: a few MB, as the CUDA backend allocates per bundle.
constexpr std::size_t kBlock = std::size_t{6} << 20;

// The block is used: the compiler may not drop a malloc, memset and free that nothing reads.
void Keep(void* p) { asm volatile("" : : "r"(p) : "memory"); }

long ThreadMinorFaults() {
  rusage u{};
  getrusage(RUSAGE_THREAD, &u);
  return u.ru_minflt;
}

struct Observed {
  std::size_t mapped_during = 0, mapped_before = 0;  // mallinfo2().hblkhd
  std::size_t free_before = 0, free_after = 0;       // mallinfo2().fordblks
  long second_faults = 0;                            // faulting the block in again
};

// On a thread of its own (a thread arena, as a worker's): allocate and touch a block, free
// it, then do the same again and count the second round's page faults.
Observed AllocateTwice() {
  Observed o;
  std::thread t([&o] {
    o.mapped_before = mallinfo2().hblkhd;
    void* a = std::malloc(kBlock);
    ASSERT_NE(a, nullptr);
    std::memset(a, 1, kBlock);
    Keep(a);
    o.mapped_during = mallinfo2().hblkhd;
    o.free_before = mallinfo2().fordblks;
    std::free(a);
    o.free_after = mallinfo2().fordblks;
    const long f0 = ThreadMinorFaults();
    void* b = std::malloc(kBlock);
    ASSERT_NE(b, nullptr);
    std::memset(b, 2, kBlock);
    Keep(b);
    o.second_faults = ThreadMinorFaults() - f0;
    std::free(b);
  });
  t.join();
  return o;
}

TEST(HostAllocatorTest, BlocksOfAFrameStayInTheArenasAndAreReusedWithoutFaults) {
  ASSERT_TRUE(TuneHostAllocator());
  const Observed o = AllocateTwice();
  // Not a mapping of its own (which free would unmap)...
  EXPECT_EQ(o.mapped_during, o.mapped_before);
  // ...and kept by the arena once freed, not trimmed back to the kernel.
  EXPECT_GE(o.free_after, o.free_before + kBlock - (std::size_t{64} << 10));
  // Its pages are resident: the next block of the size faults (almost) none in. A fresh
  // block would fault every 4 KiB page (1536), or a few hundred huge-page ones at best.
  EXPECT_LT(o.second_faults, 16);
}

TEST(HostAllocatorTest, SettingsAreWithinWhatAThreadArenaHolds) {
  // glibc refuses an mmap threshold above half its 64 MiB thread heap.
  EXPECT_LE(kArenaBlockBytes, std::size_t{32} << 20);
  EXPECT_GE(kArenaKeepBytes, 8 * kArenaBlockBytes);
}

}  // namespace
}  // namespace spexd::server
