#include "core/plan/internal/wavelength_grid.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "core/io/fits_file.h"
#include "gtest/gtest.h"
#include "tests/test_support.h"

namespace spexd::core {
namespace {

uint64_t Bits(double v) {
  uint64_t b = 0;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

// The r-camera grid of desi_proc (spec §2.2).
WavelengthGrid RGrid() {
  auto grid = MakeOutputGrid(5760.0, 7620.0, 0.8);
  EXPECT_TRUE(grid.ok()) << grid.status();
  return *grid;
}

TEST(WavelengthGridTest, RGridFollowsNumpyArange) {
  WavelengthGrid grid = RGrid();
  ASSERT_EQ(grid.wave.size(), 2326u);
  EXPECT_EQ(grid.wmin, 5760.0);
  EXPECT_EQ(grid.wmax, 7620.0);
  EXPECT_EQ(grid.dw, 0.8);
  // delta = (5760 + 0.8) - 5760 carries the rounding of 5760.8: 0x1.999999999a000p-1,
  // not 0.8 (0x1.999999999999ap-1).
  const double delta = 0.8000000000001819;
  EXPECT_EQ(Bits(delta), Bits(0x1.999999999a000p-1));
  EXPECT_EQ(Bits(grid.wave[0]), Bits(5760.0));
  EXPECT_EQ(Bits(grid.wave[1]), Bits(5760.0 + 0.8));
  EXPECT_EQ(Bits(grid.wave[1] - grid.wave[0]), Bits(delta));
  // wave[-1] = 5760 + 2325*delta = 7620.000000000423, not 7620.
  EXPECT_EQ(Bits(grid.wave.back()), Bits(7620.000000000423));
  EXPECT_EQ(Bits(grid.wave.back()), Bits(0x1.dc400000001d1p+12));
  for (std::size_t i = 0; i < grid.wave.size(); ++i) {
    ASSERT_EQ(Bits(grid.wave[i]), Bits(5760.0 + static_cast<double>(i) * delta)) << i;
  }
}

TEST(WavelengthGridTest, BAndZGridLengths) {
  auto b = MakeOutputGrid(3600.0, 5800.0, 0.8);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->wave.size(), 2751u);
  auto z = MakeOutputGrid(7520.0, 9824.0, 0.8);
  ASSERT_TRUE(z.ok()) << z.status();
  EXPECT_EQ(z->wave.size(), 2881u);
  // Both start values are also binary-inexact sums, with the same delta as r.
  EXPECT_EQ(Bits(b->wave[1] - b->wave[0]), Bits(0.8000000000001819));
  EXPECT_EQ(Bits(z->wave[1] - z->wave[0]), Bits(0.8000000000001819));
}

TEST(WavelengthGridTest, ArangeLengthUsesHalfStepStop) {
  // stop = wmax + dw/2 includes wmax when it lies on the grid, excludes wmax + dw.
  auto g = MakeOutputGrid(10.0, 12.0, 1.0);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->wave, (std::vector<double>{10.0, 11.0, 12.0}));
  // wmax between grid points: ceil((12.9 + 0.5 - 10) / 1) = 4 points.
  auto h = MakeOutputGrid(10.0, 12.9, 1.0);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->wave.size(), 4u);
}

TEST(WavelengthGridTest, MatchesReferenceWavelengthHdu) {
  SPEXD_REQUIRE_SHARED_DATA(path, "caseA/reference-cpu.fits.gz");
  auto file = FitsFile::OpenRead(path);
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_TRUE(file->MoveToHdu("WAVELENGTH").ok());
  auto ref = file->ReadImage<double>();
  ASSERT_TRUE(ref.ok()) << ref.status();
  WavelengthGrid grid = RGrid();
  ASSERT_EQ(ref->size(), grid.wave.size());
  for (std::size_t i = 0; i < ref->size(); ++i) {
    ASSERT_EQ(Bits((*ref)[i]), Bits(grid.wave[i])) << "bin " << i;
  }
}

TEST(WavelengthGridTest, EffectiveWavePad) {
  EXPECT_EQ(EffectiveWavePad(10, 0.2), 12);  // 10 + trunc(2.0)
  EXPECT_EQ(EffectiveWavePad(10, 0.0), 10);
  EXPECT_EQ(EffectiveWavePad(10, 0.25), 12);  // 10 + trunc(2.5)
  EXPECT_EQ(EffectiveWavePad(10, 0.29), 12);  // 10 + trunc(2.9)
  EXPECT_EQ(EffectiveWavePad(7, 1.0), 14);
  EXPECT_EQ(EffectiveWavePad(10, -0.15), 9);  // trunc(-1.5) = -1, toward zero
  EXPECT_EQ(EffectiveWavePad(10, std::numeric_limits<double>::quiet_NaN()), -1);
  EXPECT_EQ(EffectiveWavePad(10, 1e300), -1);
}

// The low part of spec §2.3 evaluated literally, step by step.
std::vector<double> LowPartThreeSteps(double wmin, double dw, int npad) {
  std::vector<double> lo(static_cast<std::size_t>(npad));
  for (int k = 0; k < npad; ++k) lo[static_cast<std::size_t>(k)] = static_cast<double>(k) * dw;
  const double shift = lo.back() + dw;
  for (double& v : lo) v = v - shift;
  for (double& v : lo) v = v + wmin;
  return lo;
}

TEST(WavelengthGridTest, PaddedGridForR) {
  WavelengthGrid grid = RGrid();
  const int pad = EffectiveWavePad(10, 0.2);
  ASSERT_EQ(pad, 12);
  std::vector<double> full = MakePaddedGrid(grid, pad, 50);
  ASSERT_EQ(full.size(), 2400u);  // 12 + 2326 + 12 + 50

  std::vector<double> lo = LowPartThreeSteps(5760.0, 0.8, 12);
  for (int k = 0; k < 12; ++k) {
    EXPECT_EQ(Bits(full[static_cast<std::size_t>(k)]), Bits(lo[static_cast<std::size_t>(k)]))
        << k;
  }
  // 0*0.8 - 9.600000000000001 + 5760 and 11*0.8 = 8.8 -> -0.8000000000000007 + 5760:
  // both round to the doubles nearest the decimal values here.
  EXPECT_EQ(Bits(full[0]), Bits(5750.4));
  EXPECT_EQ(Bits(full[0]), Bits(0x1.6766666666666p+12));
  EXPECT_EQ(Bits(full[11]), Bits(5759.2));
  // The output grid sits at offset wavepad_eff.
  for (std::size_t i = 0; i < grid.wave.size(); ++i) {
    ASSERT_EQ(Bits(full[i + 12]), Bits(grid.wave[i])) << i;
  }
  // High part: wave[-1] + (1.0 + k) * 0.8; note dw = 0.8, not delta.
  const double last = grid.wave.back();
  for (int k = 0; k < 62; ++k) {
    const double expect = last + (1.0 + static_cast<double>(k)) * 0.8;
    ASSERT_EQ(Bits(full[2338 + static_cast<std::size_t>(k)]), Bits(expect)) << k;
  }
  EXPECT_EQ(Bits(full[2338]), Bits(7620.800000000423));
  EXPECT_EQ(Bits(full.back()), Bits(7669.600000000423));
}

TEST(WavelengthGridTest, PaddedLowPartIsNotTheOneStepFormula) {
  // For wmin = 10, dw = 0.8: k = 2 gives 1.6 - 9.600000000000001 = -8.000000000000002
  // (= -(8 + 2^-49)), then + 10 = 2 - 2^-49 = 1.9999999999999982 exactly, whereas
  // 10 - 10*0.8 = 2.0. The three-step arithmetic must be kept (spec §2.3).
  auto grid = MakeOutputGrid(10.0, 20.0, 0.8);
  ASSERT_TRUE(grid.ok());
  std::vector<double> full = MakePaddedGrid(*grid, 12, 0);
  ASSERT_EQ(full.size(), 12 + grid->wave.size() + 12);
  EXPECT_EQ(Bits(full[2]), Bits(1.9999999999999982));
  EXPECT_EQ(Bits(full[2]), Bits(0x1.ffffffffffff8p+0));
  EXPECT_NE(Bits(full[2]), Bits(10.0 - 10 * 0.8));
  std::vector<double> lo = LowPartThreeSteps(10.0, 0.8, 12);
  for (std::size_t k = 0; k < 12; ++k) EXPECT_EQ(Bits(full[k]), Bits(lo[k])) << k;
}

TEST(WavelengthGridTest, PaddedGridDegenerateArguments) {
  WavelengthGrid grid = RGrid();
  EXPECT_EQ(MakePaddedGrid(grid, 0, 0), grid.wave);
  EXPECT_EQ(MakePaddedGrid(grid, -3, -1), grid.wave);
  EXPECT_TRUE(MakePaddedGrid(WavelengthGrid{}, 12, 50).empty());
}

TEST(WavelengthGridTest, GradientOfRGridIsDelta) {
  WavelengthGrid grid = RGrid();
  std::vector<double> g = GridGradient(grid.wave);
  ASSERT_EQ(g.size(), grid.wave.size());
  for (std::size_t i = 0; i < g.size(); ++i) {
    ASSERT_EQ(Bits(g[i]), Bits(0.8000000000001819)) << i;
  }
}

TEST(WavelengthGridTest, GradientMatchesNumpyOnIrregularInput) {
  std::vector<double> w = {1.0, 2.0, 4.0, 7.0};
  // numpy.gradient([1, 2, 4, 7]) = [1, 1.5, 2.5, 3].
  EXPECT_EQ(GridGradient(w), (std::vector<double>{1.0, 1.5, 2.5, 3.0}));
  EXPECT_EQ(GridGradient({3.0, 5.0}), (std::vector<double>{2.0, 2.0}));
  EXPECT_TRUE(GridGradient({3.0}).empty());
  EXPECT_TRUE(GridGradient({}).empty());
}

TEST(WavelengthGridTest, BadInputsAreInvalidArgument) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  struct Case {
    double wmin, wmax, dw;
    const char* why;
  };
  const Case cases[] = {
      {5760, 7620, 0, "dw must be > 0"},
      {5760, 7620, -0.8, "dw must be > 0"},
      {nan, 7620, 0.8, "finite"},
      {5760, nan, 0.8, "finite"},
      {5760, 7620, nan, "finite"},
      {5760, inf, 0.8, "finite"},
      {-inf, 7620, 0.8, "finite"},
      {7620, 5760, 0.8, "wmax must be >= wmin"},
      {5760, 7620, 1e-6, "too many"},
      {0, 1e300, 1e-300, "too many"},
      {5760, 5760, 0.8, "fewer than 2"},
  };
  for (const Case& c : cases) {
    auto g = MakeOutputGrid(c.wmin, c.wmax, c.dw);
    ASSERT_FALSE(g.ok()) << c.wmin << " " << c.wmax << " " << c.dw;
    EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(g.status().message().find(c.why), std::string::npos) << g.status();
  }
  // A million bins is the limit, not beyond it.
  EXPECT_TRUE(MakeOutputGrid(0.0, 999'999.0, 1.0).ok());
  EXPECT_FALSE(MakeOutputGrid(0.0, 1'000'000.0, 1.0).ok());
}

}  // namespace
}  // namespace spexd::core
