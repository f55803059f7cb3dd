// client/spexctl/huge_page_malloc.h: the tunables a frame command restarts with, and that it
// restarts at most once (a value already there, the user's or its own, stands).
#include "client/spexctl/huge_page_malloc.h"

#include "gtest/gtest.h"

namespace spexd::client {
namespace {

TEST(HugePageMallocTest, AddsMallocsHugePagesToTheTunables) {
  EXPECT_EQ(TunablesWithHugePages(nullptr), "glibc.malloc.hugetlb=1");
  EXPECT_EQ(TunablesWithHugePages(""), "glibc.malloc.hugetlb=1");
  EXPECT_EQ(TunablesWithHugePages("glibc.malloc.arena_max=2"),
            "glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1");
  // A tunable whose name merely starts the same is another one.
  EXPECT_EQ(TunablesWithHugePages("glibc.malloc.hugetlbx=1"),
            "glibc.malloc.hugetlbx=1:glibc.malloc.hugetlb=1");
}

TEST(HugePageMallocTest, LeavesAHugetlbValueAlreadyThere) {
  EXPECT_EQ(TunablesWithHugePages("glibc.malloc.hugetlb=1"), std::nullopt);
  EXPECT_EQ(TunablesWithHugePages("glibc.malloc.hugetlb=0"), std::nullopt);
  EXPECT_EQ(TunablesWithHugePages("glibc.malloc.arena_max=2:glibc.malloc.hugetlb=2"), std::nullopt);
  EXPECT_EQ(TunablesWithHugePages("glibc.malloc.hugetlb"), std::nullopt);
}

}  // namespace
}  // namespace spexd::client
