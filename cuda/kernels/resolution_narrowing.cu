#include "cuda/kernels/resolution_narrowing.h"

#include <algorithm>

#include "cuda/kernels/launch_check.h"

namespace spexd::cuda {
namespace {

__device__ __forceinline__ uint32_t NarrowBits(double d) {
  const unsigned long long u = static_cast<unsigned long long>(__double_as_longlong(d));
  if ((u & 0x7fffffffffffffffull) > 0x7ff0000000000000ull) {  // NaN: as x86's cvtsd2ss
    return (static_cast<uint32_t>(u >> 32) & 0x80000000u) | 0x7fc00000u |
           (static_cast<uint32_t>(u >> 29) & 0x007fffffu);
  }
  float f;
  // Round to nearest even with float32 denormals kept, whatever -ftz the build sets.
  asm("cvt.rn.f32.f64 %0, %1;" : "=f"(f) : "d"(d));
  return static_cast<uint32_t>(__float_as_uint(f));
}

constexpr int kThreads = 256;
constexpr std::size_t kMaxBlocks = 4096;  // a launch's, shared by its groups (grid-stride beyond)

// blockIdx.y = group; its blocks stride over the group's values. kFile: the words in
// big-endian order, each thread summing those it writes and the block's sum added to the
// group's once; else in the host's order. Templated so that the loop holds no test.
template <bool kFile>
__global__ void __launch_bounds__(kThreads) NarrowKernel(const double* __restrict__ src,
                                                         std::size_t per_group,
                                                         uint32_t* __restrict__ out,
                                                         unsigned long long* sums) {
  const std::size_t base = static_cast<std::size_t>(blockIdx.y) * per_group;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  unsigned long long sum = 0;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < per_group;
       i += stride) {
    const uint32_t bits = NarrowBits(src[base + i]);
    out[base + i] = kFile ? __byte_perm(bits, 0, 0x0123) : bits;  // byte swap for the file
    sum += bits;  // the big-endian word's value
  }
  if constexpr (kFile) {
    __shared__ unsigned long long warp_sums[kThreads / 32];
    for (int off = 16; off > 0; off >>= 1) sum += __shfl_down_sync(0xffffffffu, sum, off);
    if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = sum;
    __syncthreads();
    if (threadIdx.x == 0) {
      unsigned long long block = 0;
      for (int w = 0; w < kThreads / 32; ++w) block += warp_sums[w];
      atomicAdd(sums + blockIdx.y, block);  // integer sums: any order gives the same total
    }
  }
}

template <bool kFile>
cudaError_t Launch(const double* src, std::size_t groups, std::size_t per_group, uint32_t* out,
                   unsigned long long* sums, cudaStream_t stream) {
  if (groups == 0 || per_group == 0) return cudaSuccess;
  const std::size_t per = std::max<std::size_t>(1, kMaxBlocks / groups);
  const unsigned blocks = static_cast<unsigned>(std::min(per, (per_group + kThreads - 1) / kThreads));
  NarrowKernel<kFile><<<dim3(blocks, static_cast<unsigned>(groups)), kThreads, 0, stream>>>(
      src, per_group, out, sums);
  return SPEXD_CHECK_LAUNCH(stream);
}

}  // namespace

cudaError_t LaunchNarrowToFileWords(const double* src, std::size_t groups, std::size_t per_group,
                                    uint32_t* out, unsigned long long* sums, cudaStream_t stream) {
  return Launch<true>(src, groups, per_group, out, sums, stream);
}

cudaError_t LaunchNarrowToFloat32(const double* src, std::size_t n, uint32_t* out, cudaStream_t stream) {
  return Launch<false>(src, 1, n, out, nullptr, stream);
}

}  // namespace spexd::cuda
