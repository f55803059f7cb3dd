// Step 3 of the tiled Cholesky (tiled_cholesky.h): the panel L[k+1:, k] = M[k+1:, k] X_k^T,
// on the FP64 tensor cores where nt <= 80, else on the CUDA cores (a file of
// its own beside tiled_cholesky.cu).
#include <cuda_pipeline.h>

#include "core/numerics/patch_numerics.h"
#include "cuda/kernels/dmma_tiles.cuh"
#include "cuda/kernels/kernel_common.cuh"
#include "cuda/kernels/launch_check.h"
#include "cuda/kernels/tiled_cholesky.h"

namespace spexd::cuda {
namespace {

constexpr int kPanelThreads = 256;
// 80 rows per pass: a band block of 74 rows in one pass (64 took two), two blocks in two.
constexpr int kPanelRowGroups = 16, kRowsPerThread = 5;
constexpr int kPanelRows = kPanelRowGroups * kRowsPerThread;
constexpr int kColLanes = 16;  // columns c = lane + 16 q
static_assert(kTiledMaxNt <= 7 * kColLanes, "PanelSolveKernel's kCols");

// One thread block per entry: X_k^T is staged once in shared memory, then the panel's rows
// 80 at a time (the block owns them): multiplied register-tiled (5 x kCols outputs per
// thread; 16 * kCols >= nt) and written back in place through shared memory (coalesced).
// The staging copies are asynchronous (cp.async): copied through registers, each
// thread's ~40 loads waited on one another, and the kernel was bound by that latency.
template <int kCols>
__global__ void __launch_bounds__(kPanelThreads) PanelSolveKernel(RunArgs a, int k) {
  extern __shared__ double smem[];
  const RunEntry e = a.entries[blockIdx.x];
  const DevicePatch d = a.in.patches[e.patch];
  const int nt = a.dims.nwavetot, ld = a.dims.ld, p = nt + 1, tid = threadIdx.x;
  const int rows = (core::BandLast(k, e.band, d.nspectot) - k) * nt;  // past the band: zeros
  if (rows <= 0) return;  // block-uniform
  double* xt = smem;          // [nt][p]: xt[m][c] = X_k[c][m]
  double* b = smem + nt * p;  // [kPanelRows][p]: the rows, then the result
  const LeafBlock leaf = LeafOf(a, e.slot, k, d);
  for (int idx = tid; idx < nt * nt; idx += blockDim.x) {
    const int c = idx % nt, m = idx / nt;
    __pipeline_memcpy_async(xt + m * p + c, leaf.p + c + static_cast<int64_t>(m) * leaf.ld, sizeof(double));
  }
  double* panel0 = SlotMatrix(a, e.slot) + static_cast<int64_t>(k + 1) * nt + static_cast<int64_t>(k) * nt * ld;
  const int tr = tid / kColLanes, tc = tid % kColLanes;
  for (int r0 = 0; r0 < rows; r0 += kPanelRows) {
    const int nr = min(kPanelRows, rows - r0);
    for (int idx = tid; idx < kPanelRows * nt; idx += blockDim.x) {
      const int i = idx % kPanelRows, m = idx / kPanelRows;
      if (i < nr) {
        __pipeline_memcpy_async(b + i * p + m, panel0 + r0 + i + static_cast<int64_t>(m) * ld, sizeof(double));
      } else {
        b[i * p + m] = 0.0;
      }
    }
    __pipeline_commit();
    __pipeline_wait_prior(0);  // this thread's copies (and, on the first pass, X_k^T)
    __syncthreads();
    double acc[kRowsPerThread][kCols] = {};
    for (int m = 0; m < nt; ++m) {
      double bv[kRowsPerThread], xv[kCols];
#pragma unroll
      for (int i = 0; i < kRowsPerThread; ++i) bv[i] = b[(tr * kRowsPerThread + i) * p + m];
#pragma unroll
      for (int q = 0; q < kCols; ++q) {
        const int c = tc + kColLanes * q;
        xv[q] = c < nt ? xt[m * p + c] : 0.0;
      }
#pragma unroll
      for (int i = 0; i < kRowsPerThread; ++i) {
#pragma unroll
        for (int q = 0; q < kCols; ++q) acc[i][q] = fma(bv[i], xv[q], acc[i][q]);
      }
    }
    __syncthreads();  // every thread has read its rows of b
#pragma unroll
    for (int i = 0; i < kRowsPerThread; ++i) {
#pragma unroll
      for (int q = 0; q < kCols; ++q) {
        const int c = tc + kColLanes * q;
        if (c < nt) b[(tr * kRowsPerThread + i) * p + c] = acc[i][q];
      }
    }
    __syncthreads();
    double* panel = panel0 + r0;
    for (int idx = tid; idx < nr * nt; idx += blockDim.x) {
      const int i = idx % nr, m = idx / nr;
      panel[i + static_cast<int64_t>(m) * ld] = b[i * p + m];
    }
    __syncthreads();  // b is refilled next
  }
}

// The panel on the FP64 tensor cores (nt <= kDmmaN): the same product
// L[k+1:, k] = M[k+1:, k] X_k^T, 80 rows a pass, both operands zero-padded to 80 x 80 in
// shared memory (dmma_tiles.cuh's RowPairProduct: ten warps, two tile rows each), the rows
// staged column-major and X_k^T row-major, so that the fragments are conflict-free. The
// CUDA-core kernel above did 5 x kCols multiply-adds per thread per inner index, its FP64
// pipe the limit; the products' summation order differs from it (rounding only). Eight
// warps of TileProduct (up to 20 fragment loads a step for 7-13 products) were bound by
// those loads: 5.26 ms a frame against 3.97 (H100).
constexpr int kDmmaN = 80;                  // padded block side: 10 x 10 tiles of 8 x 8
static_assert(kDmmaN == kPanelDmmaMaxNt, "the launcher's choice and RunArgs::panel_p");
constexpr int kDmmaTiles = kDmmaN / 8;
constexpr int kDmmaLd = kDmmaN + 4;         // 4 mod 16 doubles (dmma_tiles.cuh)
// Warp w: tile rows 2 (w / 2) and 2 (w / 2) + 1, tile columns w % 2, w % 2 + 2, ... (the
// triangular X_k's products balanced between the two halves; dmma_tiles.cuh's
// RowPairProduct).
constexpr int kDmmaWarps = kDmmaTiles;
constexpr int kDmmaCols = kDmmaTiles / 2;
static_assert(kDmmaLd % 16 == 4, "conflict-free fragments");

std::size_t PanelDmmaSmemBytes() { return sizeof(double) * 2 * kDmmaN * kDmmaLd; }

// With RunArgs::panel_update (which the planner sets wherever this kernel runs) it first brings
// its rows up to date (first_inner below). It also leaves P_k = L[k+1:k+1+b, k] X_k for the
// trailing-first inversion (batch_layout.h's NeedsPanelP; RunArgs::panel_p, set with it),
// from L's rows (put back in place of M's) and X_k in shared memory, instead of that
// inversion's first batched GEMM re-reading both.
__global__ void __launch_bounds__(32 * kDmmaWarps, 2) PanelSolveDmmaKernel(RunArgs a, int k) {
  extern __shared__ double smem[];
  const RunEntry e = a.entries[blockIdx.x];
  const DevicePatch d = a.in.patches[e.patch];
  const int nt = a.dims.nwavetot, ld = a.dims.ld, tid = threadIdx.x;
  const int rows = (core::BandLast(k, e.band, d.nspectot) - k) * nt;  // past the band: zeros
  const bool want_p = NeedsPanelP(k, d.core_row, d.nspectot);
  // P_k and its leading dimension (taken where needed: registers are the panel's limit).
  auto p_out = [&] {
    return a.slots.t + static_cast<int64_t>(e.slot) * a.slots.t_stride +
           PanelPOffset(k, a.slots.p_base, a.slots.p_band, nt);
  };
  auto p_ld = [&] { return PanelPBlocks(k, e.band, d.nspectot) * nt; };
  if (rows <= 0) {  // block-uniform
    // Band 0: L[k+1, k] is zero (the normal equations wrote it), and so is P_k.
    if (want_p) {
      double* p = p_out();
      for (int idx = tid; idx < p_ld() * nt; idx += blockDim.x) p[idx] = 0.0;
    }
    return;
  }
  double* xt = smem;                    // [80][kDmmaLd] row-major: xt[m][c] = X_k[c][m]
  double* bc = smem + kDmmaN * kDmmaLd;  // [80][kDmmaLd] column-major: bc[m][i] = B(i, m)
  const LeafBlock leaf = LeafOf(a, e.slot, k, d);
  const int warp = tid / 32, lane = tid % 32, rp = warp / 2, c0 = warp % 2;
  // xt[m][c] = S(c, m) for S's nt x nt block at `src` (leading dimension src_ld), zeros in the
  // padding: X_k^T, or L[k, j]^T for the update. bc[m][i] = the panel rows' entry (r0 + i, m)
  // of the block column at `src` for i < nlive, else zero: M's rows, or L[., j]'s. A
  // warp a row m (no division an element, as idx / kDmmaLd and idx % kDmmaLd took);
  // asynchronous, committed with the next copies.
  auto stage_transposed = [&](const double* src, int64_t src_ld) {
    for (int m = warp; m < kDmmaN; m += kDmmaWarps) {
      for (int c = lane; c < kDmmaLd; c += 32) {
        if (m < nt && c < nt) {
          __pipeline_memcpy_async(xt + m * kDmmaLd + c, src + c + static_cast<int64_t>(m) * src_ld, sizeof(double));
        } else {
          xt[m * kDmmaLd + c] = 0.0;
        }
      }
    }
  };
  auto stage_rows = [&](const double* src, int r0, int nlive) {
    for (int m = warp; m < kDmmaN; m += kDmmaWarps) {
      for (int i = lane; i < kDmmaLd; i += 32) {
        if (m < nt && i < nlive) {
          __pipeline_memcpy_async(bc + m * kDmmaLd + i, src + r0 + i + static_cast<int64_t>(m) * ld, sizeof(double));
        } else {
          bc[m * kDmmaLd + i] = 0.0;
        }
      }
    }
  };
  double* slot = SlotMatrix(a, e.slot);
  double* panel0 = slot + static_cast<int64_t>(k + 1) * nt + static_cast<int64_t>(k) * nt * ld;
  const int kend = (nt + 3) / 4 * 4;
  // RunArgs::panel_update: the rows' updates M[i, k] -= L[i, j] L[k, j]^T (row block
  // i = k + 1 + row / nt) over the band's inner blocks j >= FirstCoupledBlock(i), summed on
  // the tensor cores in the order of j and subtracted from M's rows as they are staged: in
  // place of the batched cuBLAS GEMM that read and wrote those rows once more between the
  // factor and this kernel. The first inner block of the rows from r0 (k: none).
  auto first_inner = [&](int r0) {
    return a.panel_update ? core::FirstCoupledBlock(k + 1 + r0 / nt, k, e.band) : k;
  };
  bool xt_staged = first_inner(0) >= k;  // else the first pass's update stages xt first
  if (xt_staged) stage_transposed(leaf.p, leaf.ld);
  for (int r0 = 0; r0 < rows; r0 += kDmmaN) {
    const int nr = min(kDmmaN, rows - r0);
    const int j0 = first_inner(r0);
    double acc[kDmmaCols][4];
    if (j0 < k) {  // block-uniform; xt holds nothing in flight (staged after this, or waited on)
#pragma unroll
      for (int c = 0; c < kDmmaCols; ++c) acc[c][0] = acc[c][1] = acc[c][2] = acc[c][3] = 0.0;
      for (int j = j0; j < k; ++j) {
        // The rows whose block i meets j (FirstCoupledBlock(i) <= j): those of i <= j + band.
        stage_rows(panel0 + static_cast<int64_t>(j - k) * nt * ld, r0, min(nr, (j + e.band - k) * nt - r0));
        stage_transposed(slot + static_cast<int64_t>(k) * nt + static_cast<int64_t>(j) * nt * ld, ld);
        __pipeline_commit();
        __pipeline_wait_prior(0);
        __syncthreads();
        RowPairProduct<kDmmaCols, false, false, true>(SharedMat{bc, 1, kDmmaLd}, SharedMat{xt, kDmmaLd, 1},
                                                      kend, rp, c0, 2, lane, acc);
        __syncthreads();  // bc and xt are staged again
      }
      xt_staged = false;
    }
    if (!xt_staged) {
      stage_transposed(leaf.p, leaf.ld);
      xt_staged = true;
    }
    stage_rows(panel0, r0, nr);  // M's rows
    if (j0 < k) {  // bc = M - the updates, each element by the thread that holds its sum
      __pipeline_commit();
      __pipeline_wait_prior(0);
      __syncthreads();
      ForEachRowPairElement(acc, rp, c0, 2, lane, [&](int row, int col, double v) {
        if (row < nr && col < nt) bc[col * kDmmaLd + row] -= v;
      });
    }
    __pipeline_commit();
    __pipeline_wait_prior(0);  // this thread's copies (and X_k^T's, where staged with them)
    __syncthreads();
    // X_k is lower triangular (zeros stored above its diagonal), so X_k^T is upper: each
    // tile column stops at its own last row (half the products).
    RowPairProduct<kDmmaCols, true>(SharedMat{bc, 1, kDmmaLd}, SharedMat{xt, kDmmaLd, 1}, kend, rp,
                                    c0, 2, lane, acc);
    ForEachRowPairElement(acc, rp, c0, 2, lane, [&](int row, int col, double v) {
      if (row < nr && col < nt) panel0[r0 + row + static_cast<int64_t>(col) * ld] = v;
    });
    if (want_p) {  // block-uniform
      __syncthreads();  // every warp has read bc
      // These rows of L over M's in bc (zeros in the padding), then P = L X_k: X_k is
      // column-major in xt (xt[j][m] = X_k[m][j]) and lower triangular.
      ForEachRowPairElement(acc, rp, c0, 2, lane, [&](int row, int col, double v) {
        bc[col * kDmmaLd + row] = row < nr && col < nt ? v : 0.0;
      });
      __syncthreads();
      RowPairProduct<kDmmaCols, false, true>(SharedMat{bc, 1, kDmmaLd}, SharedMat{xt, 1, kDmmaLd},
                                             kend, rp, c0, 2, lane, acc);
      double* p = p_out() + r0;
      const int pld = p_ld();
      ForEachRowPairElement(acc, rp, c0, 2, lane, [&](int row, int col, double v) {
        if (row < nr && col < nt) p[row + static_cast<int64_t>(col) * pld] = v;
      });
    }
    __syncthreads();  // bc is refilled next
  }
}

}  // namespace

template <int kCols>
cudaError_t LaunchPanelSolveFor(const RunArgs& args, int k, unsigned grid, std::size_t smem,
                                cudaStream_t stream) {
  cudaError_t err = AllowSharedMemory(reinterpret_cast<const void*>(PanelSolveKernel<kCols>), smem);
  if (err != cudaSuccess) return err;
  PanelSolveKernel<kCols><<<grid, kPanelThreads, smem, stream>>>(args, k);
  return SPEXD_CHECK_LAUNCH(stream);
}

cudaError_t LaunchPanelSolve(const RunArgs& args, int k, int max_blocks, cudaStream_t stream) {
  const int nt = args.dims.nwavetot;
  const int max_rows = (max_blocks - k - 1) * nt;
  if (args.count == 0 || max_rows <= 0) return cudaSuccess;
  if (nt > kTiledMaxNt) return cudaErrorInvalidValue;
  if (nt <= kDmmaN) {
    if (!args.panel_p) return cudaErrorInvalidValue;  // the planner pairs the two (PanelP)
    const std::size_t dsmem = PanelDmmaSmemBytes();
    cudaError_t err = AllowSharedMemory(reinterpret_cast<const void*>(PanelSolveDmmaKernel), dsmem);
    if (err != cudaSuccess) return err;
    PanelSolveDmmaKernel<<<static_cast<unsigned>(args.count), 32 * kDmmaWarps, dsmem, stream>>>(args, k);
    return SPEXD_CHECK_LAUNCH(stream);
  }
  const unsigned grid = static_cast<unsigned>(args.count);
  const std::size_t smem = PanelSolveSharedBytes(nt);
  // kDmmaN < nt <= kTiledMaxNt: 6 or 7 column lanes' worth of columns.
  if (CeilDiv(nt, kColLanes) <= 6) return LaunchPanelSolveFor<6>(args, k, grid, smem, stream);
  return LaunchPanelSolveFor<7>(args, k, grid, smem, stream);
}

std::size_t PanelSolveSharedBytes(int nt) {
  if (nt <= kDmmaN) return PanelDmmaSmemBytes();
  return sizeof(double) * static_cast<std::size_t>(nt + kPanelRows) * (nt + 1);
}

}  // namespace spexd::cuda
