// C_jj = X[j:, j]^T X[j:, j] on DMMA (mma.sync m16n8k4, float64 in and out; core_gram.h).
#include <cuda_pipeline.h>

#include "cuda/kernels/core_gram.h"
#include "cuda/kernels/dmma_tiles.cuh"
#include "cuda/kernels/kernel_common.cuh"
#include "cuda/kernels/launch_check.h"

namespace spexd::cuda {
namespace {

constexpr int kTiles = kCoreGramMaxNt / 8;           // 8-wide column tiles of the block
// Tiles (R, C) with R >= C, by pairs of one column (dmma_tiles.cuh's LowerPair*).
constexpr int kLowerPairs = LowerPairCount(kTiles);
constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kTilesPerWarp = (kLowerPairs + kWarps - 1) / kWarps;
// Rows of X staged per step, stored column by column: xs[c * kRowStride + p]. The stride
// (4 mod 8 doubles) puts a fragment's 8 columns x 4 rows into two conflict-free wavefronts.
constexpr int kChunk = 32;
constexpr int kRowStride = kChunk + 4;
constexpr int kBufDoubles = kCoreGramMaxNt * kRowStride;

// One chunk's products for warp W's tiles (W a template parameter, so that every tile's
// fragment index is a compile-time constant and the fragments stay in registers).
template <int W>
__device__ __forceinline__ void ChunkProducts(const double* xs, int lane,
                                              double (&acc)[kTilesPerWarp][4]) {
  const double* base = xs + (lane / 4) * kRowStride + lane % 4;
#pragma unroll
  for (int p0 = 0; p0 < kChunk; p0 += 4) {
    // f[R] = X(p0 + l%4, 8R + l/4): A of tile row R, B of tile column R; f[kTiles] = 0, a
    // pair's missing row.
    double f[kTiles + 1];
#pragma unroll
    for (int r = 0; r < kTiles; ++r) f[r] = base[r * 8 * kRowStride + p0];
    f[kTiles] = 0.0;
    LowerPairStep<kTiles, kWarps, W, kTilesPerWarp>(f, acc);
  }
}

// Lower triangle of the tiles, mirrored; only elements inside the nt x nt block.
template <int W>
__device__ __forceinline__ void StoreTiles(double* c, int nt, int lane,
                                           const double (&acc)[kTilesPerWarp][4]) {
  StaticFor<kTilesPerWarp>([&](auto i) {
    constexpr int I = decltype(i)::value, u = W + kWarps * I;
    if constexpr (u < kLowerPairs) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int row = (LowerPairRow(kTiles, u) + half) * 8 + lane / 4;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int col = LowerPairCol(kTiles, u) * 8 + 2 * (lane % 4) + h;
          if (row < nt && col <= row) {
            c[row + static_cast<int64_t>(col) * nt] = acc[I][2 * half + h];
            c[col + static_cast<int64_t>(row) * nt] = acc[I][2 * half + h];
          }
        }
      }
    }
  });
}

// Rows [p0, p0 + kChunk) of X[j:, j] (k rows in all) into xs; rows past k are zeros. The
// padding columns nt..kCoreGramMaxNt-1 were zeroed once. A thread keeps its row p (kThreads
// is a multiple of kChunk) and steps by kThreads / kChunk columns: no division an element.
static_assert(kThreads % kChunk == 0, "a thread's row is fixed");
__device__ inline void StageChunk(const double* col0, int64_t ld, int nt, int k, int p0, double* xs) {
  constexpr int kStep = kThreads / kChunk;
  const int p = threadIdx.x % kChunk, c0 = threadIdx.x / kChunk;
  const bool live = p0 + p < k;
  const double* src = col0 + p0 + p + c0 * ld;
  double* dst = xs + c0 * kRowStride + p;
  for (int c = c0; c < nt; c += kStep, src += kStep * ld, dst += kStep * kRowStride) {
    if (live) {
      __pipeline_memcpy_async(dst, src, sizeof(double));
    } else {
      *dst = 0.0;
    }
  }
}

// blockIdx.x = run entry, blockIdx.y = core spectrum sp; j = core_row + sp. The chunks of
// X[j:, j] are double-buffered with cp.async; each warp keeps its tiles' sums in registers.
// The sums run over the rows in order, four rows per tensor-core step: on an H100 the
// outputs are byte-identical to those of the batched cuBLAS GEMMs.
__global__ void __launch_bounds__(kThreads, 4) CoreGramKernel(RunArgs a) {
  extern __shared__ double smem[];
  const PlanDims& D = a.dims;
  const RunEntry e = a.entries[blockIdx.x];
  const DevicePatch d = a.in.patches[e.patch];
  const int nt = D.nwavetot, sp = blockIdx.y, j = d.core_row + sp;
  const int64_t ld = D.ld, j0 = static_cast<int64_t>(j) * nt;
  const int k = d.n - j * nt;
  const double* col0 = SlotMatrix(a, e.slot) + j0 + j0 * ld;  // X(j0, j0)
  for (int idx = threadIdx.x; idx < 2 * (kCoreGramMaxNt - nt) * kRowStride; idx += kThreads) {
    const int b = idx / ((kCoreGramMaxNt - nt) * kRowStride);
    const int r = idx % ((kCoreGramMaxNt - nt) * kRowStride);
    smem[b * kBufDoubles + nt * kRowStride + r] = 0.0;
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  double acc[kTilesPerWarp][4];
#pragma unroll
  for (int i = 0; i < kTilesPerWarp; ++i) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.0;
  const int nchunks = (k + kChunk - 1) / kChunk;
  StageChunk(col0, ld, nt, k, 0, smem);
  __pipeline_commit();
  for (int ch = 0; ch < nchunks; ++ch) {
    if (ch + 1 < nchunks) {
      StageChunk(col0, ld, nt, k, (ch + 1) * kChunk, smem + ((ch + 1) & 1) * kBufDoubles);
      __pipeline_commit();
      __pipeline_wait_prior(1);
    } else {
      __pipeline_wait_prior(0);
    }
    __syncthreads();
    const double* xs = smem + (ch & 1) * kBufDoubles;
    switch (warp) {  // warp-uniform
      case 0: ChunkProducts<0>(xs, lane, acc); break;
      case 1: ChunkProducts<1>(xs, lane, acc); break;
      case 2: ChunkProducts<2>(xs, lane, acc); break;
      default: ChunkProducts<3>(xs, lane, acc); break;
    }
    __syncthreads();
  }
  double* c = a.slots.c + (static_cast<int64_t>(e.slot) * D.nper + sp) * nt * nt;
  switch (warp) {
    case 0: StoreTiles<0>(c, nt, lane, acc); break;
    case 1: StoreTiles<1>(c, nt, lane, acc); break;
    case 2: StoreTiles<2>(c, nt, lane, acc); break;
    default: StoreTiles<3>(c, nt, lane, acc); break;
  }
}

static_assert(kWarps == 4, "CoreGramKernel dispatches four warps");

}  // namespace

cudaError_t LaunchCoreGram(const RunArgs& args, cudaStream_t stream) {
  if (args.count == 0) return cudaSuccess;
  if (args.dims.nwavetot > kCoreGramMaxNt) return cudaErrorInvalidValue;
  const int smem = static_cast<int>(sizeof(double)) * 2 * kBufDoubles;
  if (cudaError_t err = AllowSharedMemory(reinterpret_cast<const void*>(CoreGramKernel), smem); err != cudaSuccess) {
    return err;
  }
  const dim3 grid(static_cast<unsigned>(args.count), static_cast<unsigned>(args.dims.nper));
  CoreGramKernel<<<grid, kThreads, smem, stream>>>(args);
  return SPEXD_CHECK_LAUNCH(stream);
}

}  // namespace spexd::cuda
