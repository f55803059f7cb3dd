// Replays the batched-call layout of cuda/batch_layout.cc on the host with naive
// arithmetic (the pointers are host addresses here): C's core diagonal blocks must equal
// the blocks of M^{-1}, whatever the stale upper triangle holds. Needs no GPU.
#include "cuda/batch_layout.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/patch_plan.h"
#include "gtest/gtest.h"

namespace spexd::cuda {
namespace {

core::PatchPlan SmallPlan() {
  core::PatchPlan plan;
  plan.nwavetot = 4;
  plan.nper = 2;
  plan.nbundles = 1;
  plan.bundlesize = 6;
  // Sub-bundle shapes as in spec §2.5: first (no spectrum below), middle, last.
  const int shapes[3][2] = {{3, 0}, {4, 1}, {3, 1}};
  plan.bundle_first_patch = {0};
  for (int rep = 0; rep < 2; ++rep) {
    for (const auto& sh : shapes) {
      core::PatchDesc d{};
      d.nspectot = sh[0];
      d.core_row = sh[1];
      d.n = d.nspectot * plan.nwavetot;
      plan.patches.push_back(d);
      plan.max_n = std::max(plan.max_n, d.n);
    }
  }
  plan.patches[4].skipped = core::kSkipBottomEdge;
  plan.bundle_first_patch.push_back(static_cast<int32_t>(plan.patches.size()));
  return plan;
}

double* P(uint64_t a) { return reinterpret_cast<double*>(a); }

// C = alpha op(A) B + beta C, column-major.
void NaiveGemm(const BatchedCall& c, const std::vector<uint64_t>& ptrs) {
  for (int b = 0; b < c.count; ++b) {
    const double* A = P(ptrs[c.a_off + b]);
    const double* B = P(ptrs[c.b_off + b]);
    double* C = P(ptrs[c.c_off + b]);
    std::vector<double> out(static_cast<std::size_t>(c.m) * c.n);
    for (int j = 0; j < c.n; ++j) {
      for (int i = 0; i < c.m; ++i) {
        double s = 0;
        for (int k = 0; k < c.k; ++k) {
          const double a = c.transa ? A[k + static_cast<std::size_t>(i) * c.lda]
                                    : A[i + static_cast<std::size_t>(k) * c.lda];
          s += a * B[k + static_cast<std::size_t>(j) * c.ldb];
        }
        out[i + static_cast<std::size_t>(j) * c.m] = c.alpha * s;
      }
    }
    for (int j = 0; j < c.n; ++j) {
      for (int i = 0; i < c.m; ++i) C[i + static_cast<std::size_t>(j) * c.ldc] = out[i + static_cast<std::size_t>(j) * c.m];
    }
  }
}

// Dense inverse of an SPD matrix by Gauss-Jordan (reference only).
std::vector<double> Inverse(std::vector<double> a, int n) {
  std::vector<double> inv(static_cast<std::size_t>(n) * n, 0.0);
  for (int i = 0; i < n; ++i) inv[i + static_cast<std::size_t>(i) * n] = 1.0;
  for (int c = 0; c < n; ++c) {
    const double piv = a[c + static_cast<std::size_t>(c) * n];
    for (int j = 0; j < n; ++j) {
      a[c + static_cast<std::size_t>(j) * n] /= piv;
      inv[c + static_cast<std::size_t>(j) * n] /= piv;
    }
    for (int r = 0; r < n; ++r) {
      if (r == c) continue;
      const double f = a[r + static_cast<std::size_t>(c) * n];
      for (int j = 0; j < n; ++j) {
        a[r + static_cast<std::size_t>(j) * n] -= f * a[c + static_cast<std::size_t>(j) * n];
        inv[r + static_cast<std::size_t>(j) * n] -= f * inv[c + static_cast<std::size_t>(j) * n];
      }
    }
  }
  return inv;
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
      EXPECT_LE(plan.patches[e[i - 1].patch].n, plan.patches[e[i].patch].n);
    }
  }
}

TEST(BatchLayout, ReplayGivesCoreBlocksOfTheInverse) {
  core::PatchPlan plan = SmallPlan();
  const int nt = plan.nwavetot, ld = plan.max_n + 1;  // ld > n on purpose
  const int nb = MaxBlocks(plan);
  std::vector<RunEntry> entries = MakeBatchEntries(plan, {0}, 0.0);
  const int nslots = static_cast<int>(entries.size());
  std::vector<double> m(static_cast<std::size_t>(nslots) * ld * ld), x(static_cast<std::size_t>(nslots) * ld);
  const int64_t t_stride = static_cast<int64_t>(nb) * nt * nt;
  std::vector<double> t(static_cast<std::size_t>(nslots * t_stride)), c(static_cast<std::size_t>(nslots) * plan.nper * nt * nt);
  SlotAddresses s;
  s.m = reinterpret_cast<uint64_t>(m.data());
  s.x = reinterpret_cast<uint64_t>(x.data());
  s.t = reinterpret_cast<uint64_t>(t.data());
  s.c = reinterpret_cast<uint64_t>(c.data());
  s.ld = ld;
  s.t_stride = t_stride;
  RunLayout layout = BuildRunLayout(plan, entries, s, /*library_leaf=*/true);
  ASSERT_LE(layout.ptrs.size(), MaxPointerCount(plan, nslots));

  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<std::vector<double>> ref(static_cast<std::size_t>(nslots));
  for (const RunEntry& e : layout.entries) {
    const int n = plan.patches[e.patch].n;
    double* a = m.data() + static_cast<std::size_t>(e.slot) * ld * ld;
    std::vector<double> g(static_cast<std::size_t>(n) * n), spd(static_cast<std::size_t>(n) * n, 0.0);
    for (double& v : g) v = u(rng);
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < n; ++j) {
        double sum = i == j ? 0.5 * n : 0.0;
        for (int k = 0; k < n; ++k) sum += g[i + static_cast<std::size_t>(k) * n] * g[j + static_cast<std::size_t>(k) * n];
        spd[i + static_cast<std::size_t>(j) * n] = sum;
      }
    }
    ref[static_cast<std::size_t>(e.slot)] = Inverse(spd, n);
    // Stale data everywhere except the lower triangle (potrf reads/writes only that).
    for (int j = 0; j < ld; ++j) {
      for (int i = 0; i < ld; ++i) {
        a[i + static_cast<std::size_t>(j) * ld] =
            (i >= j && i < n) ? spd[i + static_cast<std::size_t>(j) * n] : std::numeric_limits<double>::quiet_NaN();
      }
    }
    // potrf (lower, in place).
    for (int j = 0; j < n; ++j) {
      double d = a[j + static_cast<std::size_t>(j) * ld];
      for (int k = 0; k < j; ++k) d -= a[j + static_cast<std::size_t>(k) * ld] * a[j + static_cast<std::size_t>(k) * ld];
      d = std::sqrt(d);
      a[j + static_cast<std::size_t>(j) * ld] = d;
      for (int i = j + 1; i < n; ++i) {
        double v = a[i + static_cast<std::size_t>(j) * ld];
        for (int k = 0; k < j; ++k) v -= a[i + static_cast<std::size_t>(k) * ld] * a[j + static_cast<std::size_t>(k) * ld];
        a[i + static_cast<std::size_t>(j) * ld] = v / d;
      }
    }
  }
  // Zero blocks (ZeroUpperBlocksKernel) and library leaves (identity, trsm, copy back).
  for (const RunEntry& e : layout.entries) {
    const core::PatchDesc& d = plan.patches[e.patch];
    double* a = m.data() + static_cast<std::size_t>(e.slot) * ld * ld;
    for (int i = 0; i < nb; ++i) {
      for (int k = 0; k < nb; ++k) {
        if (!NeedsZeroBlock(i, k, d.core_row, d.nspectot)) continue;
        for (int r = 0; r < nt; ++r) {
          for (int cc = 0; cc < nt; ++cc) a[(i * nt + r) + static_cast<std::size_t>(k * nt + cc) * ld] = 0.0;
        }
      }
    }
  }
  const BatchedCall& lt = layout.leaf_trsm;
  ASSERT_GT(lt.count, 0);
  for (int b = 0; b < lt.count; ++b) {
    const double* L = P(layout.ptrs[lt.a_off + b]);
    double* B = P(layout.ptrs[lt.b_off + b]);
    for (int j = 0; j < nt; ++j) {
      for (int i = 0; i < nt; ++i) {
        double v = i == j ? 1.0 : 0.0;
        for (int k = 0; k < i; ++k) v -= L[i + static_cast<std::size_t>(k) * lt.lda] * B[k + static_cast<std::size_t>(j) * lt.ldb];
        B[i + static_cast<std::size_t>(j) * lt.ldb] = v / L[i + static_cast<std::size_t>(i) * lt.lda];
      }
    }
    // CopyLeafBlocksKernel: the B block goes back onto the diagonal block of L.
    double* dst = const_cast<double*>(L);
    for (int j = 0; j < nt; ++j) {
      for (int i = 0; i < nt; ++i) dst[i + static_cast<std::size_t>(j) * lt.lda] = B[i + static_cast<std::size_t>(j) * lt.ldb];
    }
  }
  for (const auto& step : layout.trtri) {
    for (const BatchedCall& call : step) NaiveGemm(call, layout.ptrs);
  }
  for (const BatchedCall& call : layout.gram) NaiveGemm(call, layout.ptrs);

  for (const RunEntry& e : layout.entries) {
    const core::PatchDesc& d = plan.patches[e.patch];
    const std::vector<double>& inv = ref[static_cast<std::size_t>(e.slot)];
    for (int sp = 0; sp < plan.nper; ++sp) {
      const int j = d.core_row + sp;
      const double* cb = c.data() + (static_cast<std::size_t>(e.slot) * plan.nper + sp) * nt * nt;
      for (int cc = 0; cc < nt; ++cc) {
        for (int r = 0; r < nt; ++r) {
          const double want = inv[(j * nt + r) + static_cast<std::size_t>(j * nt + cc) * d.n];
          EXPECT_NEAR(cb[r + static_cast<std::size_t>(cc) * nt], want, 1e-12 * (1 + std::fabs(want)))
              << "slot " << e.slot << " block " << sp << " (" << r << "," << cc << ")";
        }
      }
    }
  }
  // potrf/potrs pointers: one call per distinct n, A at the slot matrix, B at its x.
  ASSERT_EQ(layout.potrf.size(), 2u);
  for (const BatchedCall& call : layout.potrf) {
    for (int b = 0; b < call.count; ++b) {
      const RunEntry& e = layout.entries[static_cast<std::size_t>(call.entry_begin + b)];
      EXPECT_EQ(plan.patches[e.patch].n, call.n);
      EXPECT_EQ(P(layout.ptrs[call.a_off + b]), m.data() + static_cast<std::size_t>(e.slot) * ld * ld);
      EXPECT_EQ(P(layout.ptrs[call.b_off + b]), x.data() + static_cast<std::size_t>(e.slot) * ld);
    }
  }
}

}  // namespace
}  // namespace spexd::cuda
