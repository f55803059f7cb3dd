// The normal equations by runs of pixels (core/cpu/internal/normal_equations.h) against
// the pixel-by-pixel sums of spec §2.8, on a stamp-like window: runs shorter and longer
// than a flush, column lists of 0 to 34 entries (past one and two vectors), zero weights
// inside runs, two fibres' stamps on one pixel.
#include "core/cpu/internal/normal_equations.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace spexd::core::internal {
namespace {

struct Window {
  int ny = 0, nx = 0, n = 0, kd = 0;
  std::vector<int32_t> start, col;
  std::vector<double> val, image, ivar;
  PixelEntries entries() const { return {start.data(), col.data(), val.data()}; }
  PixelWindow window() const { return {ny, nx, image.data(), ivar.data()}; }
};

// Three "fibres" of nt unknowns covering x in [0, 10), [6, 16) and [12, nx - 2): runs of 6
// identical pixels, and nx - 18 (past a flush of 16 for nx = 40) on the last fibre alone;
// the last two pixels of a row in no stamp. Pixel row y sees wavelengths y/2 - 3 .. y/2 + 3,
// rows y % 7 == 0 y/2 - 8 .. y/2 + 8 (34 entries where two fibres overlap).
Window MakeWindow(unsigned seed, int nx) {
  constexpr int kFibres = 3, kNt = 24;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  Window w;
  w.ny = 2 * kNt;
  w.nx = nx;
  w.n = kFibres * kNt;
  w.start.push_back(0);
  for (int y = 0; y < w.ny; ++y) {
    for (int x = 0; x < w.nx; ++x) {
      const int half = y % 7 == 0 ? 8 : 3;
      for (int s = 0; s < kFibres; ++s) {
        const int x0 = 6 * s, x1 = s == kFibres - 1 ? nx - 2 : 6 * s + 10;
        if (x < x0 || x >= x1) continue;
        for (int wl = std::max(0, y / 2 - half); wl <= std::min(kNt - 1, y / 2 + half); ++wl) {
          w.col.push_back(s * kNt + wl);
          w.val.push_back(u(rng) - 0.2);
        }
      }
      w.start.push_back(static_cast<int32_t>(w.col.size()));
      w.image.push_back(100.0 * u(rng) - 10.0);
      w.ivar.push_back(u(rng) < 0.1 ? 0.0 : 0.5 + u(rng));  // some masked pixels
    }
  }
  for (int p = 0; p < w.ny * w.nx; ++p) {
    if (w.start[p + 1] > w.start[p] && w.ivar[p] != 0.0) {
      w.kd = std::max(w.kd, w.col[w.start[p + 1] - 1] - w.col[w.start[p]]);
    }
  }
  return w;
}

struct Sums {
  std::vector<double> m, b, fw;
};

Sums Accumulate(const Window& w, SimdLevel level, NormalEqScratch* scratch) {
  Sums s;
  s.m.assign(static_cast<std::size_t>(w.n) * w.n, 0.0);
  s.b.assign(w.n, 0.0);
  s.fw.assign(w.n, 0.0);
  AccumulateNormalEquations(w.entries(), w.window(), w.kd, s.m.data(), s.b.data(), s.fw.data(),
                            scratch, level);
  return s;
}

TEST(NormalEquationsTest, MatchesThePixelByPixelSums) {
  const Window w = MakeWindow(7, 40);
  ASSERT_GT(w.kd, 16);
  NormalEqScratch scratch;
  const Sums got = Accumulate(w, WidestSimdLevel(), &scratch);
  // The spec's sums pixel by pixel: M's entries, and the sum of the terms' magnitudes.
  std::vector<double> m(got.m.size(), 0.0), mabs(got.m.size(), 0.0), b(w.n, 0.0), fw(w.n, 0.0);
  std::vector<int> terms(got.m.size(), 0);
  for (int p = 0; p < w.ny * w.nx; ++p) {
    const double v = w.ivar[p];
    if (v == 0.0) continue;
    for (int e = w.start[p]; e < w.start[p + 1]; ++e) {
      const double va = v * w.val[e];
      fw[w.col[e]] += va;
      b[w.col[e]] += va * w.image[p];
      for (int l = w.start[p]; l <= e; ++l) {
        const std::size_t at = w.col[e] + static_cast<std::size_t>(w.col[l]) * w.kd;
        m[at] += va * w.val[l];
        mabs[at] += std::fabs(va * w.val[l]);
        ++terms[at];
      }
    }
  }
  // b and fw are summed in the same order: the same bits.
  EXPECT_EQ(got.b, b);
  EXPECT_EQ(got.fw, fw);
  // M: the same terms summed by runs first. Recursive summation of N terms errs by at most
  // (N - 1) eps sum|terms| each way, so 2 N eps sum|terms| bounds the difference; a term
  // lost, doubled or misplaced is off by a whole term (>= 1e-3 of the sum here).
  int entries = 0;
  for (std::size_t i = 0; i < m.size(); ++i) {
    EXPECT_LE(std::fabs(got.m[i] - m[i]), 2.0 * terms[i] * DBL_EPSILON * mabs[i]) << "at " << i;
    entries += terms[i] > 0;
  }
  EXPECT_GT(entries, 500);
}

TEST(NormalEquationsTest, EveryVectorWidthGivesTheBaselineBits) {
  const Window w = MakeWindow(11, 40);
  NormalEqScratch scratch;
  const Sums base = Accumulate(w, SimdLevel::kBaseline, &scratch);
  for (SimdLevel level : {SimdLevel::kAvx2, SimdLevel::kAvx512}) {
    if (!SimdLevelAvailable(level)) {
      GTEST_LOG_(INFO) << "level " << static_cast<int>(level) << " not on this CPU: not compared";
      continue;
    }
    const Sums s = Accumulate(w, level, &scratch);
    EXPECT_EQ(std::memcmp(s.m.data(), base.m.data(), sizeof(double) * s.m.size()), 0);
    EXPECT_EQ(s.b, base.b);
    EXPECT_EQ(s.fw, base.fw);
  }
}

TEST(NormalEquationsTest, AReusedScratchGivesTheFreshBits) {
  // A window with long lists first leaves its last run's values in the scratch.
  const Window wide = MakeWindow(3, 40), small = MakeWindow(5, 12);
  NormalEqScratch reused, fresh;
  Accumulate(wide, WidestSimdLevel(), &reused);
  const Sums a = Accumulate(small, WidestSimdLevel(), &reused);
  const Sums b = Accumulate(small, WidestSimdLevel(), &fresh);
  EXPECT_EQ(std::memcmp(a.m.data(), b.m.data(), sizeof(double) * a.m.size()), 0);
  EXPECT_EQ(a.b, b.b);
}

TEST(NormalEquationsTest, MaskedAndEmptyPixelsAddNothing) {
  Window w = MakeWindow(13, 20);
  std::fill(w.ivar.begin(), w.ivar.end(), 0.0);
  NormalEqScratch scratch;
  const Sums s = Accumulate(w, WidestSimdLevel(), &scratch);
  EXPECT_TRUE(std::all_of(s.m.begin(), s.m.end(), [](double x) { return x == 0.0; }));
  EXPECT_TRUE(std::all_of(s.b.begin(), s.b.end(), [](double x) { return x == 0.0; }));
}

}  // namespace
}  // namespace spexd::core::internal
