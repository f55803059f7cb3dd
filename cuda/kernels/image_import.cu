// The widening is exact (float32 -> float64) and the rule is core's, so a frame read
// here gives the planes a host read of the same values gives (core::ApplyPixelRules).
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

}  // namespace

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
