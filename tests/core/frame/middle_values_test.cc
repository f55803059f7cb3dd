// internal::SelectMiddle: the two middle values of any array (ties, zeros of both signs,
// infinities, sorted and organ-pipe runs that defeat a median-of-three pivot), as a sort
// places them; NaN reported, and the medians built on it NaN as numpy's.
#include "core/frame/internal/middle_values.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "core/frame/frame.h"
#include "core/frame/internal/frame_scores.h"
#include "gtest/gtest.h"

namespace spexd::core::internal {
namespace {

void ExpectMiddle(std::vector<double> v, int kind) {
  std::vector<double> sorted = v;
  std::sort(sorted.begin(), sorted.end());
  const std::size_t n = v.size();
  const MiddleValues m = SelectMiddle(v.data(), n);
  EXPECT_FALSE(m.nan);
  EXPECT_EQ(m.lo, sorted[(n - 1) / 2]) << "kind " << kind << " n " << n;
  EXPECT_EQ(m.hi, sorted[n / 2]) << "kind " << kind << " n " << n;
  std::sort(v.begin(), v.end());
  EXPECT_TRUE(v == sorted) << "kind " << kind << " n " << n << ": values lost or changed";
}

TEST(MiddleValuesTest, TheValuesASortPlacesInTheMiddle) {
  std::mt19937_64 rng(11);
  std::normal_distribution<double> normal(1.0, 0.4);
  std::gamma_distribution<double> gamma(3.0, 0.3);
  std::uniform_int_distribution<int> small(0, 6);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  const double inf = std::numeric_limits<double>::infinity();
  for (std::size_t n : {1u, 2u, 3u, 24u, 25u, 26u, 100u, 500u, 501u, 2326u, 2751u, 2881u, 20001u}) {
    for (int kind = 0; kind < 9; ++kind) {
      std::vector<double> v(n);
      for (std::size_t i = 0; i < n; ++i) {
        const double d = static_cast<double>(i);
        switch (kind) {
          case 0: v[i] = gamma(rng); break;                  // chi2pix-like
          case 1: v[i] = normal(rng); break;                 // negatives too
          case 2: v[i] = small(rng); break;                  // ties everywhere
          case 3: v[i] = 2.5; break;                         // all equal
          case 4: v[i] = d; break;                           // sorted
          case 5: v[i] = static_cast<double>(n) - d; break;  // reversed
          case 6: v[i] = std::min(d, static_cast<double>(n) - d); break;  // organ pipe
          case 7: v[i] = i % 2 == 0 ? d : -d; break;         // interleaved runs
          default: {                                         // zeros, infinities, outliers
            const double r = u(rng);
            v[i] = r < 0.2 ? 0.0 : r < 0.4 ? -0.0 : r < 0.45 ? inf : r < 0.5 ? -inf
                 : r < 0.52 ? 1e300 : normal(rng);
          }
        }
      }
      ExpectMiddle(v, kind);
    }
  }
}

TEST(MiddleValuesTest, NaNIsReportedAndMediansFollowNumpy) {
  for (std::size_t n : {1u, 7u, 300u, 3000u}) {
    std::vector<double> v(n, 1.0);
    v[n / 3] = std::nan("");
    std::vector<double> w = v;
    EXPECT_TRUE(SelectMiddle(w.data(), n).nan) << n;
    EXPECT_TRUE(std::isnan(NumpyMedian(v))) << n;  // numpy.median with a NaN is NaN
    EXPECT_TRUE(std::isnan(Median(v))) << n;
  }
  EXPECT_EQ(Median({4.0, 1.0, 3.0, 2.0}), 2.5);
  EXPECT_EQ(NumpyMedian({4.0, 1.0, 3.0, 2.0, 9.0}), 3.0);
  EXPECT_EQ(Median({}), 0.0);
  EXPECT_TRUE(std::isnan(NumpyMedian({})));
}

}  // namespace
}  // namespace spexd::core::internal
