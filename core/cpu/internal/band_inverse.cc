#include "core/cpu/internal/band_inverse.h"

#include <algorithm>
#include <cstddef>
#include <vector>

#include "core/cpu/internal/lapack.h"
#include "core/cpu/internal/small_gemm.h"

namespace spexd::core {
namespace {

constexpr std::size_t kOne = 1;  // hidden Fortran string length
constexpr double kPlus = 1.0, kMinus = -1.0, kZero = 0.0;

// A column-major view: (i, j) at p[i + j * ld].
struct View {
  double* p;
  int ld;
  double* at(int i, int j) const { return p + i + static_cast<std::ptrdiff_t>(j) * ld; }
};
struct ConstView {
  const double* p;
  int ld;
  const double* at(int i, int j) const { return p + i + static_cast<std::ptrdiff_t>(j) * ld; }
};

// The products by our AVX-512 kernel where the CPU has it (as fast as OpenBLAS's AVX-512
// kernels and with their bits, 2.3x its Haswell ones), else by the BLAS (small_gemm.h).
void Gemm(const char* ta, const char* tb, int m, int n, int k, ConstView a, ConstView b,
          double beta, View c) {
  internal::Gemm(ta, tb, m, n, k, a.p, a.ld, b.p, b.ld, beta, c.p, c.ld);
}

}  // namespace

// Selected inversion (spec §2.10 step 1, docs/design.md): from C L = L^-T (upper
// triangular), the block column J = [j0, j1) of C below the diagonal follows from C[K, K],
// K = [j1, j1 + kk) with kk <= kd (the rows where L[:, J] can be non-zero), computed by
// the blocks after J. With X = L[K, J] and Z = C[K, K] X:
//   C[K, J] = -Z L_JJ^-1,   C[J, J] = L_JJ^-T (I + X^T Z) L_JJ^-1.
// X is a trapezoid: L[j1 + r, j0 + c] = 0 for r + b - c > kd, so its first nd rows are dense
// and the rest is an upper triangle (plus a dense strip when kk < kd); the products skip
// the zeros (~1/4 of X). Of C[K, J] the recursion needs only the rows r < kd - b (a later
// block's K ends before j0 + kd). C is kept with both triangles, so that C[K, K] is a plain
// matrix for dgemm. The blocks agree with X^T X, L X = [I; 0], to ~1e-15 relative.
void BandInverseDiagonalBlocks(const BandFactor& f, int b, int first_block, double* c_out,
                               int ldc, double* zs) {
  const int n = f.n, kd = f.kd, nblocks = n / b;
  const View c{c_out, ldc};
  const ConstView l{f.l, f.ld};
  for (int jb = nblocks - 1; jb >= first_block; --jb) {
    const int j0 = jb * b, j1 = j0 + b, kk = std::min(n, j1 + kd) - j1;
    ConstView ljj{l.at(j0, j0), l.ld};
    if (kd < b - 1) {
      // L_JJ is banded and its storage holds L only within BandCholeskyReach(kd) of the
      // diagonal (whatever was there before beyond it): solve from a copy of its band, zero
      // elsewhere. Only nearly or wholly masked patches have so narrow a band.
      const View lb{zs + static_cast<std::ptrdiff_t>(kd + b) * b, b};
      for (int col = 0; col < b; ++col) {
        std::fill(lb.at(0, col), lb.at(b, col), 0.0);
        std::copy(ljj.at(col, col), ljj.at(std::min(b, col + kd + 1), col), lb.at(col, col));
      }
      ljj = ConstView{lb.p, b};
    }
    // W = L_JJ^-1 (lower): OpenBLAS's right-side and transposed-left triangular solves run
    // at ~20 GFLOP/s on these sizes, its triangular products at ~33; one solve on I, then
    // products only.
    const View w{zs + static_cast<std::ptrdiff_t>(kd) * b, b};
    for (int col = 0; col < b; ++col) {
      std::fill(w.at(0, col), w.at(b, col), 0.0);
      *w.at(col, col) = 1.0;
    }
    dtrsm_("L", "L", "N", "N", &b, &b, &kPlus, ljj.p, &ljj.ld, w.p, &w.ld, kOne, kOne, kOne, kOne);
    const View cjj{c.at(j0, j0), ldc};
    // H = I, then H += X^T Z below, then C[J, J] = L_JJ^-T H L_JJ^-1.
    for (int col = 0; col < b; ++col) {
      std::fill(cjj.at(0, col), cjj.at(b, col), 0.0);
      *cjj.at(col, col) = 1.0;
    }
    if (kk > 0) {
      const ConstView x{l.at(j1, j0), l.ld};
      const ConstView ckk{c.at(j1, j1), ldc};
      const View z{zs, kk};
      // Rows [0, nd) of X are dense; row nd + t is non-zero from column s0 + t on.
      const int nd = std::clamp(kd - b + 1, 0, kk), trows = kk - nd;
      const int s0 = nd + b - kd, w12 = b - s0 - trows;  // U = X[nd:kk, s0:b] = [U11 U12]
      const ConstView u11{trows > 0 ? x.at(nd, s0) : x.p, x.ld};
      if (trows > 0) {
        // Z[:, s0 + t] = C[K, nd:kk] U: U11 by trmm on a copy, U12 (w12 columns) by gemm.
        for (int t = 0; t < trows; ++t) {
          std::copy(ckk.at(0, nd + t), ckk.at(kk, nd + t), z.at(0, s0 + t));
        }
        dtrmm_("R", "U", "N", "N", &kk, &trows, &kPlus, u11.p, &u11.ld, z.at(0, s0), &z.ld, kOne,
               kOne, kOne, kOne);
        if (w12 > 0) {
          Gemm("N", "N", kk, w12, trows, ConstView{ckk.at(0, nd), ldc},
               ConstView{x.at(nd, s0 + trows), x.ld}, 0.0, View{z.at(0, s0 + trows), kk});
        }
        std::fill(z.at(0, 0), z.at(0, s0), 0.0);  // columns before s0: no U part
      }
      if (nd > 0) Gemm("N", "N", kk, b, nd, ckk, x, trows > 0 ? 1.0 : 0.0, z);  // += C[K,0:nd] D
      // C[K1, J] = -Z[0:r1] L_JJ^-1 (the rows later blocks read), and its mirror C[J, K1].
      const int r1 = std::clamp(kd - b, 0, kk);
      if (r1 > 0) {
        const View ckj{c.at(j1, j0), ldc};
        for (int col = 0; col < b; ++col) std::copy(z.at(0, col), z.at(r1, col), ckj.at(0, col));
        dtrmm_("R", "L", "N", "N", &r1, &b, &kMinus, w.p, &w.ld, ckj.p, &ckj.ld, kOne, kOne,
               kOne, kOne);
        for (int r = 0; r < r1; ++r) {
          for (int col = 0; col < b; ++col) *c.at(j0 + col, j1 + r) = *ckj.at(r, col);
        }
      }
      // H += X^T Z = D^T Z[0:nd] + (rows s0..b) U^T Z[nd:kk].
      if (nd > 0) Gemm("T", "N", b, b, nd, x, ConstView{z.p, kk}, 1.0, cjj);
      if (trows > 0) {
        const View zb{z.at(nd, 0), kk};
        if (w12 > 0) {
          Gemm("T", "N", w12, b, trows, ConstView{x.at(nd, s0 + trows), x.ld},
               ConstView{zb.p, kk}, 1.0, View{cjj.at(s0 + trows, 0), ldc});
        }
        dtrmm_("L", "U", "T", "N", &trows, &b, &kPlus, u11.p, &u11.ld, zb.p, &zb.ld, kOne, kOne,
               kOne, kOne);
        for (int col = 0; col < b; ++col) {
          double* h = cjj.at(s0, col);
          const double* g = zb.at(0, col);
          for (int t = 0; t < trows; ++t) h[t] += g[t];
        }
      }
    }
    dtrmm_("L", "L", "T", "N", &b, &b, &kPlus, w.p, &w.ld, cjj.p, &cjj.ld, kOne, kOne, kOne,
           kOne);
    dtrmm_("R", "L", "N", "N", &b, &b, &kPlus, w.p, &w.ld, cjj.p, &cjj.ld, kOne, kOne, kOne,
           kOne);
    // Exactly symmetric: the lower triangle (what the old dsymm and Decorrelate read) wins.
    for (int col = 1; col < b; ++col) {
      for (int r = 0; r < col; ++r) *cjj.at(r, col) = *cjj.at(col, r);
    }
  }
}

}  // namespace spexd::core
