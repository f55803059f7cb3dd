// Float64 results narrowed on the device to the bytes a FITS frame file stores
// (file_narrowing.cu): big-endian float32, bit for bit what the host's
// core::NarrowToBigEndianFloat32 writes for the same values, so that a bundle's
// RESOLUTION crosses the bus and the host once, at half its float64 size.
#ifndef SPEXD_CUDA_FILE_NARROWING_H_
#define SPEXD_CUDA_FILE_NARROWING_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace spexd::cuda {

// out[i] = the float32 nearest src[i] (ties to even; float64 denormals to signed zero,
// float32 denormals kept), its bytes in big-endian order, for i < n. A NaN keeps its sign
// and the top 22 bits of its payload with the quiet bit set, as the x86 conversion the host
// uses does (the device's own conversion would give one canonical NaN).
cudaError_t LaunchNarrowToBigEndianFloat32(const double* src, std::size_t n, uint32_t* out,
                                           cudaStream_t stream);

}  // namespace spexd::cuda

#endif  // SPEXD_CUDA_FILE_NARROWING_H_
