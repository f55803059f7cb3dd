// Memory advice (core/base/prefault.h): advice only, so the contents and the usability of
// the memory are what is tested; whether the kernel grants huge pages depends on its THP
// mode and its free memory, so the test reports it without requiring it.
#include "core/base/prefault.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

namespace spexd::core {
namespace {

// AnonHugePages of the mapping holding `p` (kB), -1 if /proc/self/smaps says nothing.
long AnonHugeKbAt(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  const auto addr = reinterpret_cast<unsigned long>(p);
  bool inside = false;
  while (std::getline(smaps, line)) {
    unsigned long lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2) {
      inside = lo <= addr && addr < hi;
    } else if (inside && line.rfind("AnonHugePages:", 0) == 0) {
      return std::strtol(line.c_str() + 14, nullptr, 10);
    }
  }
  return -1;
}

TEST(AdviseHugePagesTest, UntouchedMemoryAdvisedThenFilledKeepsItsContents) {
  constexpr std::size_t kCount = std::size_t{12} << 20 >> 3;  // 12 MiB of doubles
  std::vector<double> v;
  v.reserve(kCount);
  AdviseHugePages(v.data(), kCount * sizeof(double));
  v.resize(kCount);
  for (std::size_t i = 0; i < kCount; ++i) v[i] = static_cast<double>(i);
  double sum = 0;
  for (double x : v) sum += x;
  EXPECT_EQ(sum, static_cast<double>(kCount) * (kCount - 1) / 2);
  std::printf("  AnonHugePages of the vector's mapping: %ld kB\n", AnonHugeKbAt(v.data() + kCount / 2));
}

TEST(AdviseHugePagesTest, RangesWithoutAWholeHugePageAreLeftAlone) {
  std::vector<char> small(4096, 'x');
  AdviseHugePages(small.data(), small.size());
  AdviseHugePages(small.data() + 1, 10);
  AdviseHugePages(nullptr, 0);
  AdviseHugePages(nullptr, 100);
  for (char c : small) ASSERT_EQ(c, 'x');
}

}  // namespace
}  // namespace spexd::core
