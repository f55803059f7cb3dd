// Legendre evaluation of the PSF's wavelength dependence (extraction-spec §1.3), in the
// exact operation order of numpy, for the host (core/io/psf.cc, core/plan/spots.cc) and the spot
// kernel (cuda/kernels/spot_kernels.cu) alike.
#ifndef SPEXD_CORE_LEGENDRE_H_
#define SPEXD_CORE_LEGENDRE_H_

#include "core/numerics/host_device.h"

namespace spexd::core {

// Reduced wavelength u = (λ − WMIN) · (2 / (WMAX − WMIN)) − 1: the scale factor first,
// then the product, then the shift (§1.3).
SPEXD_HD double ReducedWavelength(double wave, double wavemin, double wavemax) {
  const double scale = 2.0 / (wavemax - wavemin);
  return (wave - wavemin) * scale - 1.0;
}

// numpy.polynomial.legendre.legval of c[0..n) at u by Clenshaw, operation for operation,
// dividing by d as numpy does (§1.3; the traces). 0 for an empty series.
SPEXD_HD double LegendreClenshaw(const double* c, int n, double u) {
  if (n <= 0) return 0.0;
  if (n == 1) return c[0];
  if (n == 2) return c[0] + c[1] * u;
  double a = c[n - 2];
  double b = c[n - 1];
  int d = n;
  for (int i = 3; i <= n; ++i) {
    const double t = a;
    d = d - 1;
    const double dd = static_cast<double>(d);
    a = c[n - i] - (b * (dd - 1.0)) / dd;
    b = t + (b * u * (2.0 * dd - 1.0)) / dd;
  }
  return a + b * u;
}

// Calls f(k, L_k(u)) for k = 0..deg in order, by numpy's legvander recurrence
// L_k = (L_{k−1}·u·(2k−1) − L_{k−2}·(k−1)) / k (§1.3). Nothing for deg < 0.
template <typename F>
SPEXD_HD void ForEachLegendre(double u, int deg, F&& f) {
  if (deg < 0) return;
  double lm2 = 1.0, lm1 = u;
  f(0, lm2);
  if (deg > 0) f(1, lm1);
  for (int k = 2; k <= deg; ++k) {
    const double dk = static_cast<double>(k);
    const double l = (lm1 * u * (2.0 * dk - 1.0) - lm2 * (dk - 1.0)) / dk;
    f(k, l);
    lm2 = lm1;
    lm1 = l;
  }
}

// Vandermonde row out[0..deg] = L_0(u)..L_deg(u) (numpy legvander).
SPEXD_HD void LegendreVander(double u, int deg, double* out) {
  ForEachLegendre(u, deg, [out](int k, double l) { out[k] = l; });
}

// Σ_k c[k]·L_k(u) over k = 0..n−1, summed in k order: the PSF-table parameters (§1.3).
// Equal to the dot product of c with LegendreVander(u, n − 1).
SPEXD_HD double LegendreVanderSum(const double* c, int n, double u) {
  double sum = 0.0;
  ForEachLegendre(u, n - 1, [&sum, c](int k, double l) { sum += l * c[k]; });
  return sum;
}

// Dot product of a Vandermonde row with coefficients c[0..n), in k order (the host
// evaluates one row per wavelength for all PSF-table parameters; same sum as above).
SPEXD_HD double LegendreDot(const double* basis, const double* c, int n) {
  double sum = 0.0;
  for (int k = 0; k < n; ++k) sum += basis[k] * c[k];
  return sum;
}

}  // namespace spexd::core

#endif  // SPEXD_CORE_LEGENDRE_H_
