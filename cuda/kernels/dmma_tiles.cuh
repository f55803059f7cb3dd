// FP64 tensor-core (DMMA, mma.sync m8n8k4 and m16n8k4) pieces shared by the kernels that
// multiply small matrices held in shared memory (device-only header).
//
// On the H100 an m16n8k4 issues at the rate of an m8n8k4 (66 against 33 TFLOP/s a GPU),
// and its two 8 x 8 halves are bit-identical to two m8n8k4 with the
// same B (a probe of 25.6 M random elements; a warm r frame's --model --dump is
// byte-identical to the m8n8k4 kernels'): so products go two tiles at a time where two
// tiles share B and the registers allow.
#ifndef SPEXD_CUDA_DMMA_TILES_CUH_
#define SPEXD_CUDA_DMMA_TILES_CUH_

#include <type_traits>
#include <utility>

namespace spexd::cuda {

// f(std::integral_constant<int, warp>) for warp 0..7 (warp-uniform): the kernels with
// eight warps get their warp's tiles as compile-time indices (LowerPairStep's W).
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

// f(std::integral_constant<int, i>{}) for i = 0 .. N-1: indices that are constant
// expressions, so that a tile's place (LowerPair*) folds at compile time.
template <class F, int... I>
__device__ __forceinline__ void StaticForImpl(F& f, std::integer_sequence<int, I...>) {
  (f(std::integral_constant<int, I>{}), ...);
}
template <int N, class F>
__device__ __forceinline__ void StaticFor(F f) {
  StaticForImpl(f, std::make_integer_sequence<int, N>{});
}

// A pair of 8 x 8 tiles with the same B in one m16n8k4: d[0..1] += A_top B as Dmma's d,
// d[2..3] += A_bot B (lane l holds A_top(l/4, l%4) and A_bot(l/4, l%4)). The f64 m16n8k4
// shape begins with sm_90; an A100 (sm_80) has only m8n8k4, so there the pair is two of
// them, with the same fragments (the m16n8k4's halves are those two products).
__device__ inline void DmmaPair(double (&d)[4], double a_top, double a_bot, double b) {
#if __CUDA_ARCH__ >= 900
  asm volatile(
      "mma.sync.aligned.m16n8k4.row.col.f64.f64.f64.f64 {%0, %1, %2, %3}, {%4, %5}, {%6}, "
      "{%0, %1, %2, %3};"
      : "+d"(d[0]), "+d"(d[1]), "+d"(d[2]), "+d"(d[3])
      : "d"(a_top), "d"(a_bot), "d"(b));
#else
  asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0, %1}, {%2}, {%3}, {%0, %1};"
               : "+d"(d[0]), "+d"(d[1])
               : "d"(a_top), "d"(b));
  asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0, %1}, {%2}, {%3}, {%0, %1};"
               : "+d"(d[2]), "+d"(d[3])
               : "d"(a_bot), "d"(b));
#endif
}

// The lower tiles of a T x T grid by pairs that share their column C (so B): rows C and
// C + 1, C + 2 and C + 3, ...; where T - C is odd the last pair's bottom row is T (none:
// its operand is zero and its sums are dropped). Pair u's column and top row, in column
// order.
__host__ __device__ constexpr int LowerPairCount(int T) {
  int n = 0;
  for (int c = 0; c < T; ++c) n += (T - c + 1) / 2;
  return n;
}
__host__ __device__ constexpr int LowerPairCol(int T, int u) {
  int c = 0;
  while (u >= (T - c + 1) / 2) u -= (T - c + 1) / 2, ++c;
  return c;
}
__host__ __device__ constexpr int LowerPairRow(int T, int u) {
  int c = 0;
  while (u >= (T - c + 1) / 2) u -= (T - c + 1) / 2, ++c;
  return c + 2 * u;
}

// One k-step of warp W's share (pairs W, W + kWarps, ...) of a symmetric product X X^T's
// lower tile pairs: f[R] is tile row R's fragment (A of tile row R and B of tile column
// R hold the same values), f[T] = 0 (a pair's missing row).
template <int T, int kWarps, int W, int kPerWarp>
__device__ __forceinline__ void LowerPairStep(const double (&f)[T + 1], double (&acc)[kPerWarp][4]) {
  StaticFor<kPerWarp>([&](auto i) {
    constexpr int I = decltype(i)::value, u = W + kWarps * I;
    if constexpr (u < LowerPairCount(T)) {
      constexpr int r = LowerPairRow(T, u);
      DmmaPair(acc[I], f[r], f[r + 1], f[LowerPairCol(T, u)]);
    }
  });
}

// Calls f(row, col, value, tr, tc) for each element of warp W's lower tile pairs this lane
// holds, (tr, tc) its tile; a pair's missing row comes as tr = T (rows 8 T..: callers that
// bound rows by nt < 8 T drop it, others skip tr = T).
template <int T, int kWarps, int W, int kPerWarp, class F>
__device__ __forceinline__ void ForEachLowerPairElement(const double (&acc)[kPerWarp][4], int lane,
                                                        F f) {
  StaticFor<kPerWarp>([&](auto i) {
    constexpr int I = decltype(i)::value, u = W + kWarps * I;
    if constexpr (u < LowerPairCount(T)) {
      constexpr int tc = LowerPairCol(T, u);
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int tr = LowerPairRow(T, u) + half, row = tr * 8 + lane / 4;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          f(row, tc * 8 + 2 * (lane % 4) + h, acc[I][2 * half + h], tr, tc);
        }
      }
    }
  });
}

// A matrix in shared memory: M(r, c) = p[r * rs + c * cs].
struct SharedMat {
  const double* p;
  int rs, cs;
  __device__ double operator()(int r, int c) const { return p[r * rs + c * cs]; }
};

// One warp's share of C = X Y in 8 x 8 tiles (matrices padded with zeros; X(i, k) and
// Y(k, j) read as fragments: with rs or cs = 4 mod 16 doubles and the other 1, a fragment
// is two conflict-free wavefronts), over k < kend (a multiple of 4): tile rows 2 rp and
// 2 rp + 1, tile columns c = c0, c0 + cs, ... (kCols of them), a DmmaPair each a step, 2 +
// kCols fragment loads. kUpperY: Y is upper triangular (Y(k, j) = 0 for k > j), so tile
// column j stops at k = 8 j + 7; kLowerY: Y is lower triangular, so tile column j starts at
// the step holding k = 8 j (the steps no column needs are skipped).
template <int kCols, bool kUpperY = false, bool kLowerY = false, bool kAccumulate = false>
__device__ __forceinline__ void RowPairProduct(SharedMat x, SharedMat y, int kend, int rp, int c0,
                                               int cs, int lane, double (&acc)[kCols][4]) {
  if constexpr (!kAccumulate) {
#pragma unroll
    for (int j = 0; j < kCols; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0;
  }
  const int cmax = c0 + (kCols - 1) * cs;
  const int kbegin = kLowerY ? 8 * c0 : 0;
  const int kstop = kUpperY ? min(kend, 8 * (cmax + 1)) : kend;
  for (int k0 = kbegin; k0 < kstop; k0 += 4) {
    const double at = x(16 * rp + lane / 4, k0 + lane % 4);
    const double ab = x(16 * rp + 8 + lane / 4, k0 + lane % 4);
#pragma unroll
    for (int j = 0; j < kCols; ++j) {
      const int c = c0 + j * cs;
      if ((!kUpperY || k0 < 8 * (c + 1)) && (!kLowerY || k0 + 4 > 8 * c)) {
        DmmaPair(acc[j], at, ab, y(k0 + lane % 4, 8 * c + lane / 4));
      }
    }
  }
}

// Calls f(row, col, value) for each element of a RowPairProduct's tiles this lane holds.
template <int kCols, class F>
__device__ __forceinline__ void ForEachRowPairElement(const double (&acc)[kCols][4], int rp, int c0,
                                                      int cs, int lane, F f) {
#pragma unroll
  for (int j = 0; j < kCols; ++j) {
    const int row = 16 * rp + lane / 4, col = 8 * (c0 + j * cs) + 2 * (lane % 4);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      f(row, col + h, acc[j][h]);
      f(row + 8, col + h, acc[j][2 + h]);
    }
  }
}

}  // namespace spexd::cuda

#endif  // SPEXD_CUDA_DMMA_TILES_CUH_
