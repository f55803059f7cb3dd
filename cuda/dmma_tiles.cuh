// FP64 tensor-core (DMMA, mma.sync m8n8k4) pieces shared by the kernels that multiply
// small matrices held in shared memory (device-only header).
#ifndef SPEXD_CUDA_DMMA_TILES_CUH_
#define SPEXD_CUDA_DMMA_TILES_CUH_

#include <type_traits>

namespace spexd::cuda {

// f(std::integral_constant<int, warp>) for warp 0..7 (warp-uniform): the kernels below
// with eight warps get their warp's tiles as compile-time indices (TileProduct's W).
template <class F>
__device__ __forceinline__ void ForEightWarps(int warp, F f) {
  switch (warp) {
    case 0: f(std::integral_constant<int, 0>{}); break;
    case 1: f(std::integral_constant<int, 1>{}); break;
    case 2: f(std::integral_constant<int, 2>{}); break;
    case 3: f(std::integral_constant<int, 3>{}); break;
    case 4: f(std::integral_constant<int, 4>{}); break;
    case 5: f(std::integral_constant<int, 5>{}); break;
    case 6: f(std::integral_constant<int, 6>{}); break;
    default: f(std::integral_constant<int, 7>{}); break;
  }
}

// D += A B for one 8x8 tile: lane l holds A(l/4, l%4), B(l%4, l/4), D(l/4, 2(l%4) + {0,1}).
__device__ inline void Dmma(double (&d)[2], double a, double b) {
  asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0, %1}, {%2}, {%3}, {%0, %1};"
               : "+d"(d[0]), "+d"(d[1])
               : "d"(a), "d"(b));
}

// The lower tiles (R >= C) of a square tile grid in row order, (0,0), (1,0), (1,1), (2,0),
// ...: tile t's row and column (symmetric products compute these alone and mirror them).
__host__ __device__ constexpr int LowerTileRow(int t) {
  int r = 0;
  while ((r + 1) * (r + 2) / 2 <= t) ++r;
  return r;
}
__host__ __device__ constexpr int LowerTileCol(int t) {
  return t - LowerTileRow(t) * (LowerTileRow(t) + 1) / 2;
}

// A matrix in shared memory: M(r, c) = p[r * rs + c * cs].
struct SharedMat {
  const double* p;
  int rs, cs;
  __device__ double operator()(int r, int c) const { return p[r * rs + c * cs]; }
};

// C = X Y for the T x T tiles of 8 x 8 (T = 10: matrices padded to 80 x 80 with zeros),
// over k < kend (a multiple of 4). Warp W of kWarps owns tiles W, W + kWarps, ... (row-major
// tile index t: tile row t / T, column t % T), their sums in acc. X(i, k) and Y(k, j) are
// read as tensor-core fragments; with rs or cs = 4 mod 16 (doubles) and the other 1, a
// fragment is two conflict-free wavefronts. kUpperY: Y is upper triangular (Y(k, j) = 0 for
// k > j), so tile column j stops at k = 8 j + 7: its products past that add exact zeros.
// kLowerY: Y is lower triangular (Y(k, j) = 0 for k < j), so tile column j starts at the
// step holding k = 8 j.
template <int T, int kWarps, int W, int kPerWarp, bool kUpperY = false, bool kLowerY = false>
__device__ __forceinline__ void TileProduct(SharedMat x, SharedMat y, int kend, int lane,
                                            double (&acc)[kPerWarp][2]) {
#pragma unroll
  for (int i = 0; i < kPerWarp; ++i) acc[i][0] = acc[i][1] = 0.0;
  for (int k0 = 0; k0 < kend; k0 += 4) {
    double a[T], b[T];
#pragma unroll
    for (int r = 0; r < T; ++r) {
      a[r] = x(8 * r + lane / 4, k0 + lane % 4);
      b[r] = y(k0 + lane % 4, 8 * r + lane / 4);
    }
#pragma unroll
    for (int i = 0; i < kPerWarp; ++i) {
      const int t = W + kWarps * i;
      if (t < T * T && (!kUpperY || k0 < 8 * (t % T + 1)) && (!kLowerY || k0 + 4 > 8 * (t % T))) {
        Dmma(acc[i], a[t / T], b[t % T]);
      }
    }
  }
}

// Calls f(row, col, value) for each element of warp W's tiles this lane holds.
template <int T, int kWarps, int W, int kPerWarp, class F>
__device__ __forceinline__ void ForEachTileElement(const double (&acc)[kPerWarp][2], int lane,
                                                   F f) {
#pragma unroll
  for (int i = 0; i < kPerWarp; ++i) {
    const int t = W + kWarps * i;
    if (t >= T * T) continue;
    const int row = (t / T) * 8 + lane / 4;
#pragma unroll
    for (int h = 0; h < 2; ++h) f(row, (t % T) * 8 + 2 * (lane % 4) + h, acc[i][h]);
  }
}

}  // namespace spexd::cuda

#endif  // SPEXD_CUDA_DMMA_TILES_CUH_
