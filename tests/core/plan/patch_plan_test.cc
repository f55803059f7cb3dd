#include "core/plan/patch_plan.h"

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <numeric>

#include "core/io/psf.h"
#include "gtest/gtest.h"
#include "tests/bundled_psf_test.h"
#include "tests/psf_variants.h"
#include "tests/test_support.h"

namespace spexd::core {
namespace {

class PatchPlanTest : public testing::BundledPsfTest {
 protected:
  static ExtractionParams RParams() {
    ExtractionParams p;  // defaults: r grid, 500 fibres, 25/5/50, wavepad 10, 0.2, 0.8
    return p;
  }
  // The r grid for fibres [0, nspec) on [wmin, wmax] (the PSF variants' tests).
  static ExtractionParams RParams(int nspec, double wmin, double wmax) {
    ExtractionParams p = RParams();
    p.nspec = nspec;
    p.wmin = wmin;
    p.wmax = wmax;
    return p;
  }
};

// Whole r frame on the bundled PSF: the counts and window sizes measured in spec §2.6/§6.
TEST_F(PatchPlanTest, FullRFrameMatchesSpecGeometry) {
  auto plan = BuildPatchPlan(RParams(), *psf_, 4128, 4114);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->nwave, 2326);
  EXPECT_EQ(plan->fullwave.size(), 2400u);
  EXPECT_EQ(plan->wavepad_eff, 12);
  EXPECT_EQ(plan->nwavetot, 74);
  EXPECT_EQ(plan->ndiag, 5);
  ASSERT_EQ(plan->patches.size(), 4700u);
  EXPECT_EQ(plan->bundle_first_patch.back(), 4700);
  int n444 = 0, n518 = 0, ymin = 1 << 30, ymax = 0;
  int nymin = 1 << 30, nymax = 0, nxmin = 1 << 30, nxmax = 0, npmin = 1 << 30, npmax = 0;
  double npix_sum = 0;
  for (const PatchDesc& d : plan->patches) {
    EXPECT_EQ(d.skipped, kSkipNone);
    if (d.n == 444) ++n444;
    if (d.n == 518) ++n518;
    nymin = std::min(nymin, d.ny); nymax = std::max(nymax, d.ny);
    nxmin = std::min(nxmin, d.nx); nxmax = std::max(nxmax, d.nx);
    npmin = std::min(npmin, d.ny * d.nx); npmax = std::max(npmax, d.ny * d.nx);
    ymin = std::min(ymin, d.y0); ymax = std::max(ymax, d.y0 + d.ny);
    npix_sum += d.ny * d.nx;
  }
  EXPECT_EQ(n444, 1880);
  EXPECT_EQ(n518, 2820);
  // Spec §2.6.6: ny 107–129, nx 53–62, npix 5671–7936, sum 31.8 M; rows 248/249 … 3952.
  EXPECT_EQ(nymin, 107);
  EXPECT_EQ(nymax, 129);
  EXPECT_EQ(nxmin, 53);
  EXPECT_EQ(nxmax, 62);
  // The spec's npix range 5671–7936 (mean 6764) spans both of its test PSFs; this one's
  // smallest window is 5724 (the case-A parity test pins every window exactly).
  EXPECT_GE(npmin, 5671);
  EXPECT_EQ(npmax, 7936);
  EXPECT_NEAR(npix_sum / 1e6, 31.8, 0.05);
  EXPECT_NEAR(npix_sum / 4700, 6764, 6764 * 1e-3);
  EXPECT_GE(ymin, 248);
  EXPECT_LE(ymin, 249);
  EXPECT_EQ(ymax, 3952);
  EXPECT_EQ(plan->max_n, 518);
  EXPECT_EQ(plan->max_npix, 7936);
}

TEST_F(PatchPlanTest, SpectralPaddingAndKeepRanges) {
  auto plan = BuildPatchPlan(RParams(), *psf_, 4128, 4114);
  ASSERT_TRUE(plan.ok()) << plan.status();
  // Spec §2.5: sub-bundle 0 -> spectra 0..5, 1 -> 4..10, 4 -> 19..24.
  const int per_sub = 47;
  const PatchDesc& s0 = plan->patches[0];
  EXPECT_EQ(s0.fiber0, 0); EXPECT_EQ(s0.nspectot, 6); EXPECT_EQ(s0.core_row, 0);
  const PatchDesc& s1 = plan->patches[per_sub];
  EXPECT_EQ(s1.fiber0, 4); EXPECT_EQ(s1.nspectot, 7); EXPECT_EQ(s1.core_row, 1);
  EXPECT_EQ(s1.out_row, 5);
  const PatchDesc& s4 = plan->patches[4 * per_sub];
  EXPECT_EQ(s4.fiber0, 19); EXPECT_EQ(s4.nspectot, 6); EXPECT_EQ(s4.core_row, 1);
  // Second bundle starts at fibre 25.
  const PatchDesc& b1 = plan->patches[5 * per_sub];
  EXPECT_EQ(b1.bundle, 1); EXPECT_EQ(b1.fiber0, 25); EXPECT_EQ(b1.out_row, 25);
  // Last patch of a sub-bundle: output 2300..2325 (nkeep 26), fullwave [2300, 2374).
  const PatchDesc& last = plan->patches[per_sub - 1];
  EXPECT_EQ(last.out_col, 2300);
  EXPECT_EQ(last.nkeep, 26);
  EXPECT_EQ(last.wave0, 2300);
  EXPECT_EQ(last.wave0 + plan->nwavetot, 2374);
  // Cores tile every output bin of every fibre exactly once (spec §2.12).
  std::vector<int> hits(static_cast<std::size_t>(plan->nspec) * plan->nwave, 0);
  for (const PatchDesc& d : plan->patches) {
    for (int s = 0; s < plan->nper; ++s) {
      for (int w = 0; w < d.nkeep; ++w) ++hits[(d.out_row + s) * plan->nwave + d.out_col + w];
    }
  }
  EXPECT_TRUE(std::all_of(hits.begin(), hits.end(), [](int h) { return h == 1; }));
}

// The trimming arithmetic of spec §2.6.3, replicated literally for every patch.
TEST_F(PatchPlanTest, WindowTrimmingUsesFloat64Truncation) {
  auto plan = BuildPatchPlan(RParams(), *psf_, 4128, 4114);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(static_cast<int>((20 - 0) * (1.0 - 0.8)), 3);  // 0.19999999999999996 * 20
  for (const PatchDesc& d : plan->patches) {
    int ypadmin = 1 << 30, ypadmax = -(1 << 30), yc0 = 1 << 30, yc1 = -(1 << 30);
    for (int s = 0; s < d.nspectot; ++s) {
      for (int w = 0; w < plan->nwavetot; ++w) {
        int y = plan->corner_y(d.fiber0 + s, d.wave0 + w);
        ypadmin = std::min(ypadmin, y); ypadmax = std::max(ypadmax, y + plan->stamp_ny);
        if (w >= plan->wavepad_eff && w < plan->wavepad_eff + plan->nwavestep) {
          yc0 = std::min(yc0, y); yc1 = std::max(yc1, y + plan->stamp_ny);
        }
      }
    }
    int lo = static_cast<int>((yc0 - ypadmin) * (1.0 - 0.8));
    int hi = static_cast<int>((yc1 - ypadmin) + (ypadmax - yc1) * 0.8);
    ASSERT_EQ(d.y0, ypadmin + lo);
    ASSERT_EQ(d.ny, hi - lo);
  }
}

// Edge handling differs between the paths (spec §2.6.5, §2.17): on a cut image whose top
// edge crosses the last patches, compat cpu skips them and compat gpu truncates them.
TEST_F(PatchPlanTest, TopEdgeCompatRules) {
  ExtractionParams p = RParams();
  p.nspec = 25;
  const int height = 3900;  // windows reach row 3952
  p.compat = Compat::kCpu;
  auto cpu = BuildPatchPlan(p, *psf_, height, 4114);
  p.compat = Compat::kGpu;
  auto gpu = BuildPatchPlan(p, *psf_, height, 4114);
  ASSERT_TRUE(cpu.ok() && gpu.ok());
  int cpu_skipped = 0, gpu_truncated = 0;
  for (std::size_t i = 0; i < cpu->patches.size(); ++i) {
    const PatchDesc& c = cpu->patches[i];
    const PatchDesc& g = gpu->patches[i];
    if (c.skipped == kSkipTopEdge) {
      ++cpu_skipped;
      EXPECT_EQ(g.skipped, kSkipNone);
      EXPECT_EQ(g.y0 + g.ny, height);
      ++gpu_truncated;
    } else {
      EXPECT_EQ(c.skipped, kSkipNone);
      EXPECT_EQ(c.ny, g.ny);
    }
  }
  EXPECT_GT(cpu_skipped, 0);
  EXPECT_EQ(cpu_skipped, gpu_truncated);
}

TEST_F(PatchPlanTest, BottomEdgeAndXEdgeAreSkipped) {
  ExtractionParams p = RParams();
  p.nspec = 25;
  p.wmin = 5545.0;  // the padding reaches below row 0 at the blue end of the PSF domain
  p.wmax = 5700.0;
  auto plan = BuildPatchPlan(p, *psf_, 4128, 4114);
  ASSERT_TRUE(plan.ok()) << plan.status();
  int bottom = 0;
  for (const PatchDesc& d : plan->patches) bottom += d.skipped == kSkipBottomEdge;
  EXPECT_GT(bottom, 0);
  // A narrow image cuts fibres 0-24 (x ~ 20-230) in x: those patches are skipped, not read
  // out of bounds.
  auto narrow = BuildPatchPlan(RParams(), *psf_, 4128, 100);
  ASSERT_TRUE(narrow.ok());
  int xedge = 0;
  for (const PatchDesc& d : narrow->patches) xedge += d.skipped == kSkipXEdge;
  EXPECT_GT(xedge, 0);
}

TEST_F(PatchPlanTest, BadParametersAreRejected) {
  struct Case {
    const char* what;
    void (*mutate)(ExtractionParams*);
    const char* message;
  };
  const Case cases[] = {
      {"nspec not multiple", [](ExtractionParams* p) { p->nspec = 30; }, "multiple of bundlesize"},
      {"nspec zero", [](ExtractionParams* p) { p->nspec = 0; }, "nspec"},
      {"specmin misaligned", [](ExtractionParams* p) { p->specmin = 5; p->nspec = 25; }, "specmin"},
      {"subbundles", [](ExtractionParams* p) { p->nsubbundles = 4; }, "nsubbundles"},
      {"too many fibres", [](ExtractionParams* p) { p->specmin = 475; p->nspec = 50; }, "exceed"},
      {"grid off PSF", [](ExtractionParams* p) { p->wmin = 3600; p->wmax = 5800; }, "beyond the PSF domain"},
      {"negative step", [](ExtractionParams* p) { p->nwavestep = -1; }, "nwavestep"},
      {"tiny wavepad", [](ExtractionParams* p) { p->wavepad = 2; p->wavepad_frac = 0; }, "padding"},
  };
  for (const Case& c : cases) {
    ExtractionParams p = RParams();
    c.mutate(&p);
    auto plan = BuildPatchPlan(p, *psf_, 4128, 4114);
    ASSERT_FALSE(plan.ok()) << c.what;
    EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument) << c.what;
    EXPECT_NE(plan.status().message().find(c.message), std::string::npos)
        << c.what << ": " << plan.status().message();
  }
  EXPECT_FALSE(BuildPatchPlan(RParams(), *psf_, 0, 4114).ok());
}

// The band is the widest spectrum distance of an overlapping stamp pair (the test of the
// normal equations): no pair further apart overlaps, so those blocks of A^T N A are zero.
TEST_F(PatchPlanTest, CoupledBandCoversEveryOverlappingStampPair) {
  auto plan = BuildPatchPlan(RParams(), *psf_, 4128, 4114);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->coupled_band.size(), plan->patches.size());
  int checked = 0, max_band = 0;
  for (std::size_t p = 0; p < plan->patches.size(); p += 37) {
    const PatchDesc& d = plan->patches[p];
    const int band = plan->coupled_band[p];
    max_band = std::max(max_band, band);
    int widest = 0;  // brute force: every stamp pair of the patch
    for (int s = 0; s < d.nspectot; ++s) {
      for (int t = s + 1; t < d.nspectot; ++t) {
        for (int w = 0; w < plan->nwavetot; ++w) {
          for (int u = 0; u < plan->nwavetot; ++u) {
            const int dx = plan->corner_x(d.fiber0 + s, d.wave0 + w) - plan->corner_x(d.fiber0 + t, d.wave0 + u);
            const int dy = plan->corner_y(d.fiber0 + s, d.wave0 + w) - plan->corner_y(d.fiber0 + t, d.wave0 + u);
            if (std::abs(dx) < plan->stamp_nx && std::abs(dy) < plan->stamp_ny) widest = std::max(widest, t - s);
          }
        }
      }
    }
    EXPECT_EQ(band, widest) << "patch " << p;
    EXPECT_LT(band, d.nspectot) << "patch " << p;
    ++checked;
  }
  EXPECT_GT(checked, 100);
  EXPECT_GE(max_band, 1);
}

// Traces four times as far apart as DESI's (tests/psf_variants.h): no two spectra of a
// patch couple, the band-0 case of the GPU's banded layout (tests/cuda: band-0 patches).
TEST_F(PatchPlanTest, SpreadTracesGiveBandZero) {
  auto spread = testing::LoadBundledPsfWithSpreadTraces(4);
  ASSERT_NE(spread, nullptr);
  const ExtractionParams p = RParams(100, 6000.0, 6400.0);
  auto plan = BuildPatchPlan(p, *spread, 4128, 4114);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_FALSE(plan->patches.empty());
  for (std::size_t i = 0; i < plan->patches.size(); ++i) {
    const PatchDesc& d = plan->patches[i];
    ASSERT_GE(d.nspectot, 2) << "patch " << i;
    EXPECT_EQ(plan->coupled_band[i], 0) << "patch " << i;
    for (int s = 0; s + 1 < d.nspectot; ++s) {  // brute force: neighbours' stamps apart
      for (int w = 0; w < plan->nwavetot; ++w) {
        const int dx = plan->corner_x(d.fiber0 + s + 1, d.wave0 + w) - plan->corner_x(d.fiber0 + s, d.wave0 + w);
        EXPECT_GE(std::abs(dx), plan->stamp_nx) << "patch " << i << " spectrum " << s;
      }
    }
  }
  // The original PSF couples neighbours in every patch.
  auto dense = BuildPatchPlan(p, *psf_, 4128, 4114);
  ASSERT_TRUE(dense.ok()) << dense.status();
  EXPECT_GE(*std::min_element(dense->coupled_band.begin(), dense->coupled_band.end()), 1);
}

// Y traces stretched five times (tests/psf_variants.h): consecutive wavelengths about
// five times as many rows apart as the original's, near the middle of the CCD, so that
// eight wavelengths' stamps cover more than two of the tensor-core normal equations'
// 404-pixel planes (the chunked path of cuda/kernels/normal_equations_dmma.cu, tests/cuda).
TEST_F(PatchPlanTest, StretchedYTracesGiveTallStampBoxes) {
  auto tall = testing::LoadBundledPsfWithStretchedYTraces(5.0);
  ASSERT_NE(tall, nullptr);
  const ExtractionParams p = RParams(25, 6650.0, 6720.0);
  auto plan = BuildPatchPlan(p, *tall, 4128, 4114);
  ASSERT_TRUE(plan.ok()) << plan.status();
  auto base = BuildPatchPlan(p, *psf_, 4128, 4114);
  ASSERT_TRUE(base.ok()) << base.status();
  const int w0 = plan->patches[0].wave0;
  const int rows = plan->corner_y(0, w0 + 8) - plan->corner_y(0, w0);
  const int base_rows = base->corner_y(0, w0 + 8) - base->corner_y(0, w0);
  EXPECT_NEAR(rows, 5 * base_rows, 2 + 0.1 * rows);
  EXPECT_GT((plan->corner_y(0, w0 + 7) - plan->corner_y(0, w0) + plan->stamp_ny) * plan->stamp_nx,
            2 * 404);
}

}  // namespace
}  // namespace spexd::core
