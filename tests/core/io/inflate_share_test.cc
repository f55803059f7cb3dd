// core::InflateShare: a .fits.gz member's share of the decode pool among the members
// inflating at once.
#include "core/io/inflate_share.h"

#include <optional>
#include <vector>

#include "gtest/gtest.h"

namespace spexd::core {
namespace {

TEST(InflateShare, EachMemberTakesItsShareOfThePoolAtLeastTwo) {
  InflateShare share;
  std::vector<InflateShare::Claim> claims;
  // 17 = a 16-thread pool and the loader: one member alone takes all of it.
  const int want[] = {17, 8, 5, 4, 3, 2, 2, 2, 2, 2};
  for (int w : want) {
    claims.push_back(share.Enter(17));
    EXPECT_EQ(claims.back().threads(), w) << "member " << claims.size();
  }
  EXPECT_EQ(share.active(), 10);
  claims.clear();
  EXPECT_EQ(share.active(), 0);
  EXPECT_EQ(share.Enter(17).threads(), 17);  // released on leaving the scope
  EXPECT_EQ(share.active(), 0);
}

TEST(InflateShare, APoolOfOneStaysOneAndAMovedClaimCountsOnce) {
  InflateShare share;
  {
    InflateShare::Claim a = share.Enter(1);
    EXPECT_EQ(a.threads(), 1);
    std::optional<InflateShare::Claim> b;
    b.emplace(share.Enter(3));
    EXPECT_EQ(b->threads(), 2);  // 3 / 2 members, raised to the floor of two
    InflateShare::Claim c = std::move(*b);
    b.reset();  // the moved-from claim releases nothing
    EXPECT_EQ(share.active(), 2);
    EXPECT_EQ(c.threads(), 2);
  }
  EXPECT_EQ(share.active(), 0);
}

}  // namespace
}  // namespace spexd::core
