// Kernel launcher: reads a frame from device memory that another process owns (a CUDA
// IPC region), applies the pixel rules of core/numerics/pixel_rules.h and writes the
// float64 image and ivar planes of the workspace. Usable from .cu files (no Abseil).
#ifndef SPEXD_CUDA_IMAGE_IMPORT_H_
#define SPEXD_CUDA_IMAGE_IMPORT_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace spexd::cuda {

struct ImportPlanes {
  const void* image = nullptr;     // float32 or float64 [n]
  const void* ivar = nullptr;      // same type
  const uint16_t* mask = nullptr;  // [n] or null
  bool float64 = false;
  uint16_t bad_bits = 0;  // core::MaskBadBits(policy)
};

// image[i], ivar[i] for i < n, on `stream`. Reads the planes once (coalesced).
cudaError_t LaunchImportPixels(const ImportPlanes& in, double* image, double* ivar, std::size_t n,
                               cudaStream_t stream);

}  // namespace spexd::cuda

#endif  // SPEXD_CUDA_IMAGE_IMPORT_H_
