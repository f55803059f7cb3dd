// The numerical rules of one patch solve that both backends apply (extraction-spec
// §2.8–2.10, §2.15, §2.17): one named constant per rule, and the per-element formulas
// that use them, built by the host compiler and by nvcc alike.
#ifndef SPEXD_CORE_PATCH_NUMERICS_H_
#define SPEXD_CORE_PATCH_NUMERICS_H_

#include "core/numerics/host_device.h"

namespace spexd::core {

// §2.8: a bin is "bad" when its flux weight is below this fraction of the patch's largest.
inline constexpr double kMinWeightFraction = 1e-4;
// §2.8: added to every diagonal element of M so that M stays positive definite.
inline constexpr double kDiagonalJitter = 1e-15;
// §2.10, §2.17: compat gpu clips eigenvalues of C_ss at this fraction of the largest.
inline constexpr double kEigenvalueClip = 1e-14;
// §2.15 and "Decisions": the regularisation of the one retry of a failed patch (only
// when the request's own regularisation is 0).
inline constexpr double kRetryRegularize = 1e-4;

// §6: two stamps of stamp_ny x stamp_nx pixels, corners dy and dx apart, share a pixel.
// The whole sparsity of A^T N A: the CUDA normal equations skip pairs that fail it, and
// the plan's coupled band (core::CoupledBand) is built from it.
SPEXD_HD bool StampsOverlap(int dy, int dx, int stamp_ny, int stamp_nx) {
  return dy > -stamp_ny && dy < stamp_ny && dx > -stamp_nx && dx < stamp_nx;
}

// The spectrum blocks that block k of a patch of `nblocks` couples to, within its coupled
// band B (PatchPlan::coupled_band): BandFirst(k) .. BandLast(k). Blocks of M, and of its
// Cholesky factor, further apart are exact zeros; the CUDA kernels and the batched-call
// layout skip them by this one rule.
SPEXD_HD int BandFirst(int k, int band) { return k - band > 0 ? k - band : 0; }
SPEXD_HD int BandLast(int k, int band, int nblocks) {
  return k + band < nblocks - 1 ? k + band : nblocks - 1;
}
// The first block column j < k that row block i (k <= i <= BandLast(k)) meets in block
// column k's Cholesky update M[i, k] -= L[i, j] L[k, j]^T: L[i, j] is zero for i - j > band,
// so j runs from here to k - 1 (none when it is k or more).
SPEXD_HD int FirstCoupledBlock(int i, int k, int band) {
  return i - band > BandFirst(k, band) ? i - band : BandFirst(k, band);
}

// The bad-bin weight floor of a patch from its largest flux weight (§2.8).
SPEXD_HD double MinWeight(double max_fluxweight) { return kMinWeightFraction * max_fluxweight; }

// What bin q adds to M_qq (§2.8): alpha² + jitter with alpha = minweight − fw for a bad
// bin and the request's regularisation otherwise. The bad-bin test is fw < minweight in
// compat cpu and fw <= minweight in compat gpu (§2.17).
SPEXD_HD double DiagonalRegularization(double fluxweight, double minweight, double regularize,
                                       bool compat_cpu) {
  const bool bad = compat_cpu ? fluxweight < minweight : fluxweight <= minweight;
  const double alpha = bad ? minweight - fluxweight : regularize;
  return alpha * alpha + kDiagonalJitter;
}

// The eigenvalue used for C_ss^{-1/2} (§2.10 step 2): compat gpu clips it at
// kEigenvalueClip × the largest; compat cpu does not (a negative one gives NaN, which
// fails the patch and triggers the retry).
SPEXD_HD double ClippedEigenvalue(double lambda, double lambda_max, bool compat_cpu) {
  if (compat_cpu) return lambda;
  const double floor_value = kEigenvalueClip * lambda_max;
  return lambda < floor_value ? floor_value : lambda;
}

// A cheap condition estimate of M from its Cholesky factor L (§2.9): with
// d_max and d_min the largest and smallest diagonal elements of L, (d_max / d_min)² is a
// lower bound of the 2-norm condition of M = L Lᵀ (its diagonal holds M's extreme
// pivots), and the usual LAPACK-style proxy for it. It costs one pass over n values the
// factor already holds, on either backend. 0 when undefined (d_min <= 0 or not finite).
SPEXD_HD double CholeskyConditionEstimate(double diag_max, double diag_min) {
  if (!(diag_min > 0.0) || !(diag_max < 1e300)) return 0.0;
  const double r = diag_max / diag_min;
  return r * r;
}

// The same from a factor held in memory: its n diagonal elements lie `stride` apart
// (LAPACK's lower band storage: stride = ldab; a dense column-major factor: ld + 1).
// Host only; the CUDA backend reduces the diagonal across a thread block instead.
inline double FactorConditionEstimate(const double* factor, int n, long stride) {
  if (n <= 0) return 0.0;
  double dmax = factor[0], dmin = factor[0];
  for (int q = 1; q < n; ++q) {
    const double d = factor[static_cast<long>(q) * stride];
    dmax = d > dmax ? d : dmax;
    dmin = d < dmin ? d : dmin;
  }
  return CholeskyConditionEstimate(dmax, dmin);
}

}  // namespace spexd::core

#endif  // SPEXD_CORE_PATCH_NUMERICS_H_
