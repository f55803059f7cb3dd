// Kernel launchers: read a frame from device memory that another process owns (a CUDA
// IPC region), or the raw planes a preproc file holds (uploaded as they are), apply the
// pixel rules of core/numerics/pixel_rules.h and write the float64 image and ivar planes
// of the workspace. Usable from .cu files (no Abseil).
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

// Columns [x0, x1) of raw planes (core::PreprocImage::image_raw: big-endian float32 words,
// [height][width], as the file stores them) and their MASK bits.
struct RawPlaneColumns {
  const uint32_t* image = nullptr;
  const uint32_t* ivar = nullptr;
  const uint16_t* mask = nullptr;  // or null: no MASK
  uint16_t bad_bits = 0;           // core::MaskBadBits(policy)
  int width = 0, height = 0, x0 = 0, x1 = 0;
  // Pixels the rules gave ivar 0 for the mask or a negative ivar ([0]) and for a
  // non-finite value ([1]), added to (core::PreprocImage::n_masked, n_nonfinite).
  unsigned long long* counts = nullptr;
};

// Byte order, widening and the pixel rules in one pass: image[p], ivar[p] for the pixels p
// of the columns, on `stream`; the same values the host reader gives.
cudaError_t LaunchImportRawColumns(const RawPlaneColumns& in, double* image, double* ivar,
                                   cudaStream_t stream);

}  // namespace spexd::cuda

#endif  // SPEXD_CUDA_IMAGE_IMPORT_H_
