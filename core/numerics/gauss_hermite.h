// Per-element math of the pixel-integrated GaussHermite stamp (extraction-spec §1.4):
// the one definition that core/plan/spots.cc and the spot kernel (cuda/kernels/spot_kernels.cu, built
// with --fmad=false so that it rounds as written) both evaluate.
#ifndef SPEXD_CORE_GAUSS_HERMITE_H_
#define SPEXD_CORE_GAUSS_HERMITE_H_

#include <cmath>

#include "core/numerics/host_device.h"

namespace spexd::core {

// Sub-pixel offset of the trace from the stamp's centre pixel, ((pos + 0.5) mod 1) − 0.5
// (§1.4 step 3). The centre comes from the stamp corner (`corner + hsize`) so that stamp
// and corner always agree; when the corner was computed from this same position the two
// floors agree and this is exactly the floored modulo. The other branch serves a position
// evaluated on another device that rounded across a pixel boundary.
SPEXD_HD double SubPixelOffset(double pos, int corner, int hsize) {
  const double t = pos + 0.5;
  const double fl = floor(t);
  const double centre = static_cast<double>(corner + hsize);
  if (fl == centre) return (t - fl) - 0.5;
  return pos - centre;
}

// Edge k (0..2·hsize+1) of a stamp axis in units of sigma: subtract, then divide
// (§1.4 step 4).
SPEXD_HD double StampEdge(int k, int hsize, double d, double sigma) {
  return ((static_cast<double>(k - hsize) - 0.5) - d) / sigma;
}

// At one edge t: erf(t/√2) and hg[m] = He_m(t)·G(t) for m = 0..deg−1, with the
// probabilists' Hermite recurrence He_m = He_{m−1}·t − He_{m−2}·(m−1) (§1.4 steps 5–6).
SPEXD_HD void EdgeTerms(double t, int deg, double* erf_out, double* hg) {
  const double kSqrt2 = 1.4142135623730951;     // sqrt(2), correctly rounded
  const double kSqrt2Pi = 2.5066282746310002;   // sqrt(2 pi), correctly rounded
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

// Pixel-integrated basis P_m[k] of pixel k from the terms of its edges k and k+1
// (§1.4 step 6); `edges` is laid out [edge][1 + deg] = (erf, hg_0 .. hg_{deg−1}).
SPEXD_HD double PixelBasis(const double* edges, int deg, int m, int k) {
  const double* lo = edges + k * (1 + deg);
  const double* hi = lo + (1 + deg);
  if (m == 0) return 0.5 * (hi[0] - lo[0]);
  return lo[m] - hi[m];  // hg_{m-1} sits at offset m
}

}  // namespace spexd::core

#endif  // SPEXD_CORE_GAUSS_HERMITE_H_
