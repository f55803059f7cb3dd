#include "tests/cuda/kernels/layout_replay.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <random>

#include "core/numerics/patch_numerics.h"

namespace spexd::cuda::testing {
namespace {

double* P(uint64_t a) { return reinterpret_cast<double*>(a); }
std::size_t Z(int64_t v) { return static_cast<std::size_t>(v); }

// Dense inverse of an SPD matrix by Gauss-Jordan (reference only).
std::vector<double> Inverse(std::vector<double> a, int n) {
  std::vector<double> inv(Z(n) * n, 0.0);
  for (int i = 0; i < n; ++i) inv[i + Z(i) * n] = 1.0;
  for (int c = 0; c < n; ++c) {
    const double piv = a[c + Z(c) * n];
    for (int j = 0; j < n; ++j) {
      a[c + Z(j) * n] /= piv;
      inv[c + Z(j) * n] /= piv;
    }
    for (int r = 0; r < n; ++r) {
      if (r == c) continue;
      const double f = a[r + Z(c) * n];
      for (int j = 0; j < n; ++j) {
        a[r + Z(j) * n] -= f * a[c + Z(j) * n];
        inv[r + Z(j) * n] -= f * inv[c + Z(j) * n];
      }
    }
  }
  return inv;
}

}  // namespace

core::PatchPlan SmallPlan() {
  core::PatchPlan plan;
  plan.nwavetot = 4;
  plan.nper = 2;
  plan.nbundles = 1;
  plan.bundlesize = 6;
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

Operands EntryOperands(const BatchedCall& c, const std::vector<uint64_t>& ptrs, int b) {
  if (c.strided.empty()) return {ptrs[Z(c.a_off + b)], ptrs[Z(c.b_off + b)], ptrs[Z(c.c_off + b)]};
  for (const StridedRun& r : c.strided) {
    if (b < r.first || b >= r.first + r.count) continue;
    const uint64_t i = static_cast<uint64_t>(b - r.first), d = sizeof(double);
    return {r.a + i * static_cast<uint64_t>(r.sa) * d, r.b + i * static_cast<uint64_t>(r.sb) * d,
            r.c + i * static_cast<uint64_t>(r.sc) * d};
  }
  std::abort();  // the runs must cover every entry (batch_layout_test checks it)
}

void NaiveGemm(const BatchedCall& c, const std::vector<uint64_t>& ptrs) {
  for (int b = 0; b < c.count; ++b) {
    const Operands o = EntryOperands(c, ptrs, b);
    const double* A = P(o.a);
    const double* B = P(o.b);
    double* C = P(o.c);
    std::vector<double> out(Z(c.m) * c.n);
    for (int j = 0; j < c.n; ++j) {
      for (int i = 0; i < c.m; ++i) {
        double s = 0;
        for (int k = 0; k < c.k; ++k) {
          const double a = c.transa ? A[k + Z(i) * c.lda] : A[i + Z(k) * c.lda];
          const double bb = c.transb ? B[j + Z(k) * c.ldb] : B[k + Z(j) * c.ldb];
          s += a * bb;
        }
        out[i + Z(j) * c.m] = c.alpha * s;
      }
    }
    for (int j = 0; j < c.n; ++j) {
      for (int i = 0; i < c.m; ++i) {
        double& dst = C[i + Z(j) * c.ldc];
        dst = out[i + Z(j) * c.m] + (c.beta != 0.0 ? c.beta * dst : 0.0);
      }
    }
  }
}

Replay::Replay(core::PatchPlan p, LayoutChoices ch) : plan(std::move(p)), choices(ch) {
  nt = plan.nwavetot;
  ld = plan.max_n + 1;  // ld > n on purpose
  nb = MaxBlocks(plan);
  std::vector<RunEntry> entries = MakeBatchEntries(plan, {0}, 0.0);
  nslots = static_cast<int>(entries.size());
  if (PanelP()) p_band = PanelPBand(plan);  // as BatchExtractor sizes the scratch
  p_base = static_cast<int64_t>(nb) * nt * nt;
  t_stride = ScratchStride(nb, nt, p_band);  // as WorkspaceSpec::t_stride
  m.assign(Z(nslots) * ld * ld, 0.0);
  x.assign(Z(nslots) * ld, 0.0);
  t.assign(Z(nslots * t_stride), 0.0);
  c.assign(Z(nslots) * plan.nper * nt * nt, 0.0);
  SlotAddresses s;
  s.m = reinterpret_cast<uint64_t>(m.data());
  s.x = reinterpret_cast<uint64_t>(x.data());
  s.t = reinterpret_cast<uint64_t>(t.data());
  s.c = reinterpret_cast<uint64_t>(c.data());
  s.ld = ld;
  s.t_stride = t_stride;
  s.p_base = p_base;
  s.p_band = p_band;
  layout = BuildRunLayout(plan, entries, s, choices);
  spd.resize(Z(nslots));
  inverse.resize(Z(nslots));
}

void Replay::FillSpd(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  for (const RunEntry& e : layout.entries) {
    const int n = plan.patches[e.patch].n;
    double* a = m.data() + Z(e.slot) * ld * ld;
    std::vector<double> g(Z(n) * n), s(Z(n) * n, 0.0);
    for (double& v : g) v = u(rng);
    if (e.band >= plan.patches[e.patch].nspectot - 1) {
      for (int i = 0; i < n; ++i) {
        for (int j = 0; j < n; ++j) {
          double sum = i == j ? 0.5 * n : 0.0;
          for (int k = 0; k < n; ++k) sum += g[i + Z(k) * n] * g[j + Z(k) * n];
          s[i + Z(j) * n] = sum;
        }
      }
    } else {
      // Block-banded (spectra more than `band` apart uncoupled), SPD by diagonal dominance.
      for (int i = 0; i < n; ++i) {
        for (int j = 0; j < i; ++j) {
          if (std::abs(i / nt - j / nt) > e.band) continue;
          s[i + Z(j) * n] = s[j + Z(i) * n] = g[i + Z(j) * n];
        }
      }
      for (int i = 0; i < n; ++i) {
        double row = 1.0;
        for (int j = 0; j < n; ++j) row += j == i ? 0.0 : std::fabs(s[i + Z(j) * n]);
        s[i + Z(i) * n] = row;
      }
    }
    for (int j = 0; j < ld; ++j) {
      for (int i = 0; i < ld; ++i) {
        const bool past_band = nan_past_band && i / nt - j / nt > TrailingReadBand(e.band);
        a[i + Z(j) * ld] = (i >= j && i < n && !past_band) ? s[i + Z(j) * n]
                                                            : std::numeric_limits<double>::quiet_NaN();
      }
    }
    inverse[Z(e.slot)] = Inverse(s, n);
    spd[Z(e.slot)] = std::move(s);
  }
  // BuildNormalEquationsKernel zeroes the blocks the trailing-first inversion multiplies as
  // zeros (NeedsZeroBlock).
  {
    for (const RunEntry& e : layout.entries) {
      const core::PatchDesc& d = plan.patches[e.patch];
      double* a = m.data() + Z(e.slot) * ld * ld;
      for (int i = 0; i < nb; ++i) {
        for (int k = 0; k < nb; ++k) {
          if (!NeedsZeroBlock(i, k, d.core_row, d.nspectot)) continue;
          for (int r = 0; r < nt; ++r) {
            for (int cc = 0; cc < nt; ++cc) a[(i * nt + r) + Z(k * nt + cc) * ld] = 0.0;
          }
        }
      }
    }
  }
}

void Replay::HostPotrf() {
  for (const RunEntry& e : layout.entries) {
    const int n = plan.patches[e.patch].n;
    double* a = m.data() + Z(e.slot) * ld * ld;
    for (int j = 0; j < n; ++j) {
      double d = a[j + Z(j) * ld];
      for (int k = 0; k < j; ++k) d -= a[j + Z(k) * ld] * a[j + Z(k) * ld];
      d = std::sqrt(d);
      a[j + Z(j) * ld] = d;
      for (int i = j + 1; i < n; ++i) {
        double v = a[i + Z(j) * ld];
        for (int k = 0; k < j; ++k) v -= a[i + Z(k) * ld] * a[j + Z(k) * ld];
        a[i + Z(j) * ld] = v / d;
      }
    }
  }
}

void Replay::TiledCholesky() {
  const int p = nt;  // host blocks are dense nt x nt, row-major
  for (int k = 0; k < nb; ++k) {
    if (k >= 1) {
      for (const BatchedCall& call : layout.chol_update[Z(k - 1)]) NaiveGemm(call, layout.ptrs);
    }
    for (const RunEntry& e : layout.entries) {
      const core::PatchDesc& d = plan.patches[e.patch];
      if (k >= d.nspectot) continue;
      double* base = m.data() + Z(e.slot) * ld * ld + Z(k) * nt * (ld + 1);
      // RunArgs::diag_update: the factor kernel first takes M_kk -= F F^T, F = L[k, lo:k]
      // (the lower triangle: the factor reads nothing above it).
      if (choices.diag_update_in_factor && k >= 1 && e.band > 0) {
        const int64_t f0 = Z(core::BandFirst(k, e.band)) * nt * ld;  // F's first column
        const int inner = (k - core::BandFirst(k, e.band)) * nt;
        const double* f = m.data() + Z(e.slot) * ld * ld + Z(k) * nt + f0;
        for (int cc = 0; cc < nt; ++cc) {
          for (int r = cc; r < nt; ++r) {
            double u = 0.0;
            for (int q = 0; q < inner; ++q) u += f[r + Z(q) * ld] * f[cc + Z(q) * ld];
            base[r + Z(cc) * ld] -= u;
          }
        }
      }
      // TileFactorKernel: Schur updates with unscaled columns, then the scaling.
      std::vector<double> s(Z(nt) * p, 0.0), xs(Z(nt) * p, 0.0), diag(Z(nt)), inv(Z(nt));
      for (int r = 0; r < nt; ++r) {
        for (int cc = 0; cc <= r; ++cc) s[Z(r) * p + cc] = base[r + Z(cc) * ld];
        xs[Z(r) * p + r] = 1.0;
      }
      for (int j = 0; j < nt; ++j) {
        const double rd = 1.0 / s[Z(j) * p + j];
        for (int r = j + 1; r < nt; ++r) {
          for (int cc = j + 1; cc <= r; ++cc) s[Z(r) * p + cc] -= s[Z(r) * p + j] * (s[Z(cc) * p + j] * rd);
        }
      }
      for (int j = 0; j < nt; ++j) {
        diag[Z(j)] = std::sqrt(s[Z(j) * p + j]);
        inv[Z(j)] = 1.0 / diag[Z(j)];
      }
      for (int r = 0; r < nt; ++r) {
        for (int cc = 0; cc < r; ++cc) s[Z(r) * p + cc] /= diag[Z(cc)];
        s[Z(r) * p + r] = diag[Z(r)];
        for (int cc = 0; cc <= r; ++cc) base[r + Z(cc) * ld] = s[Z(r) * p + cc];
      }
      for (int j = 0; j < nt; ++j) {
        for (int r = j + 1; r < nt; ++r) {
          for (int cc = 0; cc <= j; ++cc) xs[Z(r) * p + cc] -= s[Z(r) * p + j] * (xs[Z(j) * p + cc] * inv[Z(j)]);
        }
      }
      // X_k over L_kk on the diagonal where the inversion needs it, else in the scratch.
      const bool in_place = IsLeafInPlace(e, k);
      double* leaf = in_place ? base : t.data() + Z(e.slot) * Z(t_stride) + Z(k) * nt * nt;
      const int lld = in_place ? ld : nt;
      for (int cc = 0; cc < nt; ++cc) {
        for (int r = 0; r < nt; ++r) leaf[r + Z(cc) * lld] = r >= cc ? xs[Z(r) * p + cc] * inv[Z(r)] : 0.0;
      }
      // RunArgs::panel_update: the DMMA panel kernel first takes M[i, k] -= L[i, j] L[k, j]^T
      // for its rows' blocks i and the band's inner blocks j >= i - band.
      if (choices.panel_update && k >= 1 && e.band > 0) {
        double* slot = m.data() + Z(e.slot) * ld * ld;
        for (int ib = k + 1; ib <= core::BandLast(k, e.band, d.nspectot); ++ib) {
          for (int j = core::FirstCoupledBlock(ib, k, e.band); j < k; ++j) {
            const double* lij = slot + Z(ib) * nt + Z(j) * nt * ld;
            const double* lkj = slot + Z(k) * nt + Z(j) * nt * ld;
            double* mik = slot + Z(ib) * nt + Z(k) * nt * ld;
            for (int cc = 0; cc < nt; ++cc) {
              for (int r = 0; r < nt; ++r) {
                double u = 0.0;
                for (int q = 0; q < nt; ++q) u += lij[r + Z(q) * ld] * lkj[cc + Z(q) * ld];
                mik[r + Z(cc) * ld] -= u;
              }
            }
          }
        }
      }
      // PanelSolveKernel: L[k+1:, k] = M[k+1:, k] X_k^T within the band, fma in the kernel's order.
      const int rows = (core::BandLast(k, e.band, d.nspectot) - k) * nt;
      double* panel = base + nt;
      for (int i = 0; i < rows; ++i) {
        std::vector<double> out(Z(nt), 0.0);
        for (int mm = 0; mm < nt; ++mm) {
          for (int cc = 0; cc < nt; ++cc) out[Z(cc)] = std::fma(panel[i + Z(mm) * ld], leaf[cc + Z(mm) * lld], out[Z(cc)]);
        }
        for (int cc = 0; cc < nt; ++cc) panel[i + Z(cc) * ld] = out[Z(cc)];
      }
      // PanelSolveDmmaKernel with panel_p: P_k = L[k+1:k+1+b, k] X_k into the scratch
      // (zeros where the band is 0: L[k+1, k] is zero then).
      if (PanelP() && NeedsPanelP(k, d.core_row, d.nspectot)) {
        const int p_ld = PanelPBlocks(k, e.band, d.nspectot) * nt;
        double* pk = t.data() + Z(e.slot) * Z(t_stride) + Z(PanelPOffset(k, p_base, p_band, nt));
        for (int i = 0; i < p_ld; ++i) {
          for (int cc = 0; cc < nt; ++cc) {
            double sum = 0.0;
            for (int mm = cc; mm < nt && i < rows; ++mm) sum += panel[i + Z(mm) * ld] * leaf[mm + Z(cc) * lld];
            pk[i + Z(cc) * p_ld] = sum;
          }
        }
      }
    }
  }
}

bool Replay::IsLeafInPlace(const RunEntry& e, int k) const {
  const core::PatchDesc& d = plan.patches[e.patch];
  return NeedsLeafInverse(k, d.core_row, d.nspectot);
}

void Replay::InvertBlocks() {
  for (const auto& step : layout.trtri) {
    for (const BatchedCall& call : step) NaiveGemm(call, layout.ptrs);
  }
  for (const BatchedCall& call : layout.gram) NaiveGemm(call, layout.ptrs);
}

std::vector<double> Replay::Factor(int slot) const {
  int n = 0;
  for (const RunEntry& e : layout.entries) {
    if (e.slot == slot) n = plan.patches[e.patch].n;
  }
  std::vector<double> f(Z(n) * n, 0.0);
  const double* a = m.data() + Z(slot) * ld * ld;
  for (int cc = 0; cc < n; ++cc) {
    for (int r = cc; r < n; ++r) f[r + Z(cc) * n] = a[r + Z(cc) * ld];
  }
  return f;
}

}  // namespace spexd::cuda::testing
