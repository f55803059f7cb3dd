// Per-spectrum products of the decorrelation from an eigen-decomposition of one core
// block C_ss = V diag(lambda) V^T (extraction-spec §2.10 steps 2–3, §2.11), shared by the
// eigensolver kernels (device-only header). One thread block per (patch, core spectrum).
#ifndef SPEXD_CUDA_DECORRELATION_PRODUCTS_CUH_
#define SPEXD_CUDA_DECORRELATION_PRODUCTS_CUH_

#include "core/numerics/patch_numerics.h"
#include "cuda/kernels/kernel_common.cuh"

namespace spexd::cuda {

// V(r, c) = v[r * rs + c * cs] in shared memory.
struct EigenView {
  const double* v;
  int rs, cs;
  __device__ double operator()(int r, int c) const { return v[r * rs + c * cs]; }
};

// Shared-memory scratch of nt doubles each.
struct ProductScratch {
  double* u;   // g o V^T 1
  double* y;   // g o V^T x
  double* r;   // row sums of Q
  double* fl;  // flux
  double* iv;  // ivar
};

// g holds the eigenvalues on entry (overwritten with lambda^-1/2), x the solution segment
// of the spectrum. `eig_failed` (uniform) marks the patch kStatusEigenFailed. Ends with a
// barrier (__syncthreads_or).
__device__ inline void WriteDecorrelated(const RunArgs& a, const RunEntry& e, const DevicePatch& d,
                                         int sp, const EigenView V, double* g, const double* x,
                                         const ProductScratch& s, bool eig_failed) {
  const PlanDims& D = a.dims;
  const int nt = D.nwavetot;
  const int s_loc = d.core_row + sp;
  // Q = V diag(lambda^{-1/2}) V^T (implicitly), lambda clipped per compat
  // (core::ClippedEigenvalue, spec §2.10, §2.17).
  if (threadIdx.x < 32) {  // warp 0; fmax gives the same value in any order
    double lmax = -INFINITY;
    for (int i = static_cast<int>(threadIdx.x); i < nt; i += 32) lmax = fmax(lmax, g[i]);
    lmax = WarpMax(lmax);
    if (threadIdx.x == 0) s.r[0] = lmax;
  }
  __syncthreads();
  const double lmax = s.r[0];
  __syncthreads();
  for (int i = threadIdx.x; i < nt; i += blockDim.x) {
    g[i] = 1.0 / sqrt(core::ClippedEigenvalue(g[i], lmax, D.compat_cpu));
  }
  __syncthreads();
  // R = Q / rowsum, ivar = rowsum^2, flux = R x (spec §2.10 step 3) without forming Q:
  // rowsum = V (g o V^T 1), Q x = V (g o V^T x), and the band entries of the core columns
  // Q(row, i) = sum_k V(row,k) g_k V(i,k) one by one: O(nt^2) instead of O(nt^3).
  for (int k = threadIdx.x; k < nt; k += blockDim.x) {
    double cs = 0.0, cx = 0.0;
    for (int j = 0; j < nt; ++j) {
      const double vjk = V(j, k);
      cs += vjk;
      cx += vjk * x[j];
    }
    s.u[k] = g[k] * cs;
    s.y[k] = g[k] * cx;
  }
  __syncthreads();
  for (int i = threadIdx.x; i < nt; i += blockDim.x) {
    double rsum = 0.0, qx = 0.0;
    for (int k = 0; k < nt; ++k) {
      rsum += V(i, k) * s.u[k];
      qx += V(i, k) * s.y[k];
    }
    s.r[i] = rsum;
    s.iv[i] = rsum * rsum;
    s.fl[i] = qx / rsum;
  }
  __syncthreads();
  const int nk = 2 * D.ndiag + 1;
  int bad = 0;
  double* fmodel = a.slots.fmodel + static_cast<int64_t>(e.slot) * D.ld;
  for (int w = threadIdx.x; w < D.nwavestep; w += blockDim.x) {
    const int i = D.wavepad_eff + w;
    const double f = s.fl[i], iv = s.iv[i];
    if (w < d.nkeep) {
      bad |= !isfinite(f) || !isfinite(iv);
      const int64_t o = OutIndex(D, e, d, sp, w);
      a.out.flux[o] = f;
      a.out.ivar[o] = iv;
    }
    // Model flux (spec §2.11, §2.17): compat gpu zeroes bins without ivar.
    fmodel[static_cast<int64_t>(s_loc) * nt + i] = (D.compat_cpu || iv > 0.0) ? f : 0.0;
  }
  // Rdiags[k][w] = R[i-ndiag+k][i] (spec §2.11); the CPU checks every core column. A
  // thread takes up to kRdiagRun consecutive k of one column: g_k V(i, k) formed once for
  // them, an FMA a term (each sum's order as one thread a k had it).
  constexpr int kRdiagRun = 4;
  const int runs = (nk + kRdiagRun - 1) / kRdiagRun;
  for (int idx = threadIdx.x; idx < D.nwavestep * runs; idx += blockDim.x) {
    const int w = idx / runs, kk0 = (idx % runs) * kRdiagRun;
    const int i = D.wavepad_eff + w, row0 = i - D.ndiag + kk0;
    const int len = min(kRdiagRun, nk - kk0);
    double q[kRdiagRun] = {};  // zeros
    for (int k = 0; k < nt; ++k) {
      const double gv = g[k] * V(i, k);
#pragma unroll
      for (int c = 0; c < kRdiagRun; ++c) {
        if (c < len) q[c] = fma(V(row0 + c, k), gv, q[c]);
      }
    }
#pragma unroll
    for (int c = 0; c < kRdiagRun; ++c) {
      if (c >= len) continue;
      const double val = q[c] / s.r[row0 + c];
      bad |= !isfinite(val);
      if (w < d.nkeep) {
        a.out.rdiag[(OutRow(D, e, d, sp) * nk + kk0 + c) * D.nwave + d.out_col + w] = val;
      }
    }
  }
  if (eig_failed && threadIdx.x == 0) {
    bad = 1;
    atomicOr(&a.slots.status[e.slot], kStatusEigenFailed);
  }
  bad = __syncthreads_or(bad);
  if (bad && threadIdx.x == 0) atomicOr(&a.slots.status[e.slot], kStatusOutputNonFinite);
}

}  // namespace spexd::cuda

#endif  // SPEXD_CUDA_DECORRELATION_PRODUCTS_CUH_
