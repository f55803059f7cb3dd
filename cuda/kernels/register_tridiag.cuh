// Householder tridiagonalisation of one nt x nt symmetric block (nt <= 80) with the matrix
// held in registers, then the reflectors stored in compact WY form (device-only header; the
// algorithm is tridiag_eigen.h's HouseholderTridiagonalize, the LAPACK dsytd2 convention,
// with another data layout; the WY blocks are dlarft's).
//
// Why: the shared-memory version moves the whole trailing matrix through shared memory
// twice per column (p = tau A v, then the rank-2 update) behind three barriers, and was
// bound by that traffic and its latency. Here 256
// threads form a 16 x 16 grid and thread (r, c) owns A(r + 16a, c + 16b), a, b < 5, so
// the update never leaves the registers; p is summed by shuffles over the 16 lanes that
// share rows (a half-warp), two barriers per column. The column loop is unrolled over
// k / 16 (kA0) so that slots wholly above column k are skipped at compile time.
//
// Padding rows and columns (index >= nt) hold zeros and v is zero there, so they stay
// zero; rows and columns <= k of step k are left as they were (v and p are zero there),
// the reflectors live in shared memory instead.
#ifndef SPEXD_CUDA_REGISTER_TRIDIAG_CUH_
#define SPEXD_CUDA_REGISTER_TRIDIAG_CUH_

#include <cuda_pipeline.h>

#include <cstddef>

#include "core/numerics/tridiag_eigen.h"
#include "cuda/kernels/kernel_common.cuh"

namespace spexd::cuda {

// The shared eigen arithmetic (core/numerics/tridiag_eigen.h, tridiag_vectors.h).
using namespace ::spexd::core::tridiag;

inline constexpr int kRegLanes = 16;                    // columns of the thread grid
inline constexpr int kRegSlots = 5;                     // 16 x 5 = 80 rows/columns
inline constexpr int kRegMaxN = kRegLanes * kRegSlots;  // largest nt this kernel takes
inline constexpr int kRegThreads = kRegLanes * kRegLanes;
// p's entry for row r + 16 a sits at r + kRegPStride a: the holders of one row's slots (one
// half-warp, five rows 16 apart) write to five banks, not five times to one.
inline constexpr int kRegPStride = kRegLanes + 1;
// Even, so that red after it stays 16-byte aligned.
inline constexpr int kRegPDoubles = (kRegPStride * kRegSlots + 1) / 2 * 2;

using RegTile = double[kRegSlots][kRegSlots];

// Compact WY blocks (LAPACK dlarft, forward, columnwise): reflectors 8b .. 8b + 7 give
// H_8b ... H_8b+7 = I - V_b T_b V_b^T with T_b upper triangular 8 x 8.
inline constexpr int kWyBlock = 8;
inline constexpr int kWyMaxBlocks = kRegMaxN / kWyBlock;

// Shared memory of the register reduction (doubles): v[nt][80] (row k: reflector k, zero
// up to k, one at k+1; also the staging of C on entry), p[kRegPDoubles], warp partials red[8],
// d[nt], e[nt], tau[nt], then the T_b of the compact form (kWyMaxBlocks x 64, column-major).
struct RegShared {
  double* v;
  double* p;
  double* red;
  double* d;
  double* e;
  double* tau;
  double* wy;
};

__host__ __device__ inline std::size_t RegSharedBytes(int n) {
  return sizeof(double) * (static_cast<std::size_t>(kRegMaxN) * n + kRegPDoubles + 8 + 3 * n +
                           kWyMaxBlocks * kWyBlock * kWyBlock);
}

__device__ inline RegShared MakeRegShared(double* smem, int n) {
  RegShared s;
  s.v = smem;
  s.p = s.v + kRegMaxN * n;
  s.red = s.p + kRegPDoubles;
  s.d = s.red + 8;
  s.e = s.d + n;
  s.tau = s.e + n;
  s.wy = s.tau + n;
  return s;
}

// Sum over the 16 lanes of a half-warp (all 32 lanes call it). Butterfly order: every lane
// gets the bitwise same sum.
__device__ inline double HalfWarpSum(double x) {
  for (int off = 8; off > 0; off >>= 1) x += __shfl_xor_sync(0xffffffffu, x, off, kRegLanes);
  return x;
}

// Reduce-scatter over the 16 lanes of a half-warp (all 32 lanes call it): x[0..kM) are a
// lane's partial sums of slots slot0 .. slot0 + kM - 1; on return the lane holds the
// half-warp's whole sum of one slot (*slot; *real false where it holds none) and exactly
// one holder of each slot has *leader set. Recursive halving: at offset kOff the lanes
// with that bit clear keep the first half of the slots, the others the second, each adding
// its partner's copy (a + b == b + a: both partners get the same bits), so a level costs
// ceil(kM / 2) shuffles where HalfWarpSum costs kM: 7 instead of 20 for five slots. The
// shuffles share the L1/shared pipe with the broadcasts, which bounds this kernel.
template <int kM, int kOff>
__device__ inline double HalfWarpScatterSum(const double (&x)[kM], int lane16, int slot0, int nreal,
                                            int* slot, bool* real, bool* leader) {
  const bool upper = (lane16 & kOff) != 0;
  if constexpr (kM == 1) {
    const double y[1] = {x[0] + __shfl_xor_sync(0xffffffffu, x[0], kOff, kRegLanes)};
    *leader = *leader && !upper;
    if constexpr (kOff == 1) {
      *slot = slot0;
      *real = nreal > 0;
      return y[0];
    } else {
      return HalfWarpScatterSum<1, kOff / 2>(y, lane16, slot0, nreal, slot, real, leader);
    }
  } else {
    constexpr int kH = (kM + 1) / 2;
    static_assert(kOff > 1 || kH == 1, "more slots than a half-warp can scatter");
    double y[kH];
#pragma unroll
    for (int j = 0; j < kH; ++j) {
      const double hi = kH + j < kM ? x[kH + j] : 0.0;
      const double send = upper ? x[j] : hi;
      y[j] = (upper ? hi : x[j]) + __shfl_xor_sync(0xffffffffu, send, kOff, kRegLanes);
    }
    const int base = upper ? slot0 + kH : slot0;
    const int left = upper ? max(nreal - kH, 0) : min(nreal, kH);
    if constexpr (kOff == 1) {
      *slot = base;
      *real = left > 0;
      return y[0];
    } else {
      return HalfWarpScatterSum<kH, kOff / 2>(y, lane16, base, left, slot, real, leader);
    }
  }
}

// The lane (of 16) that HalfWarpScatterSum<m, 8> leaves holding slot slot0 + j (the one
// with its leader set), following its halving: the first ceil(m / 2) slots to the lanes
// with the offset's bit clear.
__host__ __device__ constexpr int HalfWarpScatterHolder(int m, int j) {
  int lane = 0;
  for (int off = 8; off > 0; off >>= 1) {
    if (m == 1) continue;  // every lane of the group holds it; the leader has the bit clear
    const int h = (m + 1) / 2;
    if (j >= h) {
      lane |= off;
      j -= h;
    }
    m = h;
  }
  return lane;
}

// HalfWarpScatterSum's routing replayed for every lane at compile time: each of the m
// slots ends in exactly one leader, the lane HalfWarpScatterHolder names.
__host__ __device__ constexpr bool HalfWarpScatterHoldersAgree(int m) {
  for (int j = 0; j < m; ++j) {
    int leaders = 0, at = -1;
    for (int lane = 0; lane < kRegLanes; ++lane) {
      int mm = m, base = 0, nreal = m;
      bool leader = true;
      for (int off = 8; off > 0; off >>= 1) {
        const bool upper = (lane & off) != 0;
        if (mm == 1) {
          leader = leader && !upper;
          continue;
        }
        const int h = (mm + 1) / 2;
        base = upper ? base + h : base;
        nreal = upper ? (nreal - h > 0 ? nreal - h : 0) : (nreal < h ? nreal : h);
        mm = h;
      }
      if (leader && nreal > 0 && base == j) {
        ++leaders;
        at = lane;
      }
    }
    if (leaders != 1 || at != HalfWarpScatterHolder(m, j)) return false;
  }
  return true;
}
static_assert(HalfWarpScatterHoldersAgree(1) && HalfWarpScatterHoldersAgree(2) &&
                  HalfWarpScatterHoldersAgree(3) && HalfWarpScatterHoldersAgree(4) &&
                  HalfWarpScatterHoldersAgree(5) && HalfWarpScatterHoldersAgree(6),
              "the scatter's holders");

// Columns k = 16 kA0 .. min(16 kA0 + 15, n - 3) of the reduction.
template <int kA0>
__device__ void RegReduceColumns(RegTile& A, int n, int r, int c, const RegShared& sh) {
  const int k_end = min(16 * kA0 + 16, n - 2);
  const int warp = static_cast<int>(threadIdx.x) >> 5;
  for (int k = 16 * kA0; k < k_end; ++k) {
    double* vk = sh.v + kRegMaxN * k;
    const int owner = k & 15;  // the half-warp whose slot kA0 is row k
    if (warp == owner >> 1) {  // both half-warps run it (full-warp shuffles); one writes
      double sq = 0.0;
#pragma unroll
      for (int b = kA0; b < kRegSlots; ++b) {
        if (c + 16 * b >= k + 2) sq += A[kA0][b] * A[kA0][b];
      }
      const double sigma = HalfWarpSum(sq);
      double alpha_own = A[kA0][kA0];  // A(k, k+1) sits in slot (k+1) >> 4 of lane (k+1) & 15
      if constexpr (kA0 + 1 < kRegSlots) {
        if (((k + 1) >> 4) != kA0) alpha_own = A[kA0][kA0 + 1];
      }
      const double alpha = __shfl_sync(0xffffffffu, alpha_own, (k + 1) & 15, kRegLanes);
      const double dk = __shfl_sync(0xffffffffu, A[kA0][kA0], k & 15, kRegLanes);
      const Reflector h = MakeReflector(alpha, sigma);
      const double tk = h.tau, beta = h.beta, scale = h.scale;
      if (r == owner) {
#pragma unroll
        for (int b = kA0; b < kRegSlots; ++b) {
          const int j = c + 16 * b;
          vk[j] = j <= k ? 0.0 : (j == k + 1 ? 1.0 : A[kA0][b] * scale);
        }
        if (c == 0) {
          sh.d[k] = dk;
          sh.e[k] = beta;
          sh.tau[k] = tk;
        }
      }
    }
    __syncthreads();  // v_k, tau_k
    const double tk = sh.tau[k];
    if (tk == 0.0) continue;  // H_k = I (uniform)
    // p = tau A v on rows > k (rows <= k keep their old entries, which must not count).
    // v's column entries stay in registers across the barrier (the L1 pipe bounds this
    // kernel; no more spills than before); its row entries and p are re-read.
    constexpr int kM = kRegSlots - kA0;
    double vc[kM], vr[kM];
#pragma unroll
    for (int b = 0; b < kM; ++b) {
      vc[b] = vk[c + 16 * (kA0 + b)];
      vr[b] = vk[r + 16 * (kA0 + b)];
    }
    {
      // Slot kM: this thread's share of v^T A v (v is zero on rows <= k, so p.v = tau v^T A v
      // needs no mask), summed with the rows by the same scatter instead of a warp tree.
      double q[kM + 1];
      q[kM] = 0.0;
#pragma unroll
      for (int a = 0; a < kM; ++a) {
        q[a] = 0.0;
#pragma unroll
        for (int b = 0; b < kM; ++b) q[a] = fma(A[kA0 + a][kA0 + b], vc[b], q[a]);
        q[kM] = fma(q[a], vr[a], q[kM]);
      }
      // Each row's sum lands in one lane (HalfWarpScatterSum), which writes p.
      int a = kA0;
      bool real = false, leader = true;
      const double qs = HalfWarpScatterSum<kM + 1, 8>(q, c, kA0, kM + 1, &a, &real, &leader);
      if (real && leader && a < kRegSlots) {
        const int i = r + 16 * a;
        sh.p[r + kRegPStride * a] = i > k ? tk * qs : 0.0;
      }
      // The v^T A v holders: the same lane of both half-warps.
      const double vav = qs + __shfl_xor_sync(0xffffffffu, qs, 16);
      if (real && leader && a == kRegSlots && r % 2 == 0) sh.red[warp] = tk * vav;
    }
    __syncthreads();  // p, p.v partials
    double ptv = 0.0;
    // Fixed order, two partials a load (red: an even number of doubles into the block's
    // dynamic shared memory, so 16-byte aligned).
    const double2* red2 = reinterpret_cast<const double2*>(sh.red);
#pragma unroll
    for (int w = 0; w < kRegThreads / 64; ++w) {
      const double2 t = red2[w];
      ptv += t.x;
      ptv += t.y;
    }
    const double kk = 0.5 * (tk * ptv);  // K = (tau/2) p.v
    // A -= v x^T + x v^T, x = p - K v, two FMAs an element. A(i, j) and A(j, i) then differ
    // by rounding (the reflectors read rows, p = A v the whole matrix): a backward error of
    // O(eps |A|), as any reduction's, but against a long-double reference the outputs'
    // median and p99 errors grow ~1.2x (the largest do not). The bitwise-symmetric forms
    // cost more: two products and two sums 7 % of this kernel; FMAs ordered by index off
    // the diagonal tiles, which keep the old accuracy, 3 % and 0.3 ms a frame.
    double xc[kM];
#pragma unroll
    for (int b = 0; b < kM; ++b) xc[b] = fma(-kk, vc[b], sh.p[c + kRegPStride * (kA0 + b)]);
#pragma unroll
    for (int a = kA0; a < kRegSlots; ++a) {
      const double vra = vk[r + 16 * a];  // re-read: fewer registers live across the barrier
      const double xr = fma(-kk, vra, sh.p[r + kRegPStride * a]);
#pragma unroll
      for (int b = kA0; b < kRegSlots; ++b) {
        A[a][b] = fma(-vra, xc[b - kA0], fma(-xr, vc[b - kA0], A[a][b]));
      }
    }
  }
}

// C (column-major n x n, lower triangle read) -> d, e of T = H^T C H in sh.d, sh.e, the
// reflectors in sh.v and tau (A is left as scratch). All kRegThreads threads.
__device__ inline void RegisterTridiagonalize(const double* c_in, int n, const RegShared& sh,
                                              RegTile& A) {
  const int r = static_cast<int>(threadIdx.x) >> 4, c = static_cast<int>(threadIdx.x) & 15;
  // Staged through sh.v (coalesced reads, asynchronous), then each thread takes
  // its elements.
  for (int idx = threadIdx.x; idx < n * n; idx += blockDim.x) {
    __pipeline_memcpy_async(sh.v + idx, c_in + idx, sizeof(double));
  }
  __pipeline_commit();
  __pipeline_wait_prior(0);
  __syncthreads();
#pragma unroll
  for (int a = 0; a < kRegSlots; ++a) {
#pragma unroll
    for (int b = 0; b < kRegSlots; ++b) {
      const int i = r + 16 * a, j = c + 16 * b;
      A[a][b] = i < n && j < n ? (i >= j ? sh.v[j * n + i] : sh.v[i * n + j]) : 0.0;
    }
  }
  __syncthreads();  // the staging area becomes the reflectors
  RegReduceColumns<0>(A, n, r, c, sh);
  RegReduceColumns<1>(A, n, r, c, sh);
  RegReduceColumns<2>(A, n, r, c, sh);
  RegReduceColumns<3>(A, n, r, c, sh);
  RegReduceColumns<4>(A, n, r, c, sh);
  // The trailing 2 x 2 (or smaller) block of T.
#pragma unroll
  for (int a = 0; a < kRegSlots; ++a) {
#pragma unroll
    for (int b = 0; b < kRegSlots; ++b) {
      const int i = r + 16 * a, j = c + 16 * b;
      if (i == n - 2 && j == n - 2) sh.d[n - 2] = A[a][b];
      if (i == n - 2 && j == n - 1) sh.e[n - 2] = A[a][b];
      if (i == n - 1 && j == n - 1) sh.d[n - 1] = A[a][b];
    }
  }
  if (threadIdx.x == 0) sh.e[n - 1] = 0.0;
  __syncthreads();  // every reflector, tau, d, e
}

// After RegisterTridiagonalize: H = H_0 ... H_{n-3} in compact WY form, written over the
// n x n block h (column-major) instead of H itself (forming H took
// 0.37 of the reduction's 2.57 ms a batch on the H100; the twisted kernel applies the
// blocks to its vectors on the tensor cores, twisted_decorrelation.cu). Column k < n - 2 holds reflector k's v below its diagonal
// (v(k+1) = 1 stored, rows > k+1 as reduced) and T_b's column k mod 8 in rows 0 .. k mod 8
// (b = k / 8); every other entry, and columns n - 2 and n - 1, are zero.
__device__ inline void StoreCompactReflectors(int n, const RegShared& sh, double* h) {
  const int nrefl = n - 2, nblk = (nrefl + kWyBlock - 1) / kWyBlock;
  constexpr int kPairs = kWyBlock * (kWyBlock - 1) / 2;
  // S(p, j) = v_p . v_j for p < j of one block (v_j is zero up to its own row kj, one at
  // kj + 1), over T_b's slot for (p, j).
  for (int idx = threadIdx.x; idx < nblk * kPairs; idx += blockDim.x) {
    const int b = idx / kPairs;
    int q = idx % kPairs, j = 1;
    while (q >= j) q -= j++;  // (p, j) = (q, j), p < j
    const int kp = kWyBlock * b + q, kj = kWyBlock * b + j;
    double s = 0.0;
    if (kj < nrefl) {
      const double* vp = sh.v + kRegMaxN * kp;
      const double* vj = sh.v + kRegMaxN * kj;
      for (int i = kj + 1; i < n; ++i) s = fma(vp[i], vj[i], s);
    }
    sh.wy[b * kWyBlock * kWyBlock + j * kWyBlock + q] = s;
  }
  __syncthreads();
  // T_b(j, j) = tau_j, T_b(p, j) = -tau_j sum_{q=p}^{j-1} T_b(p, q) S(q, j) for p < j
  // (dlarft): row p needs only its own earlier entries, so a thread a row, in place (row p
  // reads S(q, j) with q >= p, which no other row overwrites: S(q, j) sits in row q).
  const bool row_thread = static_cast<int>(threadIdx.x) < nblk * kWyBlock;
  const int b = static_cast<int>(threadIdx.x) / kWyBlock, p = static_cast<int>(threadIdx.x) % kWyBlock;
  double* t = sh.wy + b * kWyBlock * kWyBlock;
  double row[kWyBlock];  // T_b(p, q), q < j
#pragma unroll
  for (int j = 0; j < kWyBlock; ++j) {
    const int k = kWyBlock * b + j;
    const double tau = row_thread && k < nrefl ? sh.tau[k] : 0.0;
    double acc = 0.0;
#pragma unroll
    for (int q = 0; q < j; ++q) {
      if (row_thread && q >= p) acc = fma(row[q], t[j * kWyBlock + q], acc);
    }
    row[j] = j < p ? 0.0 : (j == p ? tau : -tau * acc);
  }
  __syncthreads();  // every row has read its S
  if (row_thread) {
#pragma unroll
    for (int j = 0; j < kWyBlock; ++j) {
      if (j >= p) t[j * kWyBlock + p] = row[j];
    }
  }
  __syncthreads();
  for (ColumnMajorWalk w(threadIdx.x, blockDim.x, n); w.idx < n * n; w.Next(blockDim.x, n)) {
    const int k = w.col, i = w.row, jb = k % kWyBlock;
    double val = 0.0;
    if (k < nrefl) {
      if (i > k) {
        val = sh.v[kRegMaxN * k + i];
      } else if (i <= jb) {
        val = sh.wy[(k / kWyBlock) * kWyBlock * kWyBlock + jb * kWyBlock + i];
      }
    }
    h[w.idx] = val;
  }
}

}  // namespace spexd::cuda

#endif  // SPEXD_CUDA_REGISTER_TRIDIAG_CUH_
