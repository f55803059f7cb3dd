// The spot kernel's view of the PSF coefficient tables. The math itself is core's
// (core/numerics/legendre.h, core/numerics/gauss_hermite.h), shared with the host evaluation.
#ifndef SPEXD_CUDA_SPOT_MATH_H_
#define SPEXD_CUDA_SPOT_MATH_H_

#include "core/numerics/gauss_hermite.h"
#include "core/numerics/host_device.h"
#include "core/numerics/legendre.h"

namespace spexd::cuda {

// Coefficient table of one quantity for every fibre: X or Y trace (Clenshaw, §1.3) or a
// PSF-table parameter (Vandermonde sum, §1.3).
struct LegendreRow {
  double wavemin, wavemax;
  int ncoeff;
  int clenshaw;  // 1: numpy legval (traces); 0: Vandermonde row sum (PSF table)
};

SPEXD_HD double EvaluateLegendreRow(const LegendreRow& row, const double* coeff, double wave) {
  const double u = core::ReducedWavelength(wave, row.wavemin, row.wavemax);
  return row.clenshaw ? core::LegendreClenshaw(coeff, row.ncoeff, u)
                      : core::LegendreVanderSum(coeff, row.ncoeff, u);
}

}  // namespace spexd::cuda

#endif  // SPEXD_CUDA_SPOT_MATH_H_
