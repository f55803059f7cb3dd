#include "cuda/kernels/batch_layout.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "core/numerics/patch_numerics.h"
#include "core/plan/patch_plan.h"

namespace spexd::cuda {
namespace {

// More runs than this and a call keeps its one pointer-array launch: short strided
// launches would cost more than they save.
constexpr int kMaxStridedRuns = 4;

uint64_t Addr(uint64_t base, int64_t elements) {
  return base + static_cast<uint64_t>(elements) * sizeof(double);
}

// Appends `count` A, B, C pointers (in that order) and sets the offsets of `call`.
struct PointerTriples {
  std::vector<uint64_t> a, b, c;
  void Flush(std::vector<uint64_t>* ptrs, BatchedCall* call) {
    call->count = static_cast<int>(a.size());
    call->a_off = static_cast<int64_t>(ptrs->size());
    ptrs->insert(ptrs->end(), a.begin(), a.end());
    call->b_off = static_cast<int64_t>(ptrs->size());
    ptrs->insert(ptrs->end(), b.begin(), b.end());
    call->c_off = static_cast<int64_t>(ptrs->size());
    ptrs->insert(ptrs->end(), c.begin(), c.end());
  }
};

}  // namespace

void SplitStrided(const std::vector<uint64_t>& ptrs, BatchedCall* call, int max_runs) {
  call->strided.clear();
  auto at = [&](int64_t off, int i) { return ptrs[static_cast<std::size_t>(off + i)]; };
  auto step = [&](int64_t off, int i) {  // doubles from entry i to i + 1
    return (static_cast<int64_t>(at(off, i + 1)) - static_cast<int64_t>(at(off, i))) /
           static_cast<int64_t>(sizeof(double));
  };
  for (int i = 0; i < call->count;) {
    StridedRun run;
    run.first = i;
    run.a = at(call->a_off, i);
    run.b = at(call->b_off, i);
    run.c = at(call->c_off, i);
    run.count = 1;
    if (i + 1 < call->count && step(call->a_off, i) >= 0 && step(call->b_off, i) >= 0 &&
        step(call->c_off, i) > 0) {  // forward strides only (C's never 0: distinct outputs)
      run.sa = step(call->a_off, i);
      run.sb = step(call->b_off, i);
      run.sc = step(call->c_off, i);
      while (i + run.count < call->count && step(call->a_off, i + run.count - 1) == run.sa &&
             step(call->b_off, i + run.count - 1) == run.sb &&
             step(call->c_off, i + run.count - 1) == run.sc) {
        ++run.count;
      }
    }
    if (static_cast<int>(call->strided.size()) == max_runs) {
      call->strided.clear();
      return;
    }
    call->strided.push_back(run);
    i += run.count;
  }
}

int MaxBlocks(const core::PatchPlan& plan) {
  return plan.nwavetot > 0 ? plan.max_n / plan.nwavetot : 0;
}

std::size_t MaxPointerCount(const core::PatchPlan& plan, int count) {
  const std::size_t nb = static_cast<std::size_t>(std::max(1, MaxBlocks(plan)));
  // 3 a margin, leaves, chol_update, and the larger of trtri + gram and 15 nb (a margin the
  // pinned pointer buffers keep).
  const std::size_t inverse = std::max(6 * nb + 3 * static_cast<std::size_t>(plan.nper), 15 * nb);
  // chol_update: at most a call per row block of each step (nb (nb - 1) / 2 in all).
  const std::size_t updates = 3 * std::max(nb, nb * (nb - 1) / 2);
  const std::size_t per_entry = 3 + 3 * nb + updates + inverse;
  return per_entry * static_cast<std::size_t>(count);
}

int EntryBand(const core::PatchPlan& plan, int p) {
  return plan.coupled_band.empty() ? plan.patches[static_cast<std::size_t>(p)].nspectot - 1
                                   : plan.coupled_band[static_cast<std::size_t>(p)];
}

int PanelPBand(const core::PatchPlan& plan) {
  int b = 1;
  for (std::size_t p = 0; p < plan.patches.size(); ++p) {
    b = std::max(b, TrailingReadBand(EntryBand(plan, static_cast<int>(p))));
  }
  return b;
}

std::vector<RunEntry> MakeBatchEntries(const core::PatchPlan& plan, const std::vector<int>& bundles,
                                       double regularize) {
  std::vector<RunEntry> entries;
  for (std::size_t pos = 0; pos < bundles.size(); ++pos) {
    const int b = bundles[pos];
    for (int p = plan.bundle_first_patch[b]; p < plan.bundle_first_patch[b + 1]; ++p) {
      if (plan.patches[p].skipped != core::kSkipNone) continue;
      RunEntry e{};
      e.patch = p;
      e.bundle_pos = static_cast<int32_t>(pos);
      e.band = EntryBand(plan, p);
      e.regularize = regularize;
      entries.push_back(e);
    }
  }
  // By n, then core_row: the first and last sub-bundles' patches (same n, other core
  // rows) each take a run of slots, so that a call's entries are few strided runs.
  std::stable_sort(entries.begin(), entries.end(), [&](const RunEntry& a, const RunEntry& b) {
    const core::PatchDesc& pa = plan.patches[a.patch];
    const core::PatchDesc& pb = plan.patches[b.patch];
    return pa.n != pb.n ? pa.n < pb.n : pa.core_row < pb.core_row;
  });
  for (std::size_t i = 0; i < entries.size(); ++i) entries[i].slot = static_cast<int32_t>(i);
  return entries;
}

namespace {

// Device addresses inside the workspace slots of a run (column-major slot matrices of
// leading dimension ld; blocks of nt = nwavetot rows and columns).
struct SlotMath {
  const core::PatchPlan& plan;
  const SlotAddresses& s;
  int nt;
  int64_t ld, nt2;
  SlotMath(const core::PatchPlan& p, const SlotAddresses& slots)
      : plan(p), s(slots), nt(p.nwavetot), ld(slots.ld), nt2(static_cast<int64_t>(nt) * nt) {}
  // Element (r, c) of entry e's matrix.
  uint64_t M(const RunEntry& e, int64_t r, int64_t c) const {
    return Addr(s.m, static_cast<int64_t>(e.slot) * ld * ld + r + c * ld);
  }
  // Offset `off` into entry e's GEMM scratch.
  uint64_t T(const RunEntry& e, int64_t off) const {
    return Addr(s.t, static_cast<int64_t>(e.slot) * s.t_stride + off);
  }
  // Core block `sp` of entry e's output C.
  uint64_t C(const RunEntry& e, int sp) const {
    return Addr(s.c, (static_cast<int64_t>(e.slot) * plan.nper + sp) * nt2);
  }
  const core::PatchDesc& patch(const RunEntry& e) const { return plan.patches[e.patch]; }
};

// Tiled Cholesky step 1 (tiled_cholesky.h): for block column k >= 1 of the entries with
// more than k blocks, M[k:, k] -= L[k:, :k] · L[k, :k]^T over the entry's band B: L's
// blocks (i, j) with i - j > B are zero (PatchPlan::coupled_band), so only rows k..k+B
// and inner blocks k-B..k-1 take part, and row block i only meets inner blocks j >= i - B.
// Rows whose inner range is the whole of lo..k-1 share one call; each later row takes the
// inner blocks it meets (one call per (first row, rows, inner size)). Multiplying the zero
// blocks too (one call over all rows) did ~40 % more multiply-adds at B = 2.
void AddTiledUpdates(const SlotMath& sm, LayoutChoices choices, RunLayout* out) {
  const int nt = sm.nt;
  for (int k = 1; k < MaxBlocks(sm.plan); ++k) {
    // (first row - k, rows, inner blocks) -> calls
    std::map<std::tuple<int, int, int>, PointerTriples> by_shape;
    for (const RunEntry& e : out->entries) {
      const core::PatchDesc& d = sm.patch(e);
      if (d.nspectot <= k || e.band <= 0) continue;
      // panel_update: the rows below the diagonal block are the panel kernel's.
      const int lo = core::BandFirst(k, e.band);
      const int hi = choices.panel_update ? k : core::BandLast(k, e.band, d.nspectot);
      auto add = [&](int i0, int i1, int j0) {  // rows i0..i1, inner j0..k-1
        PointerTriples& pt = by_shape[{i0 - k, i1 - i0 + 1, k - j0}];
        const int64_t r0 = static_cast<int64_t>(i0) * nt, c0 = static_cast<int64_t>(j0) * nt;
        pt.a.push_back(sm.M(e, r0, c0));
        pt.b.push_back(sm.M(e, static_cast<int64_t>(k) * nt, c0));
        pt.c.push_back(sm.M(e, r0, static_cast<int64_t>(k) * nt));
      };
      const int full_last = std::min(hi, lo + e.band);  // rows meeting every inner block
      // diag_update_in_factor: row block k is the factor kernel's (RunArgs::diag_update).
      const int first = choices.diag_update_in_factor ? k + 1 : k;
      if (first <= full_last) add(first, full_last, lo);
      for (int i = full_last + 1; i <= hi; ++i) {
        const int j0 = core::FirstCoupledBlock(i, k, e.band);
        if (j0 < k) add(i, i, j0);
      }
    }
    std::vector<BatchedCall> step;
    for (auto& [shape, pt] : by_shape) {
      BatchedCall call;
      call.m = std::get<1>(shape) * nt;
      call.n = nt;
      call.k = std::get<2>(shape) * nt;
      call.transb = 1;
      call.alpha = -1.0;
      call.beta = 1.0;
      call.lda = call.ldb = call.ldc = static_cast<int>(sm.ld);
      pt.Flush(&out->ptrs, &call);
      step.push_back(call);
    }
    out->chol_update.push_back(std::move(step));
  }
}

// Trailing-first block inversion: step r handles column block j = nspectot-1-r with two
// GEMMs. L[j+1:, j] is zero past the entry's band B, so with b = min(B, r):
//   gemm 1  P = L[j+1:j+1+b, j] · X_jj          (into the scratch; m = b·nt)
//   gemm 2  X[j+1:, j] = -X[j+1:, j+1:j+1+b] · P (over L's column block j; m = r·nt)
// one call each per b. Multiplying X_jj last instead ((X · L) · X_jj, a T of r·nt rows
// through the scratch) took r - b more block products a step and moved T both ways.
void AddBlockInversion(const SlotMath& sm, bool panel_p, RunLayout* out) {
  const int nt = sm.nt;
  const int ld = static_cast<int>(sm.ld);
  const int nb_max = MaxBlocks(sm.plan);
  for (int r = 1; r < nb_max; ++r) {
    std::map<int, std::pair<PointerTriples, PointerTriples>> by_inner;  // b -> (gemm 1, gemm 2)
    for (const RunEntry& e : out->entries) {
      const core::PatchDesc& d = sm.patch(e);
      const int j = d.nspectot - 1 - r;
      if (j < d.core_row) continue;
      const int64_t j0 = static_cast<int64_t>(j) * nt, j1 = j0 + nt;
      auto& [g1, g2] = by_inner[std::min(TrailingReadBand(e.band), r)];
      // P_j: gemm 1's product at the scratch's start, or the panel kernel's (panel_p).
      const int64_t p_off = panel_p ? PanelPOffset(j, sm.s.p_base, sm.s.p_band, nt) : 0;
      if (!panel_p) {
        g1.a.push_back(sm.M(e, j1, j0));
        g1.b.push_back(sm.M(e, j0, j0));
        g1.c.push_back(sm.T(e, 0));
      }
      g2.a.push_back(sm.M(e, j1, j1));
      g2.b.push_back(sm.T(e, p_off));
      g2.c.push_back(sm.M(e, j1, j0));
    }
    if (by_inner.empty()) continue;
    std::vector<BatchedCall> step;
    for (auto& [inner, calls] : by_inner) {  // every gemm 1 of the step, then every gemm 2
      if (calls.first.a.empty()) continue;  // panel_p: no gemm 1
      BatchedCall c1;
      c1.m = inner * nt;
      c1.n = nt;
      c1.k = nt;
      c1.lda = ld;
      c1.ldb = ld;
      c1.ldc = inner * nt;
      calls.first.Flush(&out->ptrs, &c1);
      step.push_back(c1);
    }
    for (auto& [inner, calls] : by_inner) {
      BatchedCall c2;
      c2.m = r * nt;
      c2.n = nt;
      c2.k = inner * nt;
      c2.lda = ld;
      c2.ldb = inner * nt;
      c2.ldc = ld;
      c2.alpha = -1.0;
      calls.second.Flush(&out->ptrs, &c2);
      step.push_back(c2);
    }
    out->trtri.push_back(std::move(step));
  }
}

// C_jj = X[j:, j]^T X[j:, j] for the core blocks, one call per k = n - j*nt.
void AddCoreGrams(const SlotMath& sm, RunLayout* out) {
  std::map<int, PointerTriples> by_k;
  for (const RunEntry& e : out->entries) {
    const core::PatchDesc& d = sm.patch(e);
    for (int sp = 0; sp < sm.plan.nper; ++sp) {
      const int j = d.core_row + sp;
      const int64_t j0 = static_cast<int64_t>(j) * sm.nt;
      PointerTriples& pt = by_k[d.n - j * sm.nt];
      pt.a.push_back(sm.M(e, j0, j0));
      pt.b.push_back(sm.M(e, j0, j0));
      pt.c.push_back(sm.C(e, sp));
    }
  }
  for (auto& [k, pt] : by_k) {
    BatchedCall call;
    call.m = sm.nt;
    call.n = sm.nt;
    call.k = k;
    call.transa = 1;
    call.lda = static_cast<int>(sm.ld);
    call.ldb = static_cast<int>(sm.ld);
    call.ldc = sm.nt;
    pt.Flush(&out->ptrs, &call);
    out->gram.push_back(call);
  }
}

}  // namespace

RunLayout BuildRunLayout(const core::PatchPlan& plan, std::vector<RunEntry> entries,
                         const SlotAddresses& s, LayoutChoices choices) {
  RunLayout out;
  std::stable_sort(entries.begin(), entries.end(), [&](const RunEntry& a, const RunEntry& b) {
    return plan.patches[a.patch].n < plan.patches[b.patch].n;
  });
  out.entries = std::move(entries);
  // One allocation: grown call by call, the ~86 k pointers of an r-frame batch were
  // copied and page-faulted over again (most of the ~5 ms this took on a 2-core host).
  out.ptrs.reserve(MaxPointerCount(plan, static_cast<int>(out.entries.size())));
  const SlotMath sm(plan, s);
  AddTiledUpdates(sm, choices, &out);
  AddBlockInversion(sm, choices.panel_p, &out);
  AddCoreGrams(sm, &out);
  for (auto* steps : {&out.chol_update, &out.trtri}) {
    for (std::vector<BatchedCall>& step : *steps) {
      for (BatchedCall& call : step) SplitStrided(out.ptrs, &call, kMaxStridedRuns);
    }
  }
  for (BatchedCall& call : out.gram) SplitStrided(out.ptrs, &call, kMaxStridedRuns);
  return out;
}

}  // namespace spexd::cuda
