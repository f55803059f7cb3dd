// Per-element math of the GaussHermite spot evaluation (extraction-spec §1.3–1.4), shared
// by the spot kernel and a host test that checks it against core::EvaluateSpot. The
// kernel file is compiled with --fmad=false so that these expressions round exactly as
// written, like the host code.
#ifndef SPEXD_CUDA_SPOT_MATH_H_
#define SPEXD_CUDA_SPOT_MATH_H_

#include <cmath>

#include "cuda/host_device.h"

namespace spexd::cuda {

// Coefficient table of one quantity for every fibre: X or Y trace (Clenshaw, §1.3) or a
// PSF-table parameter (Vandermonde sum, §1.3).
struct LegendreRow {
  double wavemin, wavemax;
  int ncoeff;
  int clenshaw;  // 1: numpy legval (traces); 0: Vandermonde row sum (PSF table)
};

// u = (λ − WMIN) · (2 / (WMAX − WMIN)) − 1 in this operation order (§1.3).
SPEXD_HD double ReducedWave(double wave, double wmin, double wmax) {
  const double scale = 2.0 / (wmax - wmin);
  return (wave - wmin) * scale - 1.0;
}

// numpy legval by Clenshaw (§1.3), dividing by d as numpy does.
SPEXD_HD double LegendreClenshawHD(const double* c, int n, double u) {
  if (n == 1) return c[0];
  if (n == 2) return c[0] + c[1] * u;
  double a = c[n - 2], b = c[n - 1];
  double d = static_cast<double>(n);
  for (int i = 3; i <= n; ++i) {
    const double t = a;
    d = d - 1.0;
    a = c[n - i] - (b * (d - 1.0)) / d;
    b = t + (b * u * (2.0 * d - 1.0)) / d;
  }
  return a + b * u;
}

// Σ_k L_k(u) c_k with L_0 = 1, L_1 = u, L_k = (L_{k−1}·u·(2k−1) − L_{k−2}·(k−1)) / k.
SPEXD_HD double LegendreVanderSum(const double* c, int n, double u) {
  double lm2 = 1.0, lm1 = u;
  double sum = c[0] * lm2;
  if (n > 1) sum += c[1] * lm1;
  for (int k = 2; k < n; ++k) {
    const double kd = static_cast<double>(k);
    const double l = (lm1 * u * (2.0 * kd - 1.0) - lm2 * (kd - 1.0)) / kd;
    sum += c[k] * l;
    lm2 = lm1;
    lm1 = l;
  }
  return sum;
}

SPEXD_HD double EvaluateLegendreRow(const LegendreRow& row, const double* coeff, double wave) {
  const double u = ReducedWave(wave, row.wavemin, row.wavemax);
  return row.clenshaw ? LegendreClenshawHD(coeff, row.ncoeff, u)
                      : LegendreVanderSum(coeff, row.ncoeff, u);
}

// Sub-pixel offset of the trace from the stamp centre pixel (§1.4 step 3). The centre
// comes from the plan's corner (`corner + hsize`) so that stamp and corner always agree;
// for the same position this equals ((pos + 0.5) mod 1) − 0.5 exactly.
SPEXD_HD double SubPixelOffset(double pos, int corner, int hsize) {
  const double t = pos + 0.5;
  const double fl = floor(t);
  const double centre = static_cast<double>(corner + hsize);
  if (fl == centre) return (t - fl) - 0.5;
  return pos - centre;  // device/host rounding differed at a pixel boundary
}

// Edge k of a stamp axis in units of sigma (§1.4 step 4).
SPEXD_HD double StampEdge(int k, int hsize, double d, double sigma) {
  return ((static_cast<double>(k - hsize) - 0.5) - d) / sigma;
}

// At one edge t: erf(t/√2) and hg[m] = He_m(t)·G(t) for m = 0..deg−1 (§1.4 steps 5–6).
SPEXD_HD void EdgeTerms(double t, int deg, double* erf_out, double* hg) {
  const double kSqrt2 = 1.4142135623730951;
  const double kSqrt2Pi = 2.5066282746310002;
  *erf_out = erf(t / kSqrt2);
  const double g = exp(-0.5 * (t * t)) / kSqrt2Pi;
  double hm2 = 1.0, hm1 = t;
  for (int m = 0; m < deg; ++m) {
    double h;
    if (m == 0) {
      h = 1.0;
    } else if (m == 1) {
      h = t;
    } else {
      h = hm1 * t - hm2 * static_cast<double>(m - 1);
      hm2 = hm1;
      hm1 = h;
    }
    hg[m] = h * g;
  }
}

// Pixel-integrated basis P_m[k] from the edge terms of edges k and k+1 (§1.4 step 6):
// edge data laid out as [edge][1 + deg] = (erf, hg_0 .. hg_{deg−1}).
SPEXD_HD double PixelBasis(const double* edges, int deg, int m, int k) {
  const double* lo = edges + k * (1 + deg);
  const double* hi = lo + (1 + deg);
  if (m == 0) return 0.5 * (hi[0] - lo[0]);
  return lo[m] - hi[m];  // hg_{m-1} sits at offset m
}

}  // namespace spexd::cuda

#endif  // SPEXD_CUDA_SPOT_MATH_H_
