// X = L^{-1} of a lower-triangular n x n block in shared memory (n <= kTileInverseMaxN) by
// 16 x 16 tiles (the last one cut at n), for the tiled factor once L_kk is known
// (tiled_cholesky.cu, blocks of nt <= kTileInverseMaxN; device-only header). The register kernel's inversion is nt
// block-wide steps, each behind a barrier; here the T diagonal tiles are inverted side by
// side, one warp each (16 warp-level steps), and the off-diagonal tiles follow row by row
// as products on the FP64 tensor cores, X_IJ = -X_II sum_{K=J}^{I-1} L_IK X_KJ: about
// 3 (T - 1) barriers in all.
//
// Storage: s[r * ld + c] holds L(r, c) for r >= c, ld > n (nothing past row or column n
// is read or written: the factor's own n x (n + 1) array serves); rd[r] = 1 / L(r, r).
// On return X(r, c) for r > c sits transposed above the diagonal, s[c * ld + r], and
// X(r, r) = rd[r]; L's lower triangle is unchanged.
#ifndef SPEXD_CUDA_TILE_INVERSE_CUH_
#define SPEXD_CUDA_TILE_INVERSE_CUH_

#include "cuda/kernels/dmma_tiles.cuh"

namespace spexd::cuda {

inline constexpr int kInvTile = 16;
inline constexpr int kTileInverseMaxN = 80;  // five tiles: a warp each

// X(r, c), r >= c, as TileInverse leaves it.
__device__ __forceinline__ double TileInverseAt(const double* s, int ld, const double* rd, int r, int c) {
  return r == c ? rd[r] : s[c * ld + r];
}

// One warp: X_JJ = L_JJ^{-1} for the diagonal tile at j0 (m <= 16 rows) by forward
// elimination in registers, lane (r, h) = (lane % 16, lane / 16) holding X(r, c) for
// c = h + 2 q; row jj goes to the others through xrow (16 doubles of this warp's own).
__device__ inline void InvertDiagonalTile(double* s, int ld, const double* rd, int j0, int m, int lane,
                                          double* xrow) {
  const int r = lane % kInvTile, h = lane / kInvTile;
  double y[kInvTile / 2];
#pragma unroll
  for (int q = 0; q < kInvTile / 2; ++q) y[q] = h + 2 * q == r ? 1.0 : 0.0;
#pragma unroll
  for (int jj = 0; jj < kInvTile; ++jj) {
    if (jj >= m) break;  // warp-uniform
    __syncwarp();  // the last step's readers of xrow are done
    if (r == jj) {
      const double rj = rd[j0 + jj];
#pragma unroll
      for (int q = 0; q < kInvTile / 2; ++q) {
        const int c = h + 2 * q;
        if (c <= jj) {
          y[q] *= rj;
          xrow[c] = y[q];
        }
      }
    }
    __syncwarp();
    if (r > jj && r < m) {
      const double lr = s[(j0 + r) * ld + j0 + jj];
#pragma unroll
      for (int q = 0; q < kInvTile / 2; ++q) {
        const int c = h + 2 * q;
        if (c <= jj) y[q] -= lr * xrow[c];
      }
    }
  }
#pragma unroll
  for (int q = 0; q < kInvTile / 2; ++q) {
    const int c = h + 2 * q;
    if (c < r && r < m) s[(j0 + c) * ld + j0 + r] = y[q];
  }
}

// The whole inversion, by all kWarps warps of the block: xrow_all holds 16 doubles a warp.
template <int kWarps>
__device__ inline void TileInverse(double* s, int ld, const double* rd, int n, double* xrow_all) {
  static_assert(kWarps * kInvTile >= kTileInverseMaxN, "a warp for each diagonal tile");
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int ntile = (n + kInvTile - 1) / kInvTile;
  if (warp < ntile) {
    const int j0 = warp * kInvTile;
    InvertDiagonalTile(s, ld, rd, j0, min(kInvTile, n - j0), lane, xrow_all + kInvTile * warp);
  }
  __syncthreads();
  // Tile row I of X by pairs of 8 x 8 tiles p (rows 16 I and 16 I + 8 of columns 8 p, one
  // DmmaPair a step): W_IJ = sum_K L_IK X_KJ into X_IJ's place (read by no one in this
  // pass), then X_IJ = -X_II W_IJ. Rows past n (in the last tile) are masked: their operands
  // are zeros, nothing is written.
  const int sub = lane / 4, kq = lane % 4;
  constexpr int kPerWarp = (2 * (kTileInverseMaxN / kInvTile - 1) + kWarps - 1) / kWarps;
  for (int I = 1; I < ntile; ++I) {
    const int npairs = 2 * I, i0 = I * kInvTile, rt = i0 + sub, rb = rt + 8;
#pragma unroll
    for (int i = 0; i < kPerWarp; ++i) {
      const int p = warp + kWarps * i;
      if (p >= npairs) break;
      const int c0 = 8 * p;
      double acc[4] = {0.0, 0.0, 0.0, 0.0};
      for (int k = c0; k < i0; k += 4) {  // X(m, c) = 0 for m < c
        const int m = k + kq, c = c0 + sub;
        DmmaPair(acc, rt < n ? s[rt * ld + m] : 0.0, rb < n ? s[rb * ld + m] : 0.0,
                 m >= c ? TileInverseAt(s, ld, rd, m, c) : 0.0);
      }
      const int c = c0 + 2 * kq;
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int r = half ? rb : rt;
        if (r < n) {
          s[c * ld + r] = acc[2 * half];
          s[(c + 1) * ld + r] = acc[2 * half + 1];
        }
      }
    }
    __syncthreads();
    // The top tile's X_II rows end at i0 + 8: its operands past them are zeros (X(r, m) = 0
    // for m > r), which add exact zeros to its sums.
    double x[kPerWarp][4];
#pragma unroll
    for (int i = 0; i < kPerWarp; ++i) {
      x[i][0] = x[i][1] = x[i][2] = x[i][3] = 0.0;
      const int p = warp + kWarps * i;
      if (p >= npairs) continue;
      const int c0 = 8 * p;
      for (int k = i0; k < i0 + kInvTile; k += 4) {
        const int m = k + kq;
        DmmaPair(x[i], m <= rt && rt < n ? TileInverseAt(s, ld, rd, rt, m) : 0.0,
                 m <= rb && rb < n ? TileInverseAt(s, ld, rd, rb, m) : 0.0,
                 m < n ? s[(c0 + sub) * ld + m] : 0.0);
      }
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kPerWarp; ++i) {
      const int p = warp + kWarps * i;
      if (p >= npairs) continue;
      const int c = 8 * p + 2 * kq;
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int r = half ? rb : rt;
        if (r < n) {
          s[c * ld + r] = -x[i][2 * half];
          s[(c + 1) * ld + r] = -x[i][2 * half + 1];
        }
      }
    }
    __syncthreads();
  }
}

}  // namespace spexd::cuda

#endif  // SPEXD_CUDA_TILE_INVERSE_CUH_
