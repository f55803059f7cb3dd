// Launchers of the per-pixel and per-column patch products (extraction-spec §2.11–2.12):
// model A x, chi2 pixels with the compat rule, pixmask_fraction and chi2pix of the kept
// core bins, and the per-bundle model canvas. Enqueue on `stream`, no synchronisation.
#ifndef SPEXD_CUDA_PATCH_PRODUCTS_H_
#define SPEXD_CUDA_PATCH_PRODUCTS_H_

#include <cuda_runtime_api.h>

#include "cuda/kernels/kernel_args.h"

namespace spexd::cuda {

// Per window pixel: m = A x over all unknowns, the chi2 rule of the compat setting, and
// (when args.want_model) the core-flux model with its all-zero / non-finite flags.
cudaError_t LaunchPixelModel(const RunArgs& args, cudaStream_t stream);
// Per kept core bin: pixmask_fraction and chi2pix into the batch outputs.
cudaError_t LaunchColumnSums(const RunArgs& args, cudaStream_t stream);

struct CanvasArgs {
  const CanvasDesc* desc;    // [nbundles]
  const CanvasPatch* list;   // patch lists, in patch order
  const DevicePatch* patches;
  const double* model;       // slot models [slots][max_npix]
  const int32_t* status;     // [slots]
  const int32_t* mflags;     // [slots]
  int max_npix;
  int64_t canvas_stride;     // elements per bundle canvas
  double* canvas;            // out [nbundles][canvas_stride]
  int nbundles;
};
// Sums the patch models of each bundle onto its canvas in patch order (deterministic),
// skipping failed, all-zero and non-finite ones (spec §2.12).
cudaError_t LaunchStitchCanvas(const CanvasArgs& args, cudaStream_t stream);

}  // namespace spexd::cuda

#endif  // SPEXD_CUDA_PATCH_PRODUCTS_H_
