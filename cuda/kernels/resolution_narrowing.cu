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

// Templated on the byte order so that the loop holds no per-value test.
template <bool kBigEndian>
__global__ void NarrowKernel(const double* __restrict__ src, std::size_t n,
                             uint32_t* __restrict__ out) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const uint32_t bits = NarrowBits(src[i]);
    out[i] = kBigEndian ? __byte_perm(bits, 0, 0x0123) : bits;  // byte swap for the file
  }
}

constexpr int kSumThreads = 256;

// blockIdx.y = group; its blocks stride over the group's values, each thread summing the
// words it writes, the block's sum added once.
__global__ void __launch_bounds__(kSumThreads) NarrowFileWordsKernel(const double* __restrict__ src,
                                                                     std::size_t per_group,
                                                                     uint32_t* __restrict__ out,
                                                                     unsigned long long* sums) {
  __shared__ unsigned long long warp_sums[kSumThreads / 32];
  const std::size_t base = static_cast<std::size_t>(blockIdx.y) * per_group;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  unsigned long long sum = 0;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < per_group;
       i += stride) {
    const uint32_t bits = NarrowBits(src[base + i]);
    out[base + i] = __byte_perm(bits, 0, 0x0123);
    sum += bits;  // the big-endian word's value
  }
  for (int off = 16; off > 0; off >>= 1) sum += __shfl_down_sync(0xffffffffu, sum, off);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = sum;
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned long long block = 0;
    for (int w = 0; w < kSumThreads / 32; ++w) block += warp_sums[w];
    atomicAdd(sums + blockIdx.y, block);  // integer sums: any order gives the same total
  }
}

}  // namespace

cudaError_t LaunchNarrowToFileWords(const double* src, std::size_t groups, std::size_t per_group,
                                    uint32_t* out, unsigned long long* sums, cudaStream_t stream) {
  if (groups == 0 || per_group == 0) return cudaSuccess;
  constexpr std::size_t kMaxBlocks = 512;  // a group's blocks (grid-stride beyond)
  const unsigned blocks =
      static_cast<unsigned>(std::min(kMaxBlocks, (per_group + kSumThreads - 1) / kSumThreads));
  NarrowFileWordsKernel<<<dim3(blocks, static_cast<unsigned>(groups)), kSumThreads, 0, stream>>>(
      src, per_group, out, sums);
  return SPEXD_CHECK_LAUNCH(stream);
}

cudaError_t LaunchNarrowToFloat32(const double* src, std::size_t n, bool big_endian, uint32_t* out,
                                  cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  constexpr int kThreads = 256;
  constexpr std::size_t kMaxBlocks = 4096;  // grid-stride beyond: ~1 M values per pass
  const unsigned blocks = static_cast<unsigned>(std::min(kMaxBlocks, (n + kThreads - 1) / kThreads));
  if (big_endian) {
    NarrowKernel<true><<<blocks, kThreads, 0, stream>>>(src, n, out);
  } else {
    NarrowKernel<false><<<blocks, kThreads, 0, stream>>>(src, n, out);
  }
  return SPEXD_CHECK_LAUNCH(stream);
}

}  // namespace spexd::cuda
