// One step of the trailing-first block inversion (batch_layout.h) on the FP64 tensor cores:
// for column block j = nspectot-1-r of each patch and each row block i > j,
//   X[i, j] = -(X[i, j+1:j+1+inner] · L[j+1:j+1+inner, j]) · X_jj,
// both products in one thread block (the first product's 80 x 80 tile stays on chip), the
// result into the GEMM scratch, then copied over L[j+1:, j] (which other row blocks read).
// The sums run over the inner index in order, four at a time, like cuBLAS's DGEMM (the
// blocks of X above the diagonal are zero, so the inner range is cut at i).
#include <cuda_pipeline.h>

#include "cuda/block_inverse.h"
#include "cuda/dmma_tile.cuh"
#include "cuda/kernel_common.cuh"
#include "cuda/launch_check.h"

namespace spexd::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kTilesPerWarp = kDmmaTiles * kDmmaTiles / kWarps;  // 25
constexpr int kChunk = 32;  // inner rows staged per step of the first product
// A(m, k) at a[k * kStrideA + m] (8 mod 16 doubles), B(k, c) at b[c * kStrideB + k]
// (4 mod 8): a fragment's 4 x 8 reads fall into two conflict-free wavefronts.
constexpr int kStrideA = kDmmaEdge + 8;
constexpr int kStrideB1 = kChunk + 4;
constexpr int kStrideB2 = kDmmaEdge + 4;
constexpr int kBufA = kChunk * kStrideA, kBufB = kDmmaEdge * kStrideB1;
constexpr int kPhase1 = 2 * (kBufA + kBufB);
constexpr int kPhase2 = kDmmaEdge * kStrideA + kDmmaEdge * kStrideB2;
constexpr int kSmemDoubles = kPhase1 > kPhase2 ? kPhase1 : kPhase2;
static_assert(kDmmaTiles * kDmmaTiles % kWarps == 0, "whole tiles per warp");

// One 4-deep step of warp W's 25 tiles (tile t = W + 4i is (t / 10, t % 10)); a and b point
// at inner index k0.
template <int W, int kStrideB>
__device__ __forceinline__ void Step(const double* a, const double* b, int lane,
                                     double (&acc)[kTilesPerWarp][2]) {
  double fa[kDmmaTiles], fb[kDmmaTiles];
#pragma unroll
  for (int r = 0; r < kDmmaTiles; ++r) {
    fa[r] = a[(lane % 4) * kStrideA + 8 * r + lane / 4];
    fb[r] = b[(8 * r + lane / 4) * kStrideB + lane % 4];
  }
#pragma unroll
  for (int i = 0; i < kTilesPerWarp; ++i) {
    const int t = W + kWarps * i;
    Dmma(acc[i], fa[t / kDmmaTiles], fb[t % kDmmaTiles]);
  }
}

template <int W>
__device__ __forceinline__ void Chunk1(const double* a, const double* b, int lane,
                                       double (&acc)[kTilesPerWarp][2]) {
#pragma unroll
  for (int k0 = 0; k0 < kChunk; k0 += 4) Step<W, kStrideB1>(a + k0 * kStrideA, b + k0, lane, acc);
}

template <int W>
__device__ __forceinline__ void Product2(const double* a, const double* b, int nt, int lane,
                                         double (&acc)[kTilesPerWarp][2]) {
  for (int k0 = 0; k0 < nt; k0 += 4) Step<W, kStrideB2>(a + k0 * kStrideA, b + k0, lane, acc);
}

// The first product's tile into shared memory as the second's A (its columns past nt are
// zero: B's padding columns were).
template <int W>
__device__ __forceinline__ void StoreT(double* ts, int lane, double (&acc)[kTilesPerWarp][2]) {
#pragma unroll
  for (int i = 0; i < kTilesPerWarp; ++i) {
    const int t = W + kWarps * i, m = 8 * (t / kDmmaTiles) + lane / 4;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      ts[(8 * (t % kDmmaTiles) + 2 * (lane % 4) + h) * kStrideA + m] = acc[i][h];
      acc[i][h] = 0.0;
    }
  }
}

template <int W>
__device__ __forceinline__ void StoreOut(double* out, int64_t ldo, int nt, int lane,
                                         const double (&acc)[kTilesPerWarp][2]) {
#pragma unroll
  for (int i = 0; i < kTilesPerWarp; ++i) {
    const int t = W + kWarps * i, m = 8 * (t / kDmmaTiles) + lane / 4;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int c = 8 * (t % kDmmaTiles) + 2 * (lane % 4) + h;
      if (m < nt && c < nt) out[m + c * ldo] = -acc[i][h];
    }
  }
}

// Inner indices [g0, g0 + kChunk) of A = X[i, j+1:] (a0 = X(i0, j1), nt rows) and of
// B = L[j+1:, j] (b0 = L(j1, j0), nt columns); indices at or past k are zeros.
__device__ inline void StageChunk(const double* a0, const double* b0, int64_t ld, int nt, int k,
                                  int g0, double* as, double* bs) {
  for (int idx = threadIdx.x; idx < nt * kChunk; idx += kThreads) {
    const int m = idx % nt, g = idx / nt;  // A: down a column of X, coalesced
    double* dst = as + g * kStrideA + m;
    if (g0 + g < k) {
      __pipeline_memcpy_async(dst, a0 + m + (g0 + g) * ld, sizeof(double));
    } else {
      *dst = 0.0;
    }
  }
  for (int idx = threadIdx.x; idx < nt * kChunk; idx += kThreads) {
    const int g = idx % kChunk, c = idx / kChunk;  // B: down a column of L, coalesced
    double* dst = bs + c * kStrideB1 + g;
    if (g0 + g < k) {
      __pipeline_memcpy_async(dst, b0 + g0 + g + c * ld, sizeof(double));
    } else {
      *dst = 0.0;
    }
  }
}

template <int W>
__device__ __forceinline__ void RunWarp(double* smem, const double* a0, const double* b0,
                                        const double* xjj, double* out, int64_t ld, int64_t ldo,
                                        int nt, int k, int lane) {
  double acc[kTilesPerWarp][2];
#pragma unroll
  for (int i = 0; i < kTilesPerWarp; ++i) acc[i][0] = acc[i][1] = 0.0;
  const int nchunks = (k + kChunk - 1) / kChunk;
  for (int ch = 0; ch < nchunks; ++ch) {
    if (ch + 1 < nchunks) {
      double* buf = smem + ((ch + 1) & 1) * (kBufA + kBufB);
      StageChunk(a0, b0, ld, nt, k, (ch + 1) * kChunk, buf, buf + kBufA);
      __pipeline_commit();
      __pipeline_wait_prior(1);
    } else {
      __pipeline_wait_prior(0);
    }
    __syncthreads();
    const double* buf = smem + (ch & 1) * (kBufA + kBufB);
    Chunk1<W>(buf, buf + kBufA, lane, acc);
    __syncthreads();
  }
  // Second product: A = the tile just computed, B = X_jj (zero-padded to 80 x 80).
  double* ts = smem;
  double* xs = smem + kDmmaEdge * kStrideA;
  StoreT<W>(ts, lane, acc);
  for (int idx = threadIdx.x; idx < kDmmaEdge * kDmmaEdge; idx += kThreads) {
    const int g = idx % kDmmaEdge, c = idx / kDmmaEdge;
    xs[c * kStrideB2 + g] = (g < nt && c < nt) ? xjj[g + c * ld] : 0.0;
  }
  __syncthreads();
  Product2<W>(ts, xs, nt, lane, acc);
  StoreOut<W>(out, ldo, nt, lane, acc);
}

// blockIdx.x = run entry, blockIdx.y = row block i - j - 1 (< r).
__global__ void __launch_bounds__(kThreads, 2) TrtriStepKernel(RunArgs a, int r) {
  extern __shared__ double smem[];
  const PlanDims& D = a.dims;
  const RunEntry e = a.entries[blockIdx.x];
  const DevicePatch d = a.in.patches[e.patch];
  const int j = d.nspectot - 1 - r;
  if (j < d.core_row) return;  // block-uniform
  const int nt = D.nwavetot, rb = blockIdx.y, i = j + 1 + rb;
  const int inner = max(1, min(e.band, r));
  const int k = (min(j + inner, i) - j) * nt;  // X[i, c] = 0 for c > i
  const int64_t ld = D.ld, i0 = static_cast<int64_t>(i) * nt, j0 = static_cast<int64_t>(j) * nt;
  const double* m = SlotMatrix(a, e.slot);
  const double* a0 = m + i0 + (j0 + nt) * ld;  // X(i0, j1)
  const double* b0 = m + (j0 + nt) + j0 * ld;  // L(j1, j0)
  const double* xjj = m + j0 + j0 * ld;
  const int64_t ldo = static_cast<int64_t>(r) * nt;  // scratch: r nt x nt, column-major
  double* out = a.slots.t + static_cast<int64_t>(e.slot) * a.slots.t_stride + static_cast<int64_t>(rb) * nt;
  // A's padding rows nt..79 of both buffers stay zero.
  for (int idx = threadIdx.x; idx < 2 * kChunk * (kDmmaEdge - nt); idx += kThreads) {
    const int b = idx / (kChunk * (kDmmaEdge - nt)), rest = idx % (kChunk * (kDmmaEdge - nt));
    smem[b * (kBufA + kBufB) + (rest / (kDmmaEdge - nt)) * kStrideA + nt + rest % (kDmmaEdge - nt)] = 0.0;
  }
  for (int idx = threadIdx.x; idx < 2 * (kDmmaEdge - nt) * kStrideB1; idx += kThreads) {
    const int b = idx / ((kDmmaEdge - nt) * kStrideB1), rest = idx % ((kDmmaEdge - nt) * kStrideB1);
    smem[b * (kBufA + kBufB) + kBufA + nt * kStrideB1 + rest] = 0.0;  // B's padding columns
  }
  StageChunk(a0, b0, ld, nt, k, 0, smem, smem + kBufA);
  __pipeline_commit();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  switch (warp) {  // warp-uniform; every warp meets the same barriers
    case 0: RunWarp<0>(smem, a0, b0, xjj, out, ld, ldo, nt, k, lane); break;
    case 1: RunWarp<1>(smem, a0, b0, xjj, out, ld, ldo, nt, k, lane); break;
    case 2: RunWarp<2>(smem, a0, b0, xjj, out, ld, ldo, nt, k, lane); break;
    default: RunWarp<3>(smem, a0, b0, xjj, out, ld, ldo, nt, k, lane); break;
  }
}

// X[j+1:, j] (r nt x nt) from the scratch over L[j+1:, j]. blockIdx.y = column.
__global__ void CopyStepKernel(RunArgs a, int r) {
  const RunEntry e = a.entries[blockIdx.x];
  const DevicePatch d = a.in.patches[e.patch];
  const int j = d.nspectot - 1 - r;
  if (j < d.core_row) return;
  const int nt = a.dims.nwavetot, c = blockIdx.y, rows = r * nt;
  const int64_t ld = a.dims.ld, j0 = static_cast<int64_t>(j) * nt;
  const double* src = a.slots.t + static_cast<int64_t>(e.slot) * a.slots.t_stride + static_cast<int64_t>(c) * rows;
  double* dst = SlotMatrix(a, e.slot) + j0 + nt + (j0 + c) * ld;
  for (int row = threadIdx.x; row < rows; row += blockDim.x) dst[row] = src[row];
}

static_assert(kWarps == 4, "TrtriStepKernel dispatches four warps");

}  // namespace

cudaError_t LaunchTrtriStep(const RunArgs& args, int r, cudaStream_t stream) {
  if (args.count == 0 || r < 1) return cudaSuccess;
  if (args.dims.nwavetot > kDmmaEdge) return cudaErrorInvalidValue;
  const int smem = static_cast<int>(sizeof(double)) * kSmemDoubles;
  cudaError_t err = cudaFuncSetAttribute(TrtriStepKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  if (err != cudaSuccess) return err;
  const dim3 grid(static_cast<unsigned>(args.count), static_cast<unsigned>(r));
  TrtriStepKernel<<<grid, kThreads, smem, stream>>>(args, r);
  if ((err = SPEXD_CHECK_LAUNCH(stream)) != cudaSuccess) return err;
  const dim3 copy_grid(static_cast<unsigned>(args.count), static_cast<unsigned>(args.dims.nwavetot));
  CopyStepKernel<<<copy_grid, 128, 0, stream>>>(args, r);
  return SPEXD_CHECK_LAUNCH(stream);
}

}  // namespace spexd::cuda
