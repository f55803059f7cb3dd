// Replays the batched-call layout of cuda/kernels/batch_layout.cc on the host (layout_replay.h):
// C's core diagonal blocks must equal the blocks of M^{-1}, whatever the stale upper
// triangle holds, through the tiled Cholesky; the tiled factor must equal an unblocked
// potrf. Needs no GPU.
#include "cuda/kernels/batch_layout.h"

#include <algorithm>
#include <cmath>
#include <tuple>
#include <utility>
#include <vector>

#include "core/plan/patch_plan.h"
#include "gtest/gtest.h"
#include "tests/cuda/kernels/layout_replay.h"

namespace spexd::cuda {
namespace {

using testing::Replay;
using testing::SmallPlan;

// The matrices are 0.5 n I + G G^T with G uniform in [-1, 1]: condition numbers below
// ~10, entries O(n). Two Cholesky orders or two inversions then agree to a few ulp times
// n; 1e-12 relative leaves room for that and still fails any indexing error (O(1)).
constexpr double kTol = 1e-12;

void ExpectCoreBlocksOfInverse(const Replay& r) {
  const int nt = r.nt;
  for (const RunEntry& e : r.layout.entries) {
    const core::PatchDesc& d = r.plan.patches[e.patch];
    const std::vector<double>& inv = r.inverse[static_cast<std::size_t>(e.slot)];
    for (int sp = 0; sp < r.plan.nper; ++sp) {
      const int j = d.core_row + sp;
      const double* cb = r.c.data() + (static_cast<std::size_t>(e.slot) * r.plan.nper + sp) * nt * nt;
      for (int cc = 0; cc < nt; ++cc) {
        for (int row = 0; row < nt; ++row) {
          const double want = inv[(j * nt + row) + static_cast<std::size_t>(j * nt + cc) * d.n];
          EXPECT_NEAR(cb[row + static_cast<std::size_t>(cc) * nt], want, kTol * (1 + std::fabs(want)))
              << "slot " << e.slot << " block " << sp << " (" << row << "," << cc << ")";
        }
      }
    }
  }
}

// The tiled factor of every entry of `r` against the unblocked `ref`, except the blocks
// more than max(band, 1) below the diagonal (NaN there where `nan_past_band`: not written)
// and the diagonal blocks the leaves X_kk overwrote (Replay::IsLeafInPlace).
void ExpectFactorMatches(const Replay& r, const Replay& ref, int band) {
  for (const RunEntry& e : r.layout.entries) {
    const std::vector<double> got = r.Factor(e.slot), want = ref.Factor(e.slot);
    ASSERT_EQ(got.size(), want.size());
    const int n = r.plan.patches[e.patch].n;
    for (std::size_t i = 0; i < got.size(); ++i) {
      const int row = static_cast<int>(i % static_cast<std::size_t>(n));
      const int col = static_cast<int>(i / static_cast<std::size_t>(n));
      if (row / r.nt - col / r.nt > std::max(band, 1)) {
        if (r.nan_past_band) {
          EXPECT_TRUE(std::isnan(got[i])) << "past the band, written: slot " << e.slot << " element " << i;
        }
        continue;
      }
      if (row / r.nt == col / r.nt && r.IsLeafInPlace(e, row / r.nt)) continue;
      EXPECT_NEAR(got[i], want[i], kTol * (1 + std::fabs(want[i]))) << "slot " << e.slot << " element " << i;
    }
  }
}

// Every GEMM call of the layouts: its strided runs (where it has them) give each entry the
// addresses of its pointer arrays, cover the entries in order, and a whole batch's calls
// are mostly strided (so that the test cannot pass with every call left to the arrays).
void ExpectStridedRunsMatchPointers(const RunLayout& layout) {
  int calls = 0, strided = 0;
  auto check = [&](const BatchedCall& c) {
    ++calls;
    if (c.strided.empty()) return;
    ++strided;
    int next = 0;
    for (const StridedRun& r : c.strided) {
      EXPECT_EQ(r.first, next);
      EXPECT_GT(r.count, 0);
      next += r.count;
    }
    EXPECT_EQ(next, c.count);
    for (int b = 0; b < c.count; ++b) {
      const testing::Operands o = testing::EntryOperands(c, layout.ptrs, b);
      EXPECT_EQ(o.a, layout.ptrs[static_cast<std::size_t>(c.a_off + b)]) << "entry " << b;
      EXPECT_EQ(o.b, layout.ptrs[static_cast<std::size_t>(c.b_off + b)]) << "entry " << b;
      EXPECT_EQ(o.c, layout.ptrs[static_cast<std::size_t>(c.c_off + b)]) << "entry " << b;
    }
  };
  for (const auto* steps : {&layout.chol_update, &layout.trtri}) {
    for (const auto& step : *steps) {
      for (const BatchedCall& c : step) check(c);
    }
  }
  EXPECT_GT(2 * strided, calls) << strided << " of " << calls << " calls strided";
}

TEST(BatchLayout, EntriesSortedBySizeAndSkipsSkipped) {
  core::PatchPlan plan = SmallPlan();
  std::vector<RunEntry> e = MakeBatchEntries(plan, {0}, 0.5);
  ASSERT_EQ(e.size(), 5u);
  for (std::size_t i = 0; i < e.size(); ++i) {
    EXPECT_EQ(e[i].slot, static_cast<int>(i));
    EXPECT_NE(e[i].patch, 4);
    EXPECT_EQ(e[i].regularize, 0.5);
    if (i > 0) {
      const core::PatchDesc& p0 = plan.patches[e[i - 1].patch];
      const core::PatchDesc& p1 = plan.patches[e[i].patch];
      EXPECT_TRUE(p0.n < p1.n || (p0.n == p1.n && p0.core_row <= p1.core_row)) << i;
    }
  }
}

TEST(BatchLayout, TiledCholeskyEqualsPotrfAndGivesTheInverse) {
  LayoutChoices tiled;
  Replay r(SmallPlan(), tiled);
  ASSERT_LE(r.layout.ptrs.size(), MaxPointerCount(r.plan, r.nslots));
  // Step k updates the entries with more than k blocks, one call per n: m = n - k nt.
  ASSERT_EQ(r.layout.chol_update.size(), static_cast<std::size_t>(r.nb - 1));
  for (int k = 1; k < r.nb; ++k) {
    int want = 0, got = 0;
    for (const RunEntry& e : r.layout.entries) want += r.plan.patches[e.patch].nspectot > k;
    for (const BatchedCall& call : r.layout.chol_update[static_cast<std::size_t>(k - 1)]) {
      got += call.count;
      EXPECT_EQ(call.k, k * r.nt);
      EXPECT_EQ(call.n, r.nt);
      EXPECT_EQ((call.m + call.k) % r.nt, 0);
    }
    EXPECT_EQ(got, want) << "step " << k;
  }
  Replay ref(SmallPlan(), LayoutChoices{});
  ref.FillSpd(11);
  ref.HostPotrf();
  r.FillSpd(11);
  r.TiledCholesky();
  ExpectFactorMatches(r, ref, r.nb);  // SmallPlan couples every spectrum (no band)
  r.InvertBlocks();
  ExpectCoreBlocksOfInverse(r);
  ExpectStridedRunsMatchPointers(r.layout);
}

// Band B (PatchPlan::coupled_band): only spectra up to B apart couple. The updates,
// panels and the inversion's first GEMMs stay inside the band, the blocks past it are left
// as they are (zero), and the factor and the inverse blocks still match the dense references.
class BandedLayout : public ::testing::TestWithParam<int> {};

// The (row block, column block) of M that a call operand's device address points into,
// within its slot's ld x ld matrix.
std::pair<int, int> BlockOf(const Replay& r, uint64_t address) {
  const int64_t off = static_cast<int64_t>((address - reinterpret_cast<uint64_t>(r.m.data())) / sizeof(double) %
                                           (static_cast<uint64_t>(r.ld) * r.ld));
  return {static_cast<int>(off % r.ld) / r.nt, static_cast<int>(off / r.ld) / r.nt};
}

// SmallPlan with a 6-block patch added (block steps reach past band 2), every patch at
// `band`.
core::PatchPlan WideBandPlan(int band) {
  core::PatchPlan plan = SmallPlan();
  core::PatchDesc wide = plan.patches[1];
  wide.nspectot = 6;
  wide.n = wide.nspectot * plan.nwavetot;
  plan.patches.push_back(wide);
  plan.max_n = std::max(plan.max_n, wide.n);
  plan.bundle_first_patch.back() = static_cast<int32_t>(plan.patches.size());
  plan.coupled_band.assign(plan.patches.size(), band);
  return plan;
}

TEST_P(BandedLayout, TiledCholeskyEqualsPotrf) {
  const int band = GetParam();
  const core::PatchPlan plan = WideBandPlan(band);
  LayoutChoices tiled;
  Replay r(plan, tiled);
  ASSERT_GT(r.nb, band + 1) << "the plan must have blocks past the band";
  for (const auto& step : r.layout.chol_update) {
    for (const BatchedCall& call : step) {
      EXPECT_LE(call.m, (band + 1) * r.nt);
      EXPECT_LE(call.k, band * r.nt);
    }
  }
  for (std::size_t s = 0; s < r.layout.trtri.size(); ++s) {
    const int step = static_cast<int>(s) + 1;
    ASSERT_EQ(r.layout.trtri[s].size(), 2u) << "one band: one gemm 1 and one gemm 2";
    const BatchedCall& g1 = r.layout.trtri[s][0];  // P = L[j+1:j+1+b, j] X_jj
    const BatchedCall& g2 = r.layout.trtri[s][1];  // X[j+1:, j] = -X[j+1:, j+1:j+1+b] P
    const int b = std::max(1, std::min(band, step));  // L[j+1, j] is read even at band 0
    EXPECT_EQ(g1.m, b * r.nt) << "step " << step;
    EXPECT_EQ(g1.k, r.nt);
    EXPECT_EQ(g2.m, step * r.nt);
    EXPECT_EQ(g2.k, b * r.nt) << "step " << step;
  }
  // No update multiplies a block past the band (each is zero): every call's rows i and
  // inner blocks j (from its A operand's address) satisfy i - j <= band.
  for (const auto& step : r.layout.chol_update) {
    for (const BatchedCall& call : step) {
      for (int b = 0; b < call.count; ++b) {
        const auto [row0, col0] = BlockOf(r, testing::EntryOperands(call, r.layout.ptrs, b).a);
        EXPECT_LE(row0 + call.m / r.nt - 1 - col0, band) << "rows from " << row0 << ", inner from " << col0;
      }
    }
  }
  Replay ref(plan, LayoutChoices{});
  ref.FillSpd(5);
  ref.HostPotrf();
  // The blocks past the band are NaN (the normal equations leave them unwritten): the
  // factor must not read them.
  r.nan_past_band = true;
  r.FillSpd(5);
  r.TiledCholesky();
  for (const RunEntry& e : r.layout.entries) EXPECT_EQ(e.band, band);
  ExpectFactorMatches(r, ref, band);
  r.InvertBlocks();
  ExpectCoreBlocksOfInverse(r);
  // P_j = L[j+1:, j] X_jj left by the panel (panel_p): trtri is gemm 2 alone, reading P_j
  // where the panel put it, and C's core blocks still match the dense inverse.
  LayoutChoices fused = tiled;
  fused.panel_p = true;
  Replay pp(plan, fused);
  ASSERT_TRUE(pp.PanelP());
  ASSERT_FALSE(pp.layout.trtri.empty());
  for (const auto& step : pp.layout.trtri) {
    ASSERT_EQ(step.size(), 1u) << "one band: one gemm 2 and no gemm 1";
    EXPECT_EQ(step[0].alpha, -1.0);
  }
  // Every P_j fits the slot's scratch as WorkspaceSpec sizes it (nb leaves, nb - 1 P_j).
  for (const RunEntry& e : pp.layout.entries) {
    const core::PatchDesc& d = pp.plan.patches[e.patch];
    for (int j = 0; j < d.nspectot; ++j) {
      if (!NeedsPanelP(j, d.core_row, d.nspectot)) continue;
      const int64_t end = PanelPOffset(j, pp.p_base, pp.p_band, pp.nt) +
                          static_cast<int64_t>(PanelPBlocks(j, e.band, d.nspectot)) * pp.nt * pp.nt;
      EXPECT_LE(end, pp.t_stride) << "slot " << e.slot << " P_" << j;
      EXPECT_LE(PanelPBlocks(j, e.band, d.nspectot), pp.p_band);
    }
  }
  pp.nan_past_band = true;
  pp.FillSpd(5);
  pp.TiledCholesky();
  pp.InvertBlocks();
  ExpectCoreBlocksOfInverse(pp);
}

// Replays `r`'s factorisation and inversion on an SPD matrix NaN past the band and checks the
// factor against LAPACK's potrf and C's core blocks against the dense inverse.
void ExpectDenseReferencesWithNanPastBand(const core::PatchPlan& plan, int band, Replay* r) {
  Replay ref(plan, LayoutChoices{});
  ref.FillSpd(5);
  ref.HostPotrf();
  r->nan_past_band = true;
  r->FillSpd(5);
  r->TiledCholesky();
  ExpectFactorMatches(*r, ref, band);
  r->InvertBlocks();
  ExpectCoreBlocksOfInverse(*r);
}

// The diagonal blocks' updates in the factor kernel (LayoutChoices::diag_update_in_factor,
// RunArgs::diag_update): no chol_update call writes a diagonal block, and the factor and
// C's core blocks still match the dense references (NaN past the band).
TEST_P(BandedLayout, DiagonalUpdatesInTheFactor) {
  const int band = GetParam();
  const core::PatchPlan plan = WideBandPlan(band);
  LayoutChoices choices;
  choices.panel_p = true;
  choices.diag_update_in_factor = true;
  Replay r(plan, choices);
  for (std::size_t s = 0; s < r.layout.chol_update.size(); ++s) {
    const int k = static_cast<int>(s) + 1;
    for (const BatchedCall& call : r.layout.chol_update[s]) {
      for (int b = 0; b < call.count; ++b) {
        EXPECT_GT(BlockOf(r, testing::EntryOperands(call, r.layout.ptrs, b).c).first, k)
            << "step " << k << ": a diagonal block";
      }
    }
  }
  if (band <= 1) {  // one block below the diagonal at most: every update is the factor's
    for (const auto& step : r.layout.chol_update) EXPECT_TRUE(step.empty());
  }
  ExpectDenseReferencesWithNanPastBand(plan, band, &r);
}

// Every update in the factor and panel kernels (LayoutChoices::diag_update_in_factor and
// panel_update, RunArgs::diag_update and panel_update, as the CUDA backend runs nt <= 80):
// no chol_update call at all, and the factor and C's core blocks still match the dense
// references.
TEST_P(BandedLayout, UpdatesInTheFactorAndThePanel) {
  const int band = GetParam();
  const core::PatchPlan plan = WideBandPlan(band);
  LayoutChoices choices;
  choices.panel_p = true;
  choices.diag_update_in_factor = true;
  choices.panel_update = true;
  Replay r(plan, choices);
  for (const auto& step : r.layout.chol_update) EXPECT_TRUE(step.empty());
  ExpectDenseReferencesWithNanPastBand(plan, band, &r);
}

// Band 0: spectra that do not couple at all (fibres far apart, or narrow stamps).
INSTANTIATE_TEST_SUITE_P(Bands, BandedLayout, ::testing::Values(0, 1, 2, 3));

}  // namespace
}  // namespace spexd::cuda
