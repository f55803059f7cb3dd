// The per-element spot math the kernel uses (cuda/kernels/spot_math.h over core/numerics/legendre.h and
// core/numerics/gauss_hermite.h), driven on the host in the kernel's order, against
// core::EvaluateSpot (extraction-spec §1.4). Needs no GPU.
#include "cuda/kernels/spot_math.h"

#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "core/plan/patch_plan.h"
#include "core/io/psf.h"
#include "core/plan/spots.h"
#include "gtest/gtest.h"
#include "tests/test_support.h"

namespace spexd::cuda {
namespace {

using core::EdgeTerms;
using core::PixelBasis;
using core::StampEdge;
using core::SubPixelOffset;

// Host replay of EvaluateSpotsKernel for one stamp.
std::vector<double> HostStamp(const core::Psf& psf, int fiber, double wave, int xc, int yc) {
  std::vector<const core::LegendreTable*> rows = {&psf.xtrace(), &psf.ytrace()};
  for (int k = 0; k < psf.num_params(); ++k) rows.push_back(&psf.param_table(k));
  std::vector<double> par(rows.size());
  for (std::size_t r = 0; r < rows.size(); ++r) {
    const core::LegendreTable& t = *rows[r];
    LegendreRow row{t.wavemin, t.wavemax, t.ncoeff, r < 2 ? 1 : 0};
    par[r] = EvaluateLegendreRow(row, t.coeff.data() + static_cast<std::size_t>(fiber) * t.ncoeff, wave);
  }
  const int hx = psf.hsizex(), hy = psf.hsizey(), nx = 2 * hx + 1, ny = 2 * hy + 1;
  const int gx = psf.ghdegx(), gy = psf.ghdegy();
  const double dx = SubPixelOffset(par[0], xc, hx), dy = SubPixelOffset(par[1], yc, hy);
  std::vector<double> ex((nx + 1) * (1 + gx)), ey((ny + 1) * (1 + gy));
  for (int e = 0; e <= nx; ++e) EdgeTerms(StampEdge(e, hx, dx, par[2]), gx, &ex[e * (1 + gx)], &ex[e * (1 + gx) + 1]);
  for (int e = 0; e <= ny; ++e) EdgeTerms(StampEdge(e, hy, dy, par[3]), gy, &ey[e * (1 + gy)], &ey[e * (1 + gy) + 1]);
  std::vector<double> s(static_cast<std::size_t>(nx) * ny);
  double sum = 0;
  for (int iy = 0; iy < ny; ++iy) {
    for (int ix = 0; ix < nx; ++ix) {
      double v = 0;
      for (int j = 0; j <= gy; ++j) {
        double t = 0;
        for (int i = 0; i <= gx; ++i) t += par[4 + i + (gx + 1) * j] * PixelBasis(ex.data(), gx, i, ix);
        v += PixelBasis(ey.data(), gy, j, iy) * t;
      }
      v = v < 0 ? 0 : v;
      s[iy * nx + ix] = v;
      sum += v;
    }
  }
  for (double& v : s) v /= sum;
  return s;
}

TEST(SpotMath, MatchesCoreEvaluateSpot) {
  std::shared_ptr<const core::Psf> psf = spexd::testing::LoadBundledPsf();
  ASSERT_NE(psf, nullptr);
  double worst = 0;
  for (int fiber : {0, 24, 25, 250, 499}) {
    for (double wave : {5533.0, 5760.0, 6543.21, 7620.0, 7837.0}) {
      const int n = (2 * psf->hsizex() + 1) * (2 * psf->hsizey() + 1);
      std::vector<double> ref(n);
      int32_t xc = 0, yc = 0;
      core::EvaluateSpot(*psf, fiber, wave, ref.data(), &xc, &yc);
      EXPECT_EQ(xc, core::StampCorner(psf->X(fiber, wave), psf->hsizex()));
      EXPECT_EQ(yc, core::StampCorner(psf->Y(fiber, wave), psf->hsizey()));
      std::vector<double> got = HostStamp(*psf, fiber, wave, xc, yc);
      for (int p = 0; p < n; ++p) worst = std::max(worst, std::fabs(got[p] - ref[p]));
    }
  }
  EXPECT_LT(worst, 1e-15);
  std::ostringstream os;
  os << worst;
  RecordProperty("max_abs_diff", os.str());
}

TEST(SpotMath, SubPixelOffsetAgreesWithFlooredModulo) {
  for (double pos : {0.0, 0.5, 1.4999999999, 1.5, 2047.5, 2047.49999999, -0.75, 4095.99}) {
    const int corner = core::StampCorner(pos, 8);
    const double t = pos + 0.5;
    const double want = (t - std::floor(t)) - 0.5;
    EXPECT_EQ(SubPixelOffset(pos, corner, 8), want) << pos;
  }
}

// The corner came from a position one ulp lower (as another device may round it), across
// a pixel boundary: the offset is then measured from that corner's centre, so stamp and
// corner stay consistent, and it is still within half a pixel.
TEST(SpotMath, SubPixelOffsetFollowsTheCornerAcrossAPixelBoundary) {
  for (double pos : {2047.5, 100.5, 3999.5}) {
    const double lower = std::nextafter(pos, 0.0);
    const int corner = core::StampCorner(lower, 8);
    ASSERT_EQ(corner, core::StampCorner(pos, 8) - 1) << pos;  // the fallback's precondition
    const double d = SubPixelOffset(pos, corner, 8);
    EXPECT_EQ(d, pos - static_cast<double>(corner + 8)) << pos;
    EXPECT_EQ(d, 0.5) << pos;
  }
}

}  // namespace
}  // namespace spexd::cuda
