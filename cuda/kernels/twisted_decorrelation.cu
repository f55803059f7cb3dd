// The decorrelation's eigenvectors without a rotation log (nt <= 80; larger blocks take
// tridiag_decorrelation.cu's logged rotations).
// After the reduction (tridiag_decorrelation.cu), two kernels:
//  1. QlKernel<false>, a thread per block: QL for the eigenvalues alone (T oriented: from
//     its small end), no log, the warp's sweeps in step.
//  2. TwistedKernel, 8 warps per (patch, core spectrum): the eigenvectors of T by twisted
//     factorisations, their Rayleigh quotients as the eigenvalues (a second pass where one
//     moved), Newton-Schulz, V = H Z on the FP64 tensor cores (H's reflectors applied in
//     compact WY blocks), then the products.
#include <cstdint>

#include "cuda/kernels/decorrelation.h"
#include "cuda/kernels/decorrelation_products.cuh"
#include "cuda/kernels/dmma_tiles.cuh"
#include "cuda/kernels/kernel_common.cuh"
#include "cuda/kernels/launch_check.h"
#include "cuda/kernels/register_tridiag.cuh"
#include "core/numerics/tridiag_eigen.h"
#include "cuda/kernels/tridiag_kernel_common.cuh"
#include "core/numerics/tridiag_vectors.h"

namespace spexd::cuda {

// The shared eigen arithmetic (core/numerics/tridiag_eigen.h, tridiag_vectors.h).
using namespace ::spexd::core::tridiag;
namespace {

// QlKernel<false> leaves the eigenvalues; TwistedKernel computes T's eigenvector for each
// by a twisted factorisation (tridiag_vectors.h), two threads per eigenvalue (the top-down
// and bottom-up factorisations side by side; as a kernel of its own, a thread per
// eigenvalue, this was slower: its global round trips, and it crowded the Cholesky of the
// next batch); then G = Z^T Z; where max |G - I| <= kTwistedMaxDeviation, one Newton-Schulz
// step Z <- Z (3I - G) / 2 makes Z orthogonal to rounding (the deviation squares), and
// V = H Z; these products on the FP64 tensor cores (dmma_tiles.cuh), the matrices
// padded with zeros to 80 x 80. A block whose vectors deviate more (close eigenvalues;
// one block in an r frame) or whose QL failed runs QL with the rotations in the block
// (TridiagonalQl on the reduced T), as RotateKernel does where its log overflows.
// kTwistedMaxDeviation: core/numerics/tridiag_vectors.h.
constexpr int kTwT = kRegMaxN / 8;  // 8 x 8 tiles per side
constexpr int kTwWarps = 8;
constexpr int kTwThreads = 32 * kTwWarps;
// The 80 x 80 products by pairs of tile rows sharing a column tile (m16n8k4), balanced over
// the eight warps with few fragments each: warp w < 5 takes row pair w against columns
// 0..5; the 20 pairs of columns 6..9 go 7 / 7 / 6 to warps 5..7 in row-pair order. A warp
// loads 8-10 fragments a step for 6-7 products (TileProduct's pairs, W + 8 i, loaded up to
// 20 and spilled this kernel at its 128 registers).
constexpr int kTwPerWarp = 7;
__host__ __device__ constexpr int TwPairUnit(int w, int i) {  // unit index rp * 10 + c, or -1
  if (w < 5) return i < 6 ? w * kTwT + i : -1;
  const int r = (w == 5 ? 0 : w == 6 ? 7 : 14) + i;  // among the 20 right-hand pairs
  const int last = w == 7 ? 20 : (w == 5 ? 7 : 14);
  return r < last ? (r / 4) * kTwT + 6 + r % 4 : -1;
}

__host__ __device__ constexpr bool TwPairUnitsCoverEachPairOnce() {
  int seen[kTwT / 2 * kTwT] = {};
  for (int w = 0; w < kTwWarps; ++w) {
    for (int i = 0; i < kTwPerWarp; ++i) {
      if (TwPairUnit(w, i) >= 0) ++seen[TwPairUnit(w, i)];
    }
  }
  for (int u = 0; u < kTwT / 2 * kTwT; ++u) {
    if (seen[u] != 1) return false;
  }
  return true;
}
static_assert(TwPairUnitsCoverEachPairOnce(), "every tile pair to one warp");

template <int W>
__device__ __forceinline__ void TwPairProduct(SharedMat x, SharedMat y, int kend, int lane,
                                              double (&acc)[kTwPerWarp][4]) {
#pragma unroll
  for (int i = 0; i < kTwPerWarp; ++i) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.0;
  for (int k0 = 0; k0 < kend; k0 += 4) {
    StaticFor<kTwPerWarp>([&](auto i) {
      constexpr int u = TwPairUnit(W, decltype(i)::value);
      if constexpr (u >= 0) {
        constexpr int rp = u / kTwT, c = u % kTwT;
        DmmaPair(acc[decltype(i)::value], x(16 * rp + lane / 4, k0 + lane % 4),
                 x(16 * rp + 8 + lane / 4, k0 + lane % 4), y(k0 + lane % 4, 8 * c + lane / 4));
      }
    });
  }
}

template <int W, class F>
__device__ __forceinline__ void ForEachTwPairElement(const double (&acc)[kTwPerWarp][4], int lane, F f) {
  StaticFor<kTwPerWarp>([&](auto i) {
    constexpr int u = TwPairUnit(W, decltype(i)::value);
    if constexpr (u >= 0) {
      const int row = (u / kTwT) * 16 + lane / 4, col = (u % kTwT) * 8 + 2 * (lane % 4);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        f(row, col + h, acc[decltype(i)::value][h]);
        f(row + 8, col + h, acc[decltype(i)::value][2 + h]);
      }
    }
  });
}
constexpr int kTwLd = kRegMaxN + 4;  // 4 mod 16 doubles: conflict-free fragments
constexpr int kTwHalf = kTwThreads / 2;  // >= nt: the bottom-up factorisations' threads
static_assert(kRegMaxN % 8 == 0 && kTwLd % 16 == 4, "tile layout");

// Shared memory (doubles): R1 and R2 (kRegMaxN x kTwLd each), then the vectors. T as
// reduced (d0 in t0, e0 in e) is staged once: every factorising thread reads all of it
// (from global memory each step waited on L1).
struct TwistedLayout {
  std::size_t r1, r2, d, e, t0, x, scratch, red, ctl, bytes;
};
__host__ __device__ inline TwistedLayout MakeTwistedLayout(int n) {
  TwistedLayout l;
  l.r1 = 0;
  l.r2 = l.r1 + static_cast<std::size_t>(kRegMaxN) * kTwLd;
  l.d = l.r2 + static_cast<std::size_t>(kRegMaxN) * kTwLd;
  l.e = l.d + n;
  l.t0 = l.e + n;
  l.x = l.t0 + n;
  l.scratch = l.x + n;  // 5n
  l.red = l.scratch + 5 * static_cast<std::size_t>(n);
  l.ctl = l.red + 64;  // 6 ints in 3 doubles
  l.bytes = sizeof(double) * (l.ctl + 3);
  return l;
}

static_assert(kTwWarps == 8 && kTwT == 10, "ForEightWarps dispatches eight warps; TwPairUnit's 10 x 10 tiles");

// G = Z^T Z is symmetric: its lower tiles alone (55 of 100), by pairs of one column
// (dmma_tiles.cuh's LowerPair*: 30 pairs), warp W owning pairs W, W + 8, ...; X = Z^T and
// Y = Z have the same fragments (X(8R + l/4, k) = Z(k, 8R + l/4)), one load a tile row and
// k-step.
constexpr int kTwLowerPairs = LowerPairCount(kTwT);
constexpr int kTwLowerPerWarp = (kTwLowerPairs + kTwWarps - 1) / kTwWarps;

template <int W>
__device__ __forceinline__ void GramLowerTiles(const double* z, int kend, int lane,
                                               double (&acc)[kTwLowerPerWarp][4]) {
#pragma unroll
  for (int i = 0; i < kTwLowerPerWarp; ++i) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.0;
  for (int k0 = 0; k0 < kend; k0 += 4) {
    double f[kTwT + 1];  // f[R] = Z(k0 + l%4, 8R + l/4); f[kTwT] = 0 (a pair's missing row)
#pragma unroll
    for (int r = 0; r < kTwT; ++r) f[r] = z[(k0 + lane % 4) * kTwLd + 8 * r + lane / 4];
    f[kTwT] = 0.0;
    LowerPairStep<kTwT, kTwWarps, W, kTwLowerPerWarp>(f, acc);
  }
}

// f(row, col, g) for each element of warp W's lower tiles this lane holds, and for its
// mirror above the diagonal (the same g).
template <int W, class F>
__device__ __forceinline__ void ForEachGramElement(const double (&acc)[kTwLowerPerWarp][4], int lane, F f) {
  ForEachLowerPairElement<kTwT, kTwWarps, W, kTwLowerPerWarp>(acc, lane, [&](int row, int col, double g, int tr, int tc) {
    if (tr >= kTwT) return;  // a pair's missing row
    f(row, col, g);
    if (tr != tc) f(col, row, g);
  });
}

// B(l%4, l/4) = W(kk + l%4, l/4) of an 8 x 8 tile W held as a product's result (lane l
// holds W(l/4, 2(l%4) + {0,1})): the operand of a further product, by two shuffles.
__device__ __forceinline__ double ResultAsB(const double (&w)[2], int kk, int lane) {
  const int src = 4 * (kk + lane % 4) + (lane / 4) / 2;
  const double w0 = __shfl_sync(0xffffffffu, w[0], src);
  const double w1 = __shfl_sync(0xffffffffu, w[1], src);
  return (lane / 4) % 2 ? w1 : w0;
}

// Z <- H Z for Z in z (row-major, ld kTwLd, zero beyond n), H = H_0 ... H_{n-3} given by
// its compact WY blocks in wy (register_tridiag.cuh's StoreCompactReflectors, staged
// column-major with ld kTwLd): block b's H_b = I - V_b T_b V_b^T applied last block first,
// Z -= V_b (T_b (V_b^T Z)), on the FP64 tensor cores. A column tile of Z needs only its
// own columns, so a warp takes its tile columns through every block with no barrier; kNt
// tiles side by side share V_b's and T_b's loads and interleave their chains. V_b is zero
// above its unit diagonal (rows <= 8b + m of its column m), so the products start at row
// 8b + 1; the entries there hold T_b, masked off here.
template <int kNt>
__device__ void ApplyCompactReflectors(double* z, const double* wy, int n, const int (&tc)[kNt],
                                       int lane) {
  const int nblk = (n - 2 + kWyBlock - 1) / kWyBlock, kend = (n + 3) / 4 * 4;
  for (int b = nblk - 1; b >= 0; --b) {
    const int k0 = kWyBlock * b;
    // W = V_b^T Z(:, tile), even and odd steps in two sums (half the chain).
    double w[kNt][2], w2[kNt][2];
#pragma unroll
    for (int i = 0; i < kNt; ++i) w[i][0] = w[i][1] = w2[i][0] = w2[i][1] = 0.0;
    const int m = k0 + lane / 4;  // V_b's column this lane reads
    int kk = (k0 + 1) & ~3;
    for (; kk + 4 < kend; kk += 8) {
      const int r0 = kk + lane % 4, r1 = r0 + 4;
      const double a0 = r0 > m ? wy[m * kTwLd + r0] : 0.0;
      const double a1 = r1 > m ? wy[m * kTwLd + r1] : 0.0;
#pragma unroll
      for (int i = 0; i < kNt; ++i) {
        Dmma(w[i], a0, z[r0 * kTwLd + 8 * tc[i] + lane / 4]);
        Dmma(w2[i], a1, z[r1 * kTwLd + 8 * tc[i] + lane / 4]);
      }
    }
    if (kk < kend) {
      const int r0 = kk + lane % 4;
      const double a0 = r0 > m ? wy[m * kTwLd + r0] : 0.0;
#pragma unroll
      for (int i = 0; i < kNt; ++i) Dmma(w[i], a0, z[r0 * kTwLd + 8 * tc[i] + lane / 4]);
    }
    // Y = T_b W (T_b(p, j) for p <= j in column k0 + j, rows p).
    double y[kNt][2], yb[kNt][2];
#pragma unroll
    for (int i = 0; i < kNt; ++i) {
      w[i][0] += w2[i][0];
      w[i][1] += w2[i][1];
      y[i][0] = y[i][1] = 0.0;
    }
#pragma unroll
    for (int q = 0; q < kWyBlock; q += 4) {
      const int p = lane / 4, j = q + lane % 4;
      const double tf = p <= j ? wy[(k0 + j) * kTwLd + p] : 0.0;
#pragma unroll
      for (int i = 0; i < kNt; ++i) Dmma(y[i], tf, ResultAsB(w[i], q, lane));
    }
#pragma unroll
    for (int i = 0; i < kNt; ++i) {
      yb[i][0] = ResultAsB(y[i], 0, lane);
      yb[i][1] = ResultAsB(y[i], 4, lane);
    }
    // Z(:, tile) -= V_b Y, tile rows from 8b + 1 to n - 1, two tile rows a product (where
    // the second starts past n, its operand and sums are zeros, not stored).
    for (int tr = b; 8 * tr < n; tr += 2) {
      const int row = 8 * tr + lane / 4, c0 = k0 + lane % 4, c1 = c0 + 4;
      const bool bot = 8 * (tr + 1) < n;
      const double v0 = row > c0 ? -wy[c0 * kTwLd + row] : 0.0;
      const double v1 = row > c1 ? -wy[c1 * kTwLd + row] : 0.0;
      const double u0 = bot ? -wy[c0 * kTwLd + row + 8] : 0.0;  // row + 8 > c1 > c0
      const double u1 = bot ? -wy[c1 * kTwLd + row + 8] : 0.0;
#pragma unroll
      for (int i = 0; i < kNt; ++i) {
        double* zt = z + row * kTwLd + 8 * tc[i] + 2 * (lane % 4);
        double* zb = zt + 8 * kTwLd;
        double acc[4] = {zt[0], zt[1], bot ? zb[0] : 0.0, bot ? zb[1] : 0.0};
        DmmaPair(acc, v0, u0, yb[i][0]);
        DmmaPair(acc, v1, u1, yb[i][1]);
        zt[0] = acc[0];
        zt[1] = acc[1];
        if (bot) {
          zb[0] = acc[2];
          zb[1] = acc[3];
        }
      }
    }
    __syncwarp();
  }
}

// Warp w's tile columns of Z (w and w + 8 where n > 64) through ApplyCompactReflectors.
__device__ void ApplyCompactReflectors(double* z, const double* wy, int n, int warp, int lane) {
  const int ntiles = (n + 7) / 8;
  if (warp + kTwWarps < ntiles) {
    ApplyCompactReflectors<2>(z, wy, n, {warp, warp + kTwWarps}, lane);
  } else if (warp < ntiles) {
    ApplyCompactReflectors<1>(z, wy, n, {warp}, lane);
  }
}

// The slot holds H's reflectors in compact WY form (RegisterReduceKernel).
__global__ void __launch_bounds__(kTwThreads, 2) TwistedKernel(RunArgs a) {
  extern __shared__ double smem[];
  const PlanDims& D = a.dims;
  const int n = D.nwavetot, lda = n | 1, kend = (n + 3) / 4 * 4;
  const TwistedLayout L = MakeTwistedLayout(n);
  const RunEntry e = a.entries[blockIdx.x];
  const DevicePatch d = a.in.patches[e.patch];
  const int sp = blockIdx.y;
  double* r1 = smem + L.r1;
  double* r2 = smem + L.r2;
  double* dv = smem + L.d;   // the eigenvalues
  double* ev = smem + L.e;   // T's subdiagonal (e0 for the twisted factorisations)
  double* t0 = smem + L.t0;  // T's diagonal as reduced (d0)
  double* x = smem + L.x;
  double* scr = smem + L.scratch;
  int* ctl = reinterpret_cast<int*>(smem + L.ctl);
  const int64_t blk = BlockIndex(D);
  int sweeps = a.slots.eig_info[blk];
  const double* h = SlotBlock(a, e);
  // The eigenvectors end column-major (lda) in R2, where the compact reflectors were
  // applied to R1's row-major vectors.
  double* const vq = r2;
  // The slot's n x n block (the compact reflectors) into R2, column-major with ld kTwLd.
  const auto stage_slot = [&] {
    for (ColumnMajorWalk w(threadIdx.x, blockDim.x, n); w.idx < n * n; w.Next(blockDim.x, n)) {
      r2[w.col * kTwLd + w.row] = h[w.idx];
    }
  };
  // H Z (H itself where identity) from Z row-major in R1 (ignored where identity), the
  // compact reflectors staged in R2, into R2 column-major (lda). Every thread, at a barrier.
  const auto compact_hz = [&](bool identity) {
    __syncthreads();
    if (identity) {
      for (int i = threadIdx.x; i < kRegMaxN * kTwLd; i += blockDim.x) {
        r1[i] = i / kTwLd == i % kTwLd && i / kTwLd < n ? 1.0 : 0.0;
      }
    }
    stage_slot();
    __syncthreads();
    ApplyCompactReflectors(r1, r2, n, threadIdx.x / 32, threadIdx.x % 32);
    __syncthreads();
    // Along R1's rows (the walk's "row" is the column c here): consecutive threads read
    // consecutive doubles of R1 and write R2 at the odd stride lda, both free of bank
    // conflicts (down R1's columns, at kTwLd = 4 mod 16, a warp's reads were 8-way).
    for (ColumnMajorWalk w(threadIdx.x, blockDim.x, n); w.idx < n * n; w.Next(blockDim.x, n)) {
      r2[w.row * lda + w.col] = r1[w.col * kTwLd + w.row];
    }
    __syncthreads();
  };
  const double* xs = a.slots.x + static_cast<int64_t>(e.slot) * D.ld +
                     static_cast<int64_t>(d.core_row + sp) * n;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    x[i] = xs[i];
    dv[i] = a.ql.d[blk * n + i];
    t0[i] = a.ql.d0[blk * n + i];
    ev[i] = a.ql.e0[blk * n + i];
  }
  const int t = threadIdx.x, warp = t / 32, lane = t % 32;
  if (warp == 0) {  // T's norm once for the block (each factorising thread took it whole)
    const double *gd0 = a.ql.d0 + blk * n, *ge0 = a.ql.e0 + blk * n;
    double tn = 0.0;
    for (int i = lane; i < n; i += 32) tn = fmax(tn, TridiagonalRowNorm(gd0, ge0, n, i));
    tn = WarpMax(tn);
    if (lane == 0) scr[0] = tn;
  }
  // The padding of every 80 x 80 operand is zero; Z (row-major) into R1. 16-byte stores
  // (R1 starts the 16-byte aligned shared memory; R1 and R2 hold an even count).
  static_assert(kRegMaxN * kTwLd % 2 == 0, "R1 and R2 in double2");
  for (int i = threadIdx.x; i < kRegMaxN * kTwLd; i += blockDim.x) {
    reinterpret_cast<double2*>(r1)[i] = make_double2(0.0, 0.0);
  }
  __syncthreads();
  const double tnorm = scr[0];  // TridiagonalNorm(t0, ev, n)
  bool rotate = sweeps < 0;  // uniform
  if (!rotate) {
    // Column j of Z (row-major in R1): the top-down factorisation of T - lambda_j I by thread
    // j (its ratios into R1's column j), the bottom-up one by thread kTwHalf + j (into R2's);
    // then thread j twists and solves in place.
    // dv[t] becomes its vector's Rayleigh quotient (tridiag_vectors.h; only thread t reads
    // it between the barriers); where one moved by more than kTwistedRedoShift, the block
    // runs a second pass from the quotients (1.8 % of real blocks).
    const double* d0 = t0;
    const double* e0 = ev;
    const int j = t % kTwHalf;
    for (int pass = 0;; ++pass) {
      if (j < n) {
        if (t < kTwHalf) {
          TwistedTopDown(d0, e0, n, dv[j], tnorm, r1 + j, kTwLd);
        } else {
          TwistedBottomUp(d0, e0, n, dv[j], tnorm, r2 + j, kTwLd);
        }
      }
      __syncthreads();
      bool moved = false;
      if (t < n) {
        const double lambda = dv[t];
        TwistedSolve(d0, e0, n, lambda, r1 + t, kTwLd, r2 + t, kTwLd, dv + t);
        moved = !(fabs(dv[t] - lambda) <= kTwistedRedoShift * fabs(lambda));
      }
      if (!__syncthreads_or(moved) || pass == 1) break;  // uniform
    }
    double acc[kTwPerWarp][4];
    bool bad = false;
    // G = Z^T Z (its lower tiles, mirrored), kept as P = (3I - G) / 2 in R2 (row-major).
    ForEightWarps(warp, [&](auto w) {
      constexpr int W = decltype(w)::value;
      double gacc[kTwLowerPerWarp][4];
      GramLowerTiles<W>(r1, kend, lane, gacc);
      ForEachGramElement<W>(gacc, lane, [&](int row, int col, double g) {
        const double id = (row == col && row < n) ? 1.0 : 0.0;
        const double dev = g - id;  // 0 in the padding
        bad = bad || !(fabs(dev) <= kTwistedMaxDeviation);
        r2[row * kTwLd + col] = id - 0.5 * dev;
      });
    });
    rotate = __syncthreads_or(bad);
    if (!rotate) {
      // Z P over Z, once every warp has read Z; then H Z into R2 (column-major).
      ForEightWarps(warp, [&](auto w) {
        constexpr int W = decltype(w)::value;
        TwPairProduct<W>(SharedMat{r1, kTwLd, 1}, SharedMat{r2, kTwLd, 1},
                                       kend, lane, acc);
      });
      __syncthreads();
      ForEightWarps(warp, [&](auto w) {
        constexpr int W = decltype(w)::value;
        ForEachTwPairElement<W>(acc, lane, [&](int row, int col, double v) {
          r1[row * kTwLd + col] = v;
        });
      });
      compact_hz(false);
    }
  }
  if (rotate) {  // QL with the rotations applied in the block (to H), from T as reduced
    compact_hz(true);
    for (int i = t; i < n; i += blockDim.x) dv[i] = t0[i];  // e0 is still in ev (staged)
    __syncthreads();
    BlockTeam team{smem + L.red};
    sweeps = TridiagonalQl(team, dv, ev, vq, lda, n, scr, scr + 2 * n, ctl);
    if (t == 0) a.slots.eig_info[blk] = sweeps;
  }
  __syncthreads();
  WriteDecorrelated(a, e, d, sp, EigenView{vq, 1, lda}, dv, x,
                    ProductScratch{scr, scr + n, scr + 2 * n, scr + 3 * n, scr + 4 * n},
                    sweeps < 0);
}

}  // namespace

std::size_t TwistedVectorsSharedBytes(int nt) { return MakeTwistedLayout(nt).bytes; }

cudaError_t LaunchTwistedVectors(const RunArgs& args, cudaStream_t stream) {
  if (args.count == 0) return cudaSuccess;
  if (args.dims.nwavetot > kRegMaxN) return cudaErrorInvalidValue;
  const std::size_t tsmem = MakeTwistedLayout(args.dims.nwavetot).bytes;
  const std::size_t qsmem = QlSmemBytes(args.dims.nwavetot);
  cudaError_t err = PrepareSmem(TwistedKernel, tsmem);
  if (err == cudaSuccess) err = PrepareSmem(QlKernel<false>, qsmem);
  if (err != cudaSuccess) return err;
  const int64_t blocks = static_cast<int64_t>(args.count) * args.dims.nper;
  QlKernel<false><<<CeilDiv(blocks, kQlThreads), kQlThreads, qsmem, stream>>>(args, blocks);
  if ((err = SPEXD_CHECK_LAUNCH(stream)) != cudaSuccess) return err;
  const dim3 grid(static_cast<unsigned>(args.count), static_cast<unsigned>(args.dims.nper));
  TwistedKernel<<<grid, kTwThreads, tsmem, stream>>>(args);
  return SPEXD_CHECK_LAUNCH(stream);
}

}  // namespace spexd::cuda
