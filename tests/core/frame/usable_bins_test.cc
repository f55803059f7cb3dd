#include <cstdint>
#include <limits>
#include <vector>

#include "core/frame/usable_data.h"
#include "gtest/gtest.h"

namespace spexd::core {
namespace {

// Each bin judged alone, as the definition says (usable_data.h).
int64_t UsableByDefinition(const BundleResult& b) {
  int64_t usable = 0;
  for (std::size_t i = 0; i < b.ivar.size(); ++i) {
    const bool failed = i < b.failed_bins.size() && b.failed_bins[i] != 0;
    const bool masked =
        i < b.pixmask_fraction.size() && !(b.pixmask_fraction[i] < kMaxUsablePixmaskFraction);
    usable += b.ivar[i] > 0 && !failed && !masked ? 1 : 0;
  }
  return usable;
}

// Every combination of ivar (positive, zero, negative), failed and masked (below, at and
// above the limit, NaN) over 103 bins, with failed_bins and pixmask_fraction each as long
// as ivar, shorter or empty (a bin past their end is neither failed nor masked).
TEST(UsableBinsTest, CountsTheBinsTheDefinitionCalls) {
  BundleResult b;
  const double ivars[] = {1.0, 0.0, -2.0};
  const double pfs[] = {0.0, 0.5, kMaxUsablePixmaskFraction, 1.0,
                       std::numeric_limits<double>::quiet_NaN()};
  for (int i = 0; i < 103; ++i) {
    b.ivar.push_back(ivars[i % 3]);
    b.failed_bins.push_back(i % 7 == 0 ? 1 : 0);
    b.pixmask_fraction.push_back(pfs[i % 5]);
  }
  const std::vector<uint8_t> failed = b.failed_bins;
  const std::vector<double> pf = b.pixmask_fraction;
  for (const std::size_t nf : {std::size_t{103}, std::size_t{40}, std::size_t{0}}) {
    for (const std::size_t np : {std::size_t{103}, std::size_t{61}, std::size_t{0}}) {
      b.failed_bins.assign(failed.begin(), failed.begin() + static_cast<std::ptrdiff_t>(nf));
      b.pixmask_fraction.assign(pf.begin(), pf.begin() + static_cast<std::ptrdiff_t>(np));
      EXPECT_EQ(CountUsableBins(b), UsableByDefinition(b)) << nf << " failed, " << np << " masked";
    }
  }
  b.failed_bins.clear();
  b.pixmask_fraction.clear();
  EXPECT_EQ(CountUsableBins(b), 35);  // ivar > 0 alone: i % 3 == 0
}

}  // namespace
}  // namespace spexd::core
