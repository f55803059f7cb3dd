// Step 2 of the tiled Cholesky (tiled_cholesky.h): the diagonal block's factor, its
// inverse and the solve's forward step (step 3, the panel: tiled_panel.cu). Blocks are
// staged row-major in shared memory with an odd pitch (nt + 1 doubles), so column walks
// are free of bank conflicts.
#include <cuda_pipeline.h>

#include <algorithm>
#include <utility>

#include "core/numerics/patch_numerics.h"
#include "cuda/kernels/blocked_forward.cuh"
#include "cuda/kernels/dmma_tiles.cuh"
#include "cuda/kernels/kernel_common.cuh"
#include "cuda/kernels/launch_check.h"
#include "cuda/kernels/tile_inverse.cuh"
#include "cuda/kernels/tiled_cholesky.h"

namespace spexd::cuda {
namespace {

constexpr int kTileLanes = 16;  // the factor kernel's 16 x 16 thread grid
constexpr int kFactorThreads = kTileLanes * kTileLanes;
static_assert(kTiledMaxNt <= 32 * kMaxRowsPerLane, "the forward step's rows per lane");
static_assert(kFactorThreads == 32 * kSubstWarps, "the forward step runs on the factor's threads");

// Calls f(i, b, r, c) for each register v[i][b], b <= i, of thread (tx, ty), which holds
// the block's element (r, c) = (tx + 16 i, ty + 16 b); fully unrolled, so v stays in
// registers.
template <int R, class F>
__device__ __forceinline__ void ForEachLowerTileElement(int tx, int ty, F&& f) {
#pragma unroll
  for (int i = 0; i < R; ++i) {
#pragma unroll
    for (int b = 0; b <= i; ++b) f(i, b, tx + kTileLanes * i, ty + kTileLanes * b);
  }
}

// The tile's state in one thread: v[i][b] holds element (tx + 16 i, ty + 16 b). Only the
// lower tiles b <= i are ever touched: upper tiles hold elements above the
// diagonal, which neither the factor nor X = L^{-1} needs, so the compiler drops them
// (R = 5: 15 of 25 doubles stay) and three blocks fit on an SM.
template <int R>
struct TileState {
  double v[R][R];
};

// Factor steps j in column tile JB = j / 16, JB a compile-time constant: the owner's
// element is v[i][JB] without a select chain, and the update loops start at tile JB
// (earlier tiles are final) and stop at the diagonal tile. The same operations on every
// element the result reads as the loop over all tiles it replaces: bit-identical L and X.
// vec2 and rdj2 are double-buffered by the parity of j: step j's owner writes buffer j & 1
// while slower threads may still read buffer (j - 1) & 1, and the buffer it overwrites
// was last read in step j - 2, before every thread passed step j - 1's barrier. So one
// barrier per step, not two.
//
// Each buffer holds 16 R doubles, zero past nt (the owners write rows < nt only): rows and
// columns past nt read zeros without a bounds test. (A column c >= nt takes vec[c] rd =
// 0 rd, not 0.0, where the test gave 0.0: it only updates padding elements, which nothing
// reads.)
template <int R, int JB, bool kLast>
__device__ __forceinline__ void FactorStep(TileState<R>& t, double* vec2, double* rdj2, double* dpiv,
                                           int& first_bad, int nt, int tx, int ty, int j) {
  double* vec = vec2 + (j & 1) * (R * kTileLanes);
  double& rdj = rdj2[j & 1];
  if (ty == j - kTileLanes * JB) {
#pragma unroll
    for (int i = JB; i < R; ++i) {  // rows r >= j live in tiles i >= JB
      const double val = t.v[i][JB];
      const int r = tx + kTileLanes * i;
      if (r >= j && r < nt) vec[r] = val;
      if (r == j) {
        dpiv[j] = val;  // the pivot, kept for the final scaling (not in registers: spills)
        rdj = 1.0 / val;
        if (!(val > 0.0) && first_bad == 0) first_bad = j + 1;
      }
    }
  }
  __syncthreads();
  const double rd = rdj;
  double cr[R], cc[R];
#pragma unroll
  for (int i = JB; i < R; ++i) {
    const int r = tx + kTileLanes * i, c = ty + kTileLanes * i;
    cr[i] = vec[r];
    // Columns <= j stay as they are; those of tiles past JB are all > j.
    cc[i] = i > JB || c > j ? vec[c] * rd : 0.0;
  }
  // Tile row/column JB is final after its last step (kLast: j = j0 + 15): skipped there.
#pragma unroll
  for (int i = JB; i < R; ++i) {
    if (i == JB && kLast) continue;
#pragma unroll
    for (int b = JB; b <= i; ++b) {
      if (b == JB && kLast) continue;
      t.v[i][b] -= cr[i] * cc[b];
    }
  }
}

template <int R, int JB>
__device__ __forceinline__ void FactorColumnTile(TileState<R>& t, double* vec2, double* rdj2,
                                                 double* dpiv, int& first_bad, int nt, int tx, int ty) {
  const int j0 = kTileLanes * JB, j1 = min(j0 + kTileLanes, nt), jl = j0 + kTileLanes - 1;
  for (int j = j0; j < min(j1, jl); ++j) {
    FactorStep<R, JB, false>(t, vec2, rdj2, dpiv, first_bad, nt, tx, ty, j);
  }
  if (jl < j1) FactorStep<R, JB, true>(t, vec2, rdj2, dpiv, first_bad, nt, tx, ty, jl);
}

// Inversion steps j (L X = I, forward elimination) in tile JB = j / 16: rows r > j (tiles
// i >= JB) take row j of X in columns c <= j (tiles b <= JB). vec2 double-buffered as in
// FactorColumnTile: one barrier per step.
template <int R, int JB>
__device__ __forceinline__ void InvertColumnTile(TileState<R>& t, const double* s, double* vec2,
                                                 const double* rdiag, int nt, int p, int tx, int ty) {
  const int j0 = kTileLanes * JB, j1 = min(j0 + kTileLanes, nt);
  for (int j = j0; j < j1; ++j) {
    double* vec = vec2 + (j & 1) * nt;
    if (tx == j - j0) {
#pragma unroll
      for (int b = 0; b <= JB; ++b) {
        const int c = ty + kTileLanes * b;
        if (c <= j) vec[c] = t.v[JB][b];
      }
    }
    __syncthreads();
    const double ij = rdiag[j];
    double lr[R], xc[R];
#pragma unroll
    for (int i = JB; i < R; ++i) {
      const int r = tx + kTileLanes * i;
      lr[i] = (r > j && r < nt) ? s[r * p + j] : 0.0;
    }
#pragma unroll
    for (int b = 0; b <= JB; ++b) {
      const int c = ty + kTileLanes * b;
      xc[b] = c <= j ? vec[c] * ij : 0.0;
    }
    const bool last = j == j0 + kTileLanes - 1;  // rows of tile JB are final then
#pragma unroll
    for (int i = JB; i < R; ++i) {
      if (i == JB && last) continue;
#pragma unroll
      for (int b = 0; b <= JB; ++b) t.v[i][b] -= lr[i] * xc[b];
    }
  }
}

template <int R, int... JB>
__device__ __forceinline__ void FactorTile(std::integer_sequence<int, JB...>, TileState<R>& t,
                                           double* vec2, double* rdj2, double* dpiv, int& first_bad,
                                           int nt, int tx, int ty) {
  (FactorColumnTile<R, JB>(t, vec2, rdj2, dpiv, first_bad, nt, tx, ty), ...);
}

template <int R, int... JB>
__device__ __forceinline__ void InvertTile(std::integer_sequence<int, JB...>, TileState<R>& t,
                                           const double* s, double* vec2, const double* rdiag, int nt,
                                           int p, int tx, int ty) {
  (InvertColumnTile<R, JB>(t, s, vec2, rdiag, nt, p, tx, ty), ...);
}

// RunArgs::diag_update: M_kk -= F F^T, F = L[k, j0:k] (nt x inner, in M column-major), on
// the tensor cores before the factor loads M_kk: G = F F^T's lower 8 x 8 tiles as column
// pairs (dmma_tiles.cuh's LowerPair*, 30 of them over the eight warps), F staged
// kUpdChunk columns at a time in the factor's own shared memory (two buffers, ld kUpdLd,
// rows past nt zero). Instead of a batched DGEMM that wrote M_kk for this kernel to read back.
constexpr int kUpdTiles = kFactorUpdateMaxNt / 8;
constexpr int kUpdLd = kFactorUpdateMaxNt + 4;  // 4 mod 16 doubles: conflict-free fragments
constexpr int kUpdChunk = 32;
constexpr int kUpdPairs = LowerPairCount(kUpdTiles);
constexpr int kUpdPerWarp = (kUpdPairs + kFactorThreads / 32 - 1) / (kFactorThreads / 32);
static_assert(kUpdLd % 16 == 4 && kFactorThreads == 256, "eight warps, conflict-free fragments");

template <int W>
__device__ __forceinline__ void UpdateProducts(const double* fs, int kend, int lane,
                                               double (&acc)[kUpdPerWarp][4]) {
#pragma unroll 1
  for (int kk = 0; kk < kend; kk += 4) {
    double f[kUpdTiles + 1];  // f[R] = F(8R + l/4, kk + l%4); f[kUpdTiles] = 0 (a pair's missing row)
#pragma unroll
    for (int r = 0; r < kUpdTiles; ++r) f[r] = fs[(kk + lane % 4) * kUpdLd + 8 * r + lane / 4];
    f[kUpdTiles] = 0.0;
    LowerPairStep<kUpdTiles, kFactorThreads / 32, W, kUpdPerWarp>(f, acc);
  }
}

// M_kk's lower triangle less G's, in place (read back through L2 by the factor's loads: a
// difference in registers there cost the factor ~500 bytes of spills), by every thread of
// the block; fs: 2 kUpdChunk kUpdLd doubles of shared memory (two chunks).
__device__ __noinline__ void DiagonalUpdate(double* m, int ld, int nt, int k, int j0, double* fs) {
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int inner = (k - j0) * nt;
  const double* f = m + static_cast<int64_t>(k) * nt + static_cast<int64_t>(j0) * nt * ld;
  double* mkk = m + static_cast<int64_t>(k) * nt * (ld + 1);
  for (int idx = tid; idx < 2 * kUpdChunk * (kUpdLd - nt); idx += blockDim.x) {
    fs[(idx / (kUpdLd - nt)) * kUpdLd + nt + idx % (kUpdLd - nt)] = 0.0;  // rows past nt
  }
  double acc[kUpdPerWarp][4];
#pragma unroll
  for (int i = 0; i < kUpdPerWarp; ++i) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.0;
  // Chunk ch in buffer ch % 2, the next one's copies in flight during its products.
  const auto stage = [&](int ch) {
    const int q0 = ch * kUpdChunk, qc = min(kUpdChunk, inner - q0), kend = (qc + 3) / 4 * 4;
    double* buf = fs + (ch & 1) * kUpdChunk * kUpdLd;
    for (int c = warp; c < kend; c += kFactorThreads / 32) {  // a warp a column
      double* dst = buf + c * kUpdLd;
      const double* src = f + static_cast<int64_t>(q0 + c) * ld;
      for (int r = lane; r < nt; r += 32) {
        if (c < qc) {
          __pipeline_memcpy_async(dst + r, src + r, sizeof(double));
        } else {
          dst[r] = 0.0;  // the last step's columns past the chunk
        }
      }
    }
    __pipeline_commit();
  };
  const int nchunks = (inner + kUpdChunk - 1) / kUpdChunk;
  stage(0);
#pragma unroll 1
  for (int ch = 0; ch < nchunks; ++ch) {
    if (ch + 1 < nchunks) {
      stage(ch + 1);  // its buffer's last readers passed the previous barrier
      __pipeline_wait_prior(1);
    } else {
      __pipeline_wait_prior(0);
    }
    __syncthreads();
    const int kend = (min(kUpdChunk, inner - ch * kUpdChunk) + 3) / 4 * 4;
    const double* cur = fs + (ch & 1) * kUpdChunk * kUpdLd;
    ForEightWarps(warp, [&](auto w) { UpdateProducts<decltype(w)::value>(cur, kend, lane, acc); });
    __syncthreads();  // the chunk's readers are done
  }
  ForEightWarps(warp, [&](auto w) {
    ForEachLowerPairElement<kUpdTiles, kFactorThreads / 32, decltype(w)::value, kUpdPerWarp>(
        acc, lane, [&](int row, int col, double v, int, int) {
          // As the GEMM's -G + M did.
          if (row < nt && col <= row) mkk[row + static_cast<int64_t>(col) * ld] -= v;
        });
  });
  __syncthreads();
}

// One thread block per entry; thread (tx, ty) of a 16 x 16 grid holds the elements
// (tx + 16 i, ty + 16 b), b <= i, of the block in registers. Right-looking factorisation:
// step j publishes column j of the Schur complement (and 1/d_j) in shared memory and every
// thread applies v[r][c] -= s[r][j] (s[c][j] / d_j) to its elements with j < c <= r;
// columns are scaled by 1/sqrt(d_c) at the end. Then L X = I by forward elimination on
// registers (step j publishes row j of X, still unscaled; rows are scaled by 1/L_rr at the
// end), with L in shared memory. One barrier per step; the steps are unrolled by column
// tile, so which register tiles a step touches is known at compile time.
template <int R>
__global__ void __launch_bounds__(kFactorThreads, R <= 5 ? 3 : 1) TileFactorKernel(RunArgs a, int k) {
  extern __shared__ double smem[];
  __shared__ int first_bad;
  __shared__ double rdj2[2];
  const RunEntry e = a.entries[blockIdx.x];
  const DevicePatch d = a.in.patches[e.patch];
  if (k >= d.nspectot) return;  // block-uniform
  const int nt = a.dims.nwavetot, ld = a.dims.ld, tid = threadIdx.x;
  // The inversion by tiles (tile_inverse.cuh) where nt allows, else by register steps.
  // (X in s above L: no shared memory more than 8 x 16 broadcasts; a padded 80 x 81 copy
  // cost the frame more in the other kernels' residency than the inversion gained.)
  const bool tiles = R * kTileLanes <= kTileInverseMaxN;
  const int p = nt + 1;
  const int tx = tid % kTileLanes, ty = tid / kTileLanes;
  double* s = smem;               // [nt][p] L, row-major (and X above it with the tiles)
  double* vec2 = s + nt * p;      // [2][16 R] column j of the Schur complement / row j of X
  double* rdiag = vec2 + 2 * R * kTileLanes;  // [nt] 1 / L_rr
  double* dpiv = rdiag + nt;      // [nt] the pivots d_j
  double* xrows = dpiv + nt;      // [8][16] TileInverse's broadcasts
  double* base = SlotMatrix(a, e.slot) + static_cast<int64_t>(k) * nt * (ld + 1);
  // Block-uniform: this block's M_kk takes its update here (RunArgs::diag_update).
  const bool update = a.diag_update && k >= 1 && e.band > 0 && nt <= kFactorUpdateMaxNt;
  if (update) DiagonalUpdate(SlotMatrix(a, e.slot), ld, nt, k, core::BandFirst(k, e.band), s);
  TileState<R> t;
  ForEachLowerTileElement<R>(tx, ty, [&](int i, int b, int r, int c) {
    t.v[i][b] = (r < nt && c < nt && r >= c) ? base[r + static_cast<int64_t>(c) * ld] : 0.0;
  });
  if (tid == 0) first_bad = 0;
  // Rows above j read stale entries of the buffer (they only meet zero multipliers):
  // zeros before the first step keep them finite and the result deterministic.
  for (int i = tid; i < 2 * R * kTileLanes; i += blockDim.x) vec2[i] = 0.0;
  __syncthreads();
  FactorTile<R>(std::make_integer_sequence<int, R>{}, t, vec2, rdj2, dpiv, first_bad, nt, tx, ty);
  __syncthreads();  // dpiv
  double piv[R];
#pragma unroll
  for (int b = 0; b < R; ++b) {
    const int c = ty + kTileLanes * b;
    piv[b] = c < nt ? sqrt(dpiv[c]) : 1.0;
  }
  // Where X_k goes: over L_kk (not written then) where the inversion needs it; L's
  // diagonal to ldiag.
  const LeafBlock leaf = LeafOf(a, e.slot, k, d);
  const bool keep_l = leaf.p != base;
  double* ldiag = a.slots.ldiag + static_cast<int64_t>(e.slot) * ld + static_cast<int64_t>(k) * nt;
  // s receives L's lower tiles only: the inversion reads s[r][j] for r > j alone.
  ForEachLowerTileElement<R>(tx, ty, [&](int i, int b, int r, int c) {
    if (r >= nt || c >= nt) return;
    const double l = r == c ? piv[b] : (r > c ? t.v[i][b] / piv[b] : 0.0);
    s[r * p + c] = l;
    if (r >= c && keep_l) base[r + static_cast<int64_t>(c) * ld] = l;
    if (r == c) {
      rdiag[r] = 1.0 / l;
      ldiag[r] = l;
    }
    if (!tiles) t.v[i][b] = r == c ? 1.0 : 0.0;  // the steps' X starts as I
  });
  __syncthreads();  // L in s
  if (tiles) {  // X by tiles, then X_k out
    TileInverse<kFactorThreads / 32>(s, p, rdiag, nt, xrows);
    for (ColumnMajorWalk w(tid, blockDim.x, nt); w.idx < nt * nt; w.Next(blockDim.x, nt)) {
      leaf.p[w.row + static_cast<int64_t>(w.col) * leaf.ld] =
          w.row >= w.col ? TileInverseAt(s, p, rdiag, w.row, w.col) : 0.0;
    }
  } else {
    InvertTile<R>(std::make_integer_sequence<int, R>{}, t, s, vec2, rdiag, nt, p, tx, ty);
#pragma unroll
    for (int i = 0; i < R; ++i) {
      const int r = tx + kTileLanes * i;
      if (r >= nt) continue;
      const double ir = rdiag[r];
#pragma unroll
      for (int b = 0; b < R; ++b) {
        const int c = ty + kTileLanes * b;
        if (c >= nt) continue;
        double* x = leaf.p + r + static_cast<int64_t>(c) * leaf.ld;
        if (b > i) {
          *x = 0.0;  // above the diagonal
        } else {
          *x = r >= c ? t.v[i][b] * ir : 0.0;
        }
      }
    }
  }
  // The solve's forward step k here, while the block has just written X_k: L's row block k
  // and y_j (j < k) are final (earlier steps), and the solve's DRAM-bound pass over L is
  // halved. s (L_kk, read no more) holds the partial sums.
  __syncthreads();  // X_k's writes, s free
  ForwardStep(a, e, d, k, a.slots.x + static_cast<int64_t>(e.slot) * ld, s, s + kSubstWarps * nt);
  if (tid == 0) {
    int32_t* info = a.slots.info + blockIdx.x;
    if (k == 0) {
      *info = first_bad;
    } else if (first_bad != 0 && *info == 0) {
      *info = k * nt + first_bad;
    }
  }
}

// The factor kernel's R (16 x 16 tiles a side) for nt <= kTiledMaxNt: TileFactorKernel<R>.
int FactorTiles(int nt) { return std::max(4, (nt + kTileLanes - 1) / kTileLanes); }

}  // namespace

std::size_t TiledCholeskySharedBytes(int nt) {
  const std::size_t n = static_cast<std::size_t>(nt);
  // L (n (n + 1)), the step vectors (2 x 16 R), 1 / L_rr and the pivots (2 n).
  const std::size_t vecs = 2 * static_cast<std::size_t>(kTileLanes) * FactorTiles(nt);
  // The forward step's partial sums and right-hand side ((kSubstWarps + 1) nt) reuse L's rows.
  // The tile inversion (nt <= kTileInverseMaxN): and its broadcasts, a warp's 16 doubles.
  const std::size_t broadcasts = nt <= kTileInverseMaxN ? (kFactorThreads / 32) * kInvTile : 0;
  // RunArgs::diag_update: F's chunks, double-buffered (kUpdChunk columns of kUpdLd each).
  const std::size_t chunk = nt <= kFactorUpdateMaxNt ? 2 * kUpdChunk * kUpdLd : 0;
  return sizeof(double) *
         std::max({n * (n + 1) + vecs + 2 * n + broadcasts, (kSubstWarps + 1) * n, chunk});
}

template <int R>
cudaError_t LaunchTileFactorFor(const RunArgs& args, int k, std::size_t smem, cudaStream_t stream) {
  cudaError_t err = AllowSharedMemory(reinterpret_cast<const void*>(TileFactorKernel<R>), smem);
  if (err != cudaSuccess) return err;
  TileFactorKernel<R><<<args.count, kFactorThreads, smem, stream>>>(args, k);
  return SPEXD_CHECK_LAUNCH(stream);
}

cudaError_t LaunchTileFactor(const RunArgs& args, int k, cudaStream_t stream) {
  if (args.count == 0) return cudaSuccess;
  const int nt = args.dims.nwavetot;
  if (nt > kTiledMaxNt) return cudaErrorInvalidValue;
  const std::size_t smem = TiledCholeskySharedBytes(nt);
  switch (FactorTiles(nt)) {
    case 4: return LaunchTileFactorFor<4>(args, k, smem, stream);
    case 5: return LaunchTileFactorFor<5>(args, k, smem, stream);
    case 6: return LaunchTileFactorFor<6>(args, k, smem, stream);
    default: return LaunchTileFactorFor<7>(args, k, smem, stream);
  }
}

}  // namespace spexd::cuda
