#include "cuda/batch_layout.h"

#include <algorithm>
#include <map>

#include "core/patch_plan.h"

namespace spexd::cuda {
namespace {

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

int MaxBlocks(const core::PatchPlan& plan) {
  return plan.nwavetot > 0 ? plan.max_n / plan.nwavetot : 0;
}

std::size_t MaxPointerCount(const core::PatchPlan& plan, int count) {
  const std::size_t nb = static_cast<std::size_t>(std::max(1, MaxBlocks(plan)));
  const std::size_t per_entry = 3 + 3 * nb + 6 * nb + 3 * static_cast<std::size_t>(plan.nper);
  return per_entry * static_cast<std::size_t>(count);
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
      e.regularize = regularize;
      entries.push_back(e);
    }
  }
  std::stable_sort(entries.begin(), entries.end(), [&](const RunEntry& a, const RunEntry& b) {
    return plan.patches[a.patch].n < plan.patches[b.patch].n;
  });
  for (std::size_t i = 0; i < entries.size(); ++i) entries[i].slot = static_cast<int32_t>(i);
  return entries;
}

RunLayout BuildRunLayout(const core::PatchPlan& plan, std::vector<RunEntry> entries,
                         const SlotAddresses& s, bool library_leaf) {
  RunLayout out;
  std::stable_sort(entries.begin(), entries.end(), [&](const RunEntry& a, const RunEntry& b) {
    return plan.patches[a.patch].n < plan.patches[b.patch].n;
  });
  out.entries = std::move(entries);
  const int nt = plan.nwavetot;
  const int64_t ld = s.ld, nt2 = static_cast<int64_t>(nt) * nt;
  auto mbase = [&](const RunEntry& e) { return static_cast<int64_t>(e.slot) * ld * ld; };
  auto tbase = [&](const RunEntry& e) { return static_cast<int64_t>(e.slot) * s.t_stride; };
  // Element (r, c) of slot matrix e, column-major.
  auto melem = [&](const RunEntry& e, int64_t r, int64_t c) {
    return Addr(s.m, mbase(e) + r + c * ld);
  };

  // Cholesky factorisation and solve: one potrf/potrs call per distinct n.
  for (std::size_t i = 0; i < out.entries.size();) {
    const int n = plan.patches[out.entries[i].patch].n;
    std::size_t j = i;
    PointerTriples pt;
    while (j < out.entries.size() && plan.patches[out.entries[j].patch].n == n) {
      pt.a.push_back(melem(out.entries[j], 0, 0));
      pt.b.push_back(Addr(s.x, static_cast<int64_t>(out.entries[j].slot) * ld));
      ++j;
    }
    BatchedCall call;
    call.n = n;
    call.lda = static_cast<int>(ld);
    call.ldb = static_cast<int>(ld);
    call.entry_begin = static_cast<int>(i);
    pt.Flush(&out.ptrs, &call);
    out.potrf.push_back(call);
    i = j;
  }

  // Library leaf inverses: solve L_ii X = I (identity prepared in the GEMM scratch).
  if (library_leaf) {
    PointerTriples pt;
    for (const RunEntry& e : out.entries) {
      const core::PatchDesc& d = plan.patches[e.patch];
      for (int i = 0; i < d.nspectot; ++i) {
        if (!NeedsLeafInverse(i, d.core_row, d.nspectot)) continue;
        pt.a.push_back(melem(e, static_cast<int64_t>(i) * nt, static_cast<int64_t>(i) * nt));
        pt.b.push_back(Addr(s.t, tbase(e) + i * nt2));
      }
    }
    out.leaf_trsm.m = nt;
    out.leaf_trsm.n = nt;
    out.leaf_trsm.lda = static_cast<int>(ld);
    out.leaf_trsm.ldb = nt;
    pt.Flush(&out.ptrs, &out.leaf_trsm);
  }

  // Trailing-first block inversion, step r handles column block j = nspectot-1-r.
  const int nb_max = MaxBlocks(plan);
  for (int r = 1; r < nb_max; ++r) {
    PointerTriples g1, g2;
    for (const RunEntry& e : out.entries) {
      const core::PatchDesc& d = plan.patches[e.patch];
      const int j = d.nspectot - 1 - r;
      if (j < d.core_row) continue;
      const int64_t j0 = static_cast<int64_t>(j) * nt, j1 = j0 + nt;
      g1.a.push_back(melem(e, j1, j1));
      g1.b.push_back(melem(e, j1, j0));
      g1.c.push_back(Addr(s.t, tbase(e)));
      g2.a.push_back(Addr(s.t, tbase(e)));
      g2.b.push_back(melem(e, j0, j0));
      g2.c.push_back(melem(e, j1, j0));
    }
    if (g1.a.empty()) continue;
    BatchedCall c1, c2;
    c1.m = r * nt;
    c1.n = nt;
    c1.k = r * nt;
    c1.lda = static_cast<int>(ld);
    c1.ldb = static_cast<int>(ld);
    c1.ldc = r * nt;
    g1.Flush(&out.ptrs, &c1);
    c2.m = r * nt;
    c2.n = nt;
    c2.k = nt;
    c2.lda = r * nt;
    c2.ldb = static_cast<int>(ld);
    c2.ldc = static_cast<int>(ld);
    c2.alpha = -1.0;
    g2.Flush(&out.ptrs, &c2);
    out.trtri.push_back({c1, c2});
  }

  // C_jj = X[j:, j]^T X[j:, j] for the core blocks, grouped by k = n - j*nt.
  std::map<int, PointerTriples> by_k;
  for (const RunEntry& e : out.entries) {
    const core::PatchDesc& d = plan.patches[e.patch];
    for (int sp = 0; sp < plan.nper; ++sp) {
      const int j = d.core_row + sp;
      const int64_t j0 = static_cast<int64_t>(j) * nt;
      PointerTriples& pt = by_k[d.n - j * nt];
      pt.a.push_back(melem(e, j0, j0));
      pt.b.push_back(melem(e, j0, j0));
      pt.c.push_back(Addr(s.c, (static_cast<int64_t>(e.slot) * plan.nper + sp) * nt2));
    }
  }
  for (auto& [k, pt] : by_k) {
    BatchedCall call;
    call.m = nt;
    call.n = nt;
    call.k = k;
    call.transa = 1;
    call.lda = static_cast<int>(ld);
    call.ldb = static_cast<int>(ld);
    call.ldc = nt;
    pt.Flush(&out.ptrs, &call);
    out.gram.push_back(call);
  }
  return out;
}

}  // namespace spexd::cuda
