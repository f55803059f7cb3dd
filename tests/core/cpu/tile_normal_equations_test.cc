// M by tiles of stamps (core/cpu/internal/tile_normal_equations.h) against the pixel-by-
// pixel sums of spec §2.8 (b and fw to the same bits),
// on stamps like a patch's: three fibres whose stamps overlap their neighbours', a last
// wavelength tile of four, stamps cut by the window's edges, exact zeros in the stamps,
// masked pixels whose image value is NaN.
#include "core/cpu/internal/tile_normal_equations.h"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace spexd::core::internal {
// Named, not anonymous: the unity build puts this file beside normal_equations_test.cc.
namespace tile_test {

struct Patch {
  int nspec = 3, nt = 20, stny = 7, stnx = 5, ny = 0, nx = 14;
  int n() const { return nspec * nt; }
  std::vector<double> spots;  // [n][stny][stnx]
  std::vector<const double*> stamp;
  std::vector<int32_t> oy, ox;
  std::vector<double> image, ivar;
  // A by pixel, as the CPU backend's BuildSparseA builds it (zeros and outside rows dropped).
  std::vector<int32_t> start, col;
  std::vector<double> val;
  PatchStamps stamps() const {
    return {n(), nt, stny, stnx, ny, nx, stamp.data(), oy.data(), ox.data(), image.data(),
            ivar.data()};
  }
};

Patch MakePatch(unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  Patch p;
  p.ny = p.nt + 4;
  p.spots.resize(static_cast<std::size_t>(p.n()) * p.stny * p.stnx);
  for (double& s : p.spots) s = u(rng) < 0.1 ? 0.0 : u(rng);
  for (int q = 0; q < p.n(); ++q) {
    const int s = q / p.nt, w = q % p.nt;
    p.stamp.push_back(p.spots.data() + static_cast<std::size_t>(q) * p.stny * p.stnx);
    p.oy.push_back(w - 3);                           // the first and last rows leave the window
    p.ox.push_back(4 * s + (w % 7 == 0 ? 1 : 0) - 1);  // fibre 0 starts left of it
  }
  for (int pix = 0; pix < p.ny * p.nx; ++pix) {
    const bool masked = u(rng) < 0.08;
    p.ivar.push_back(masked ? 0.0 : 0.5 + u(rng));
    p.image.push_back(masked ? std::numeric_limits<double>::quiet_NaN() : 100.0 * u(rng) - 5.0);
  }
  std::vector<std::vector<std::pair<int, double>>> by_pixel(p.ny * p.nx);
  for (int q = 0; q < p.n(); ++q) {
    for (int iy = 0; iy < p.stny; ++iy) {
      for (int ix = 0; ix < p.stnx; ++ix) {
        const int y = p.oy[q] + iy, x = p.ox[q] + ix;
        const double v = p.stamp[q][iy * p.stnx + ix];
        if (y < 0 || y >= p.ny || x < 0 || x >= p.nx || v == 0.0) continue;
        by_pixel[y * p.nx + x].push_back({q, v});
      }
    }
  }
  p.start.push_back(0);
  for (const auto& list : by_pixel) {  // q ascending: stamps were visited in q order
    for (const auto& [q, v] : list) {
      p.col.push_back(q);
      p.val.push_back(v);
    }
    p.start.push_back(static_cast<int32_t>(p.col.size()));
  }
  return p;
}

struct Sums {
  std::vector<double> m, b, fw;
};

Sums Tiles(const Patch& p, int reach, SimdLevel level, double fill = 0.0) {
  Sums s;
  s.m.assign(static_cast<std::size_t>(p.n()) * p.n(), fill);
  s.b.assign(p.n(), 0.0);
  s.fw.assign(p.n(), 0.0);
  TileScratch scratch;
  TileNormalEquations(p.stamps(), p.n(), reach, s.m.data(), s.b.data(), s.fw.data(), &scratch,
                      level);
  return s;
}

TEST(TileNormalEquationsTest, MatchesThePixelByPixelSums) {
  const Patch p = MakePatch(3);
  const int n = p.n();
  const Sums got = Tiles(p, n, WidestSimdLevel());
  // b and fw: the pixel-by-pixel sums' bits (masked pixels, NaN in the image, skipped),
  // with the runs path's arithmetic (normal_equations.cc: v * A, then times the pixel).
  std::vector<double> b(n, 0.0), fw(n, 0.0);
  for (int pix = 0; pix < p.ny * p.nx; ++pix) {
    const double v = p.ivar[pix];
    if (v == 0.0) continue;
    for (int e = p.start[pix]; e < p.start[pix + 1]; ++e) {
      const double vr = v * p.val[e];
      fw[p.col[e]] += vr;
      b[p.col[e]] += vr * p.image[pix];
    }
  }
  EXPECT_EQ(got.b, b);
  EXPECT_EQ(got.fw, fw);
  // M's lower triangle: the same terms in another order. Recursive summation of N terms
  // errs by at most (N - 1) eps sum|terms| each way, so 2 N eps sum|terms| bounds the
  // difference; a term lost, doubled or misplaced is off by a whole term.
  std::vector<double> m(got.m.size(), 0.0), mabs(got.m.size(), 0.0);
  std::vector<int> terms(got.m.size(), 0);
  for (int pix = 0; pix < p.ny * p.nx; ++pix) {
    const double v = p.ivar[pix];
    if (v == 0.0) continue;
    for (int e = p.start[pix]; e < p.start[pix + 1]; ++e) {
      for (int l = p.start[pix]; l <= e; ++l) {
        const std::size_t at = p.col[e] + static_cast<std::size_t>(p.col[l]) * n;
        m[at] += p.val[e] * (v * p.val[l]);
        mabs[at] += std::fabs(p.val[e] * v * p.val[l]);
        ++terms[at];
      }
    }
  }
  int coupled = 0;
  for (int l = 0; l < n; ++l) {
    for (int q = l; q < n; ++q) {
      const std::size_t at = q + static_cast<std::size_t>(l) * n;
      EXPECT_LE(std::fabs(got.m[at] - m[at]), 2.0 * terms[at] * DBL_EPSILON * mabs[at])
          << "M[" << q << ", " << l << "]";
      coupled += terms[at] > 0 && q / p.nt != l / p.nt;
    }
  }
  EXPECT_GT(coupled, 50) << "neighbouring fibres must couple";
}

TEST(TileNormalEquationsTest, LeavesEntriesPastTheReachAndAboveTheDiagonal) {
  const Patch p = MakePatch(5);
  const int n = p.n(), reach = 9;
  const Sums all = Tiles(p, n, WidestSimdLevel(), 7.0);
  const Sums cut = Tiles(p, reach, WidestSimdLevel(), 7.0);
  for (int l = 0; l < n; ++l) {
    for (int q = 0; q < n; ++q) {
      const std::size_t at = q + static_cast<std::size_t>(l) * n;
      if (q < l) {
        EXPECT_EQ(all.m[at], 7.0) << "above the diagonal, " << q << ", " << l;
      } else if (q - l > reach) {
        EXPECT_EQ(cut.m[at], 7.0) << "past the reach, " << q << ", " << l;
      } else {
        EXPECT_EQ(cut.m[at], all.m[at]) << q << ", " << l;
      }
    }
  }
}

TEST(TileNormalEquationsTest, EveryVectorCopyGivesThePortableBits) {
  if (!TileNormalEquationsVectorised()) {
    GTEST_SKIP() << "neither AVX-512 nor AVX2 with FMA on this CPU: only the portable copy runs";
  }
  const Patch p = MakePatch(9);
  const Sums portable = Tiles(p, p.n(), SimdLevel::kBaseline);
  for (SimdLevel level : {SimdLevel::kAvx2, SimdLevel::kAvx512}) {
    if (!SimdLevelAvailable(level)) {
      GTEST_LOG_(INFO) << "level " << static_cast<int>(level) << " not on this CPU: not compared";
      continue;
    }
    const Sums v = Tiles(p, p.n(), level);
    EXPECT_EQ(std::memcmp(v.m.data(), portable.m.data(), sizeof(double) * v.m.size()), 0)
        << "level " << static_cast<int>(level);
    EXPECT_EQ(v.b, portable.b);
    EXPECT_EQ(v.fw, portable.fw);
  }
}

}  // namespace tile_test
}  // namespace spexd::core::internal
