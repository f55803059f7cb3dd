// BatchSizes (cuda/host/batch_plan.h): the bundles each batch of a request takes.
#include "cuda/host/batch_plan.h"

#include <numeric>
#include <vector>

#include "gtest/gtest.h"

namespace spexd::cuda {
namespace {

int Total(const std::vector<int>& s) { return std::accumulate(s.begin(), s.end(), 0); }

TEST(BatchSizes, AFullFrameEndsWithTheLighterBatch) {
  // 20 bundles, at most 6 a batch: four batches, the last one bundle lighter.
  EXPECT_EQ(BatchSizes(20, 6), (std::vector<int>{5, 5, 6, 4}));
  EXPECT_EQ(BatchSizes(21, 6), (std::vector<int>{6, 5, 6, 4}));
  EXPECT_EQ(BatchSizes(24, 6), (std::vector<int>{6, 6, 6, 6}));  // no room before the last
  EXPECT_EQ(BatchSizes(12, 4), (std::vector<int>{4, 4, 4}));
}

TEST(BatchSizes, FewOrSmallBatchesStayEven) {
  EXPECT_EQ(BatchSizes(1, 6), (std::vector<int>{1}));
  EXPECT_EQ(BatchSizes(6, 6), (std::vector<int>{6}));
  EXPECT_EQ(BatchSizes(7, 6), (std::vector<int>{4, 3}));    // two batches: even
  EXPECT_EQ(BatchSizes(9, 3), (std::vector<int>{3, 3, 3}));  // a last of three keeps three
  EXPECT_EQ(BatchSizes(10, 4), (std::vector<int>{4, 3, 3}));
  EXPECT_EQ(BatchSizes(0, 6), (std::vector<int>{}));
}

TEST(BatchSizes, EveryBundleOnceWithinTheLimit) {
  for (int per = 1; per <= 8; ++per) {
    for (int n = 1; n <= 60; ++n) {
      const std::vector<int> s = BatchSizes(n, per);
      EXPECT_EQ(Total(s), n) << n << " / " << per;
      EXPECT_EQ(static_cast<int>(s.size()), (n + per - 1) / per) << n << " / " << per;
      for (int b : s) {
        EXPECT_GE(b, 1);
        EXPECT_LE(b, per);
      }
    }
  }
}

}  // namespace
}  // namespace spexd::cuda
