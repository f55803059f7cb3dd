// Eigenvectors of a symmetric tridiagonal T from its eigenvalues, one independent O(n)
// computation per eigenvalue (the QL rotations applied to H's rows were the
// largest kernel of a warm frame; these need no rotation log and no chain across
// eigenvalues). Host and device: the kernel runs an eigenvalue's two factorisations on
// two threads, then the solve; the host tests run TwistedEigenvector serially.
//
// For an eigenvalue lambda of T (d[0..n), e[0..n-1)), the twisted factorisation
// T - lambda I = N_r Delta_r N_r^T at the index r where |gamma_r| is least gives the
// eigenvector as the solution of N_r^T z = e_r (z_r = 1): one step of inverse iteration
// from the best unit vector (Parlett & Dhillon, "Fernando's solution to Wilkinson's
// problem", 1997). Its residual |gamma_r| / |z| is O(n eps |T|), so z is accurate to
// O(n eps |T| / gap); close eigenvalues give nearly parallel vectors, which is why the
// caller tests max |Z^T Z - I| of a block's vectors, orthonormalises them by one
// Newton-Schulz step where it is small, and keeps QL with rotations where it is not.
// The solve also gives the Rayleigh quotient of z, lambda + gamma_r / z^T z (from
// (T - lambda I) z = gamma_r e_r), which the caller takes as the eigenvalue: it is
// accurate to O(residual^2 / gap), where QL's value was off by up to 3.4e-12 relative on
// the small eigenvalues of some real blocks (1e-14 corrected).
// On 2,350 real r-frame blocks, with the Newton-Schulz step and LAPACK's eigenvalues,
// this was within 2.4e-13 of a long-double reference in ivar, R and flux; with the GPU's
// own QL eigenvalues, 5.1e-12; oriented QL and the
// Rayleigh quotients keep it within 3.5e-13.
#ifndef SPEXD_CORE_NUMERICS_TRIDIAG_VECTORS_H_
#define SPEXD_CORE_NUMERICS_TRIDIAG_VECTORS_H_

#include <cmath>

#include "core/numerics/host_device.h"

namespace spexd::core::tridiag {

// Where some eigenvalue's Rayleigh quotient moved it by more than this (relative), the
// caller computes the block's vectors again from the quotients: a vector from an
// eigenvalue off by delta is off by ~delta / gap. On 2,350 real blocks 43 (1.8 %) were
// redone, and the decorrelation's ivar came within 3.5e-13 of the long-double reference
// (1.0e-12 with the first vectors), as with LAPACK's eigenvalues.
inline constexpr double kTwistedRedoShift = 1e-13;

// |d_i| + |e_{i-1}| + |e_i|: row i's absolute sum.
SPEXD_HD double TridiagonalRowNorm(const double* d, const double* e, int n, int i) {
  return fabs(d[i]) + (i > 0 ? fabs(e[i - 1]) : 0.0) + (i + 1 < n ? fabs(e[i]) : 0.0);
}

// max_i TridiagonalRowNorm: the infinity norm of T (fmax: any order of the rows gives the
// same value, so a parallel maximum equals this one).
SPEXD_HD double TridiagonalNorm(const double* d, const double* e, int n) {
  double t = 0.0;
  for (int i = 0; i < n; ++i) t = fmax(t, TridiagonalRowNorm(d, e, n, i));
  return t;
}

// A zero pivot of the factorisations below is replaced by eps |T| (the perturbation
// inverse iteration makes anyway); `tnorm` is TridiagonalNorm(d, e, n).
SPEXD_HD double TwistedGuard(double p, double tnorm) {
  const double tiny = 2.220446049250313e-16 * fmax(tnorm, 1e-300);
  return fabs(p) < tiny ? (p < 0.0 ? -tiny : tiny) : p;
}

// Top-down T - lambda I = L+ D+ L+^T: the ratios L+_i = e_i / D+_i (i < n - 1) into
// lp[i * s]. One division per step, on the chain; BottomUp's runs beside it in the kernel.
SPEXD_HD void TwistedTopDown(const double* d, const double* e, int n, double lambda, double tnorm,
                             double* lp, int s) {
  double p = TwistedGuard(d[0] - lambda, tnorm);
  for (int i = 0; i + 1 < n; ++i) {
    const double l = e[i] / p;
    lp[i * s] = l;
    p = TwistedGuard((d[i + 1] - lambda) - e[i] * l, tnorm);
  }
}

// Bottom-up T - lambda I = U- D- U-^T: the ratios U-_i = e_i / D-_{i+1} (i < n - 1) into
// um[i * s].
SPEXD_HD void TwistedBottomUp(const double* d, const double* e, int n, double lambda, double tnorm,
                              double* um, int s) {
  double m = TwistedGuard(d[n - 1] - lambda, tnorm);
  for (int i = n - 2; i >= 0; --i) {
    const double u = e[i] / m;
    um[i * s] = u;
    m = TwistedGuard((d[i] - lambda) - e[i] * u, tnorm);
  }
}

// From the ratios (L+ in z, overwritten; U- in um): the twist r where
// gamma_i = D+_i + D-_i - (d_i - lambda) = (d_i - lambda) - e_{i-1} L+_{i-1} - e_i U-_i is
// least in magnitude, and the unit z with N_r^T z = e_r (z_r = 1 before scaling):
// z_i = -L+_i z_{i+1} above r, z_{i+1} = -U-_i z_i below. Returns r, or -1 if z overflowed
// (z is then not scaled). *rayleigh (if not null): z's Rayleigh quotient,
// lambda + gamma_r / z^T z (left alone where -1 is returned).
SPEXD_HD int TwistedSolve(const double* d, const double* e, int n, double lambda, double* z, int zs,
                          const double* um, int us, double* rayleigh) {
  int r = n - 1;
  double best = INFINITY, gamma_r = 0.0;
  for (int i = n - 1; i >= 0; --i) {
    double gamma = d[i] - lambda;
    if (i > 0) gamma -= e[i - 1] * z[(i - 1) * zs];
    if (i + 1 < n) gamma -= e[i] * um[i * us];
    if (fabs(gamma) < best) {
      best = fabs(gamma);
      gamma_r = gamma;
      r = i;
    }
  }
  double ss = 1.0, prev = 1.0;
  for (int i = r - 1; i >= 0; --i) {
    prev = -z[i * zs] * prev;
    z[i * zs] = prev;
    ss += prev * prev;
  }
  z[r * zs] = 1.0;
  prev = 1.0;
  for (int i = r + 1; i < n; ++i) {
    prev = -um[(i - 1) * us] * prev;
    z[i * zs] = prev;
    ss += prev * prev;
  }
  if (!(ss < INFINITY)) return -1;  // overflow (or NaN input): the caller falls back
  if (rayleigh != nullptr) *rayleigh = lambda + gamma_r / ss;
  const double scale = 1.0 / sqrt(ss);
  for (int i = 0; i < n; ++i) z[i * zs] *= scale;
  return r;
}

// The eigenvector of T for `lambda` into z[0], z[zs], ..., z[(n-1) zs], unit length (the
// three steps above in turn; the kernel runs the first two on two threads). `um`: scratch
// of n - 1 doubles at stride us; `rayleigh` as TwistedSolve's. Returns the twist index r,
// or -1 if z overflowed.
SPEXD_HD int TwistedEigenvector(const double* d, const double* e, int n, double lambda,
                                double tnorm, double* z, int zs, double* um, int us,
                                double* rayleigh) {
  TwistedTopDown(d, e, n, lambda, tnorm, z, zs);
  TwistedBottomUp(d, e, n, lambda, tnorm, um, us);
  return TwistedSolve(d, e, n, lambda, z, zs, um, us, rayleigh);
}

// Where max |Z^T Z - I| of a block's twisted vectors exceeds this, they come from close
// eigenvalues and one Newton-Schulz step is not enough: the callers (TwistedKernel,
// core/cpu/internal/relative_eigen.h) then decompose the block another way.
inline constexpr double kTwistedMaxDeviation = 1e-8;

// Serially (the CPU's relative eigen path and the host tests; TwistedKernel runs the same
// loop with two threads an eigenvalue): column j of z (leading dimension ldz) gets T's
// vector for lambda[j], which is replaced by that vector's Rayleigh quotient; where any
// moved by more than kTwistedRedoShift (relative), every vector again from the quotients.
// um: scratch of n. Returns false if a vector overflowed.
SPEXD_HD bool TwistedVectorsSerial(const double* d, const double* e, int n, double* lambda,
                                   double* z, int ldz, double* um) {
  const double tnorm = TridiagonalNorm(d, e, n);
  for (int pass = 0; pass < 2; ++pass) {
    bool moved = false;
    for (int j = 0; j < n; ++j) {
      const double before = lambda[j];
      if (TwistedEigenvector(d, e, n, before, tnorm, z + static_cast<long>(j) * ldz, 1, um, 1,
                             &lambda[j]) < 0) {
        return false;
      }
      moved = moved || !(fabs(lambda[j] - before) <= kTwistedRedoShift * fabs(before));
    }
    if (!moved) break;
  }
  return true;
}

// G = Z^T Z (n x n, column-major, in g) into the Newton-Schulz factor P = (3I - G) / 2 in
// place, so that Z P is orthonormal to rounding; false where max |G - I| exceeds
// kTwistedMaxDeviation (g then only partly converted).
SPEXD_HD bool NewtonSchulzFactor(double* g, int n) {
  for (int c = 0; c < n; ++c) {
    for (int i = 0; i < n; ++i) {
      double& v = g[static_cast<long>(c) * n + i];
      const double dev = v - (c == i ? 1.0 : 0.0);
      if (!(fabs(dev) <= kTwistedMaxDeviation)) return false;
      v = (c == i ? 1.0 : 0.0) - 0.5 * dev;
    }
  }
  return true;
}

}  // namespace spexd::core::tridiag

#endif  // SPEXD_CORE_NUMERICS_TRIDIAG_VECTORS_H_
