// Launcher for the GPU spot evaluation (extraction-spec §1.3–1.4): every stamp of the
// plan's fibres on the padded grid, evaluated once per Geometry and kept on the device.
#ifndef SPEXD_CUDA_SPOT_KERNELS_H_
#define SPEXD_CUDA_SPOT_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/kernels/spot_math.h"

namespace spexd::cuda {

struct SpotKernelArgs {
  // Rows: 0 = X trace, 1 = Y trace, 2 + k = PSF parameter k (GHSIGX, GHSIGY, GH-i-j with
  // i fastest, as core::Psf orders them). Coefficients [nrows][nspec_psf][maxc].
  const LegendreRow* rows;
  const double* coeff;
  int nrows, nspec_psf, maxc;
  const double* fullwave;  // [nfull]
  int nfull;
  const int32_t* xc;  // plan corners [nspec][nfull]
  const int32_t* yc;
  int specmin, nspec;
  int hsizex, hsizey, ghdegx, ghdegy;
  double* spots;  // out: [nspec][nfull][2*hsizey+1][2*hsizex+1]
};

// Enqueues the evaluation on `stream`; does not synchronise. Returns the launch status.
cudaError_t LaunchEvaluateSpots(const SpotKernelArgs& args, cudaStream_t stream);

}  // namespace spexd::cuda

#endif  // SPEXD_CUDA_SPOT_KERNELS_H_
