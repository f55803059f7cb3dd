// Float64 results narrowed on the device to the float32 bytes their one consumer takes
// (resolution_narrowing.cu): big-endian for a FITS frame file, little-endian for a float32
// stream; bit for bit what the host's core::NarrowToBigEndianFloat32 and NarrowToFloat32
// write for the same values, so that a bundle's RESOLUTION crosses the bus and the host
// once, at half its float64 size.
#ifndef SPEXD_CUDA_RESOLUTION_NARROWING_H_
#define SPEXD_CUDA_RESOLUTION_NARROWING_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace spexd::cuda {

// out[i] = the float32 nearest src[i] (ties to even; float64 denormals to signed zero,
// float32 denormals kept), its bytes in the host's (little-endian) order, for i < n: the
// float32 stream's. A NaN keeps its sign and the top 22 bits of its payload with the quiet
// bit set, as the x86 conversion the host uses does (the device's own conversion would give
// one canonical NaN).
cudaError_t LaunchNarrowToFloat32(const double* src, std::size_t n, uint32_t* out, cudaStream_t stream);

// The same in big-endian order, the frame file's, for `groups` runs of `per_group` values
// (a batch's bundles), adding to sums[g] the exact sum of group g's 32-bit words as written,
// read big-endian (core::BigEndianWordSum's): the file's DATASUM takes them instead of a
// host pass over the bytes. The caller zeroes `sums` first.
cudaError_t LaunchNarrowToFileWords(const double* src, std::size_t groups, std::size_t per_group,
                                    uint32_t* out, unsigned long long* sums, cudaStream_t stream);

}  // namespace spexd::cuda

#endif  // SPEXD_CUDA_RESOLUTION_NARROWING_H_
