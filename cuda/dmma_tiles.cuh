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

// D0 += A0 B and D1 += A1 B for two 8x8 tiles stacked in rows (one m16n8k4: on the H100
// it runs at twice m8n8k4's rate, 66 against 33 TFLOP/s, session 32): lane l holds A0(l/4,
// l%4) in a0, A1(l/4, l%4) in a1, B(l%4, l/4), D0 as Dmma's d in d[0..1], D1 in d[2..3].
__device__ inline void DmmaPair(double (&d)[4], double a0, double a1, double b) {
  asm volatile(
      "mma.sync.aligned.m16n8k4.row.col.f64.f64.f64.f64 {%0, %1, %2, %3}, {%4, %5}, {%6}, "
      "{%0, %1, %2, %3};"
      : "+d"(d[0]), "+d"(d[1]), "+d"(d[2]), "+d"(d[3])
      : "d"(a0), "d"(a1), "d"(b));
}

// The lower triangle of a T x T tile grid (T even) by pairs of tile rows (2p, 2p + 1) and
// tile columns c <= 2p + 1, a DmmaPair each, (T / 2)(T / 2 + 1) pairs in row order: pair
// u's p and c (symmetric products compute these and mirror them; a pair's tile
// (2p, 2p + 1) lies above the diagonal and is dropped).
__host__ __device__ constexpr int LowerPairs(int T) { return (T / 2) * (T / 2 + 1); }
__host__ __device__ constexpr int LowerPairRow(int u) {
  int p = 0;
  while ((p + 1) * (p + 2) <= u) ++p;
  return p;
}
__host__ __device__ constexpr int LowerPairCol(int u) {
  return u - LowerPairRow(u) * (LowerPairRow(u) + 1);
}
static_assert(LowerPairRow(LowerPairs(10) - 1) == 4 && LowerPairCol(LowerPairs(10) - 1) == 9 &&
                  LowerPairRow(2) == 1 && LowerPairCol(2) == 0,
              "pairs in row order: (0; 0, 1), (1; 0, 1, 2, 3), ...");

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
template <int T, int kWarps, int W, int kPerWarp, bool kUpperY = false>
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
      if (t < T * T && (!kUpperY || k0 < 8 * (t % T + 1))) Dmma(acc[i], a[t / T], b[t % T]);
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

// Units of TilePairProduct: pairs of row-adjacent 8x8 tiles, (T / 2) x T of them.
__host__ __device__ constexpr int TilePairsPerWarp(int T, int kWarps) {
  return ((T / 2) * T + kWarps - 1) / kWarps;
}

// TileProduct with the tiles by pairs of tile rows (2p, 2p + 1) of one
// tile column, a DmmaPair each: warp W of kWarps owns pairs u = W, W + kWarps, ... (pair
// row u / T, tile column u % T), their sums in acc[i] = {rows 2p: 0, 1; rows 2p + 1: 2, 3}.
// Faster where the tensor pipe bounds the products (the twisted kernel's 2.05 -> 1.94 ms a
// batch), slower where their loads do (the panel solve's 153 -> 206 us a launch; H100,
// session 32).
template <int T, int kWarps, int W, int kPerWarp>
__device__ __forceinline__ void TilePairProduct(SharedMat x, SharedMat y, int kend, int lane,
                                                double (&acc)[kPerWarp][4]) {
  static_assert(T % 2 == 0 && kPerWarp == TilePairsPerWarp(T, kWarps), "tile pairs");
#pragma unroll
  for (int i = 0; i < kPerWarp; ++i) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.0;
  for (int k0 = 0; k0 < kend; k0 += 4) {
    double a[T], b[T];
#pragma unroll
    for (int r = 0; r < T; ++r) {
      a[r] = x(8 * r + lane / 4, k0 + lane % 4);
      b[r] = y(k0 + lane % 4, 8 * r + lane / 4);
    }
#pragma unroll
    for (int i = 0; i < kPerWarp; ++i) {
      const int u = W + kWarps * i, p = u / T, c = u % T;
      if (u < (T / 2) * T) DmmaPair(acc[i], a[2 * p], a[2 * p + 1], b[c]);
    }
  }
}

// Calls f(row, col, value) for each element of warp W's tile pairs this lane holds.
template <int T, int kWarps, int W, int kPerWarp, class F>
__device__ __forceinline__ void ForEachTilePairElement(const double (&acc)[kPerWarp][4], int lane,
                                                       F f) {
#pragma unroll
  for (int i = 0; i < kPerWarp; ++i) {
    const int u = W + kWarps * i;
    if (u >= (T / 2) * T) continue;
    const int row = (u / T) * 16 + lane / 4, col = (u % T) * 8 + 2 * (lane % 4);
#pragma unroll
    for (int h = 0; h < 4; ++h) f(row + 8 * (h / 2), col + h % 2, acc[i][h]);
  }
}

}  // namespace spexd::cuda

#endif  // SPEXD_CUDA_DMMA_TILES_CUH_
