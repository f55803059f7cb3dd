// The widening is exact (float32 -> float64) and the rule is core's, so a frame read
// here gives the planes a host read of the same values gives (core::ApplyPixelRules), and
// the same counts.
#include "cuda/kernels/image_import.h"

#include "core/numerics/pixel_rules.h"
#include "cuda/kernels/launch_check.h"

namespace spexd::cuda {
namespace {

constexpr int kThreads = 256;

template <typename T>
__global__ void ImportPixelsKernel(const T* src_image, const T* src_ivar, const uint16_t* mask,
                                   uint16_t bad_bits, double* image, double* ivar, std::size_t n) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  double im = static_cast<double>(src_image[i]);
  double iv = static_cast<double>(src_ivar[i]);
  (void)core::ApplyPixelRule(bad_bits, mask != nullptr ? mask[i] : uint16_t{0}, &im, &iv);
  image[i] = im;
  ivar[i] = iv;
}

// One thread a pixel of the columns, row-major within them (coalesced along a row).
__global__ void ImportRawColumnsKernel(RawPlaneColumns in, double* image, double* ivar) {
  const int cols = in.x1 - in.x0;
  const std::size_t total = static_cast<std::size_t>(cols) * static_cast<std::size_t>(in.height);
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  unsigned what = 0;
  if (i < total) {
    const std::size_t y = i / static_cast<std::size_t>(cols);
    const std::size_t p = y * static_cast<std::size_t>(in.width) + in.x0 +
                          (i - y * static_cast<std::size_t>(cols));
    // __byte_perm with selector 0x0123 reverses the word's bytes: big-endian to native.
    double im = static_cast<double>(__uint_as_float(__byte_perm(in.image[p], 0, 0x0123)));
    double iv = static_cast<double>(__uint_as_float(__byte_perm(in.ivar[p], 0, 0x0123)));
    what = core::ApplyPixelRule(in.bad_bits, in.mask != nullptr ? in.mask[p] : uint16_t{0}, &im, &iv);
    image[p] = im;
    ivar[p] = iv;
  }
  // A warp's counts in one atomic each (and none for a warp the rules left alone).
  const unsigned masked = __ballot_sync(0xffffffffu, (what & core::kPixelMasked) != 0);
  const unsigned nonfinite = __ballot_sync(0xffffffffu, (what & core::kPixelNonfinite) != 0);
  if ((threadIdx.x & 31u) == 0) {
    if (masked != 0) atomicAdd(&in.counts[0], static_cast<unsigned long long>(__popc(masked)));
    if (nonfinite != 0) atomicAdd(&in.counts[1], static_cast<unsigned long long>(__popc(nonfinite)));
  }
}

}  // namespace

cudaError_t LaunchImportRawColumns(const RawPlaneColumns& in, double* image, double* ivar,
                                   cudaStream_t stream) {
  if (in.x1 <= in.x0 || in.height <= 0) return cudaSuccess;
  const std::size_t total = static_cast<std::size_t>(in.x1 - in.x0) * static_cast<std::size_t>(in.height);
  const unsigned blocks = static_cast<unsigned>((total + kThreads - 1) / kThreads);
  ImportRawColumnsKernel<<<blocks, kThreads, 0, stream>>>(in, image, ivar);
  return SPEXD_CHECK_LAUNCH(stream);
}

cudaError_t LaunchImportPixels(const ImportPlanes& in, double* image, double* ivar, std::size_t n,
                               cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  const unsigned blocks = static_cast<unsigned>((n + kThreads - 1) / kThreads);
  if (in.float64) {
    ImportPixelsKernel<<<blocks, kThreads, 0, stream>>>(static_cast<const double*>(in.image),
                                                       static_cast<const double*>(in.ivar), in.mask,
                                                       in.bad_bits, image, ivar, n);
  } else {
    ImportPixelsKernel<<<blocks, kThreads, 0, stream>>>(static_cast<const float*>(in.image),
                                                       static_cast<const float*>(in.ivar), in.mask,
                                                       in.bad_bits, image, ivar, n);
  }
  return SPEXD_CHECK_LAUNCH(stream);
}

}  // namespace spexd::cuda
