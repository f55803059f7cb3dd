// Q = C_ss^{-1/2} by Householder tridiagonalisation + implicit QL, then the
// decorrelation products (extraction-spec §2.10–2.11), in three kernels:
//  1. RegisterReduceKernel (nt <= 80; register_tridiag.cuh: the matrix in registers) or
//     ReduceKernel (shared memory), a thread block per (patch, core spectrum):
//     T = H^T C H, H formed and written over C (or, for the twisted kernel, H's
//     reflectors in compact WY form: register_tridiag.cuh); T to QlBuffers.
//  2. QlKernel, a thread per block: QL on T, its rotations logged. QL is a chain of
//     dependent scalar steps (≈ 130 sweeps, ≈ 5,000 rotations per block): run inside
//     the thread block it left the SM idle (1.3 ms per block, measured), here 23,500
//     chains run side by side.
//  3. RotateKernel, a thread block per block again: the logged rotations applied to the
//     rows of H (no barrier: rows are independent) -> eigenvectors, then the products.
//     For nt <= kRegMaxN each thread holds its row of H in registers while the sweeps
//     stream past (RotateRowSweeps); larger nt rotate the rows in shared memory.
//     A block whose log overflowed runs TridiagonalQl here instead.
// Only one nt x nt matrix lives in shared memory, so four blocks fit on an SM.
// The default for nt <= 80 replaces 2 and 3 by twisted_decorrelation.cu's kernels
// (SPEXD_CUDA_EIGENVECTORS=rotate keeps them).
#include "cuda/decorrelation.h"

#include <cuda_pipeline.h>

#include <cstdlib>

#include "cuda/decorrelation_products.cuh"
#include "cuda/kernel_common.cuh"
#include "cuda/launch_check.h"
#include "cuda/register_tridiag.cuh"
#include "cuda/tridiag_kernel_common.cuh"
#include "core/numerics/tridiag_eigen.h"

namespace spexd::cuda {

// The shared eigen arithmetic (core/numerics/tridiag_eigen.h, tridiag_vectors.h).
using namespace ::spexd::core::tridiag;
namespace {

// Reduction: 8 warps (its loops are latency-bound at four blocks per SM). Rotation in
// shared memory: 4 warps, a row per thread (the in-block QL fallback has warp 0 compute
// the rotations while the other warps apply them to the rows). QL: tridiag_kernel_common.cuh.
constexpr int kReduceThreads = 256;
constexpr int kThreads = 128;
// Rotation with the rows in registers: a thread per row, nt <= kRegMaxN = 80 rows in 3
// warps; ~216 registers per thread (224 allowed: two blocks per SM either way, since a
// warp's registers come from one quarter of the SM's file; at 168, three warps per
// quarter, the row spills).
constexpr int kRegRotThreads = 96;
constexpr int kQlLogOverflow = -2;
// Rotations staged in shared memory per round of the rotation kernel (c and s: 5 KB).
constexpr int kRotChunk = 320;

// Shared memory of the reduction and rotation kernels (offsets in doubles).
struct Layout {
  int n, lda;
  std::size_t a, d, e, tau, x, scratch, red, scalar, ctl, bytes;
};

__host__ __device__ inline Layout MakeLayout(int n) {
  Layout l;
  l.n = n;
  l.lda = n | 1;  // odd: a thread per row/column walks the banks without conflicts
  l.a = 0;
  l.d = l.a + static_cast<std::size_t>(n) * l.lda;
  l.e = l.d + n;
  l.tau = l.e + n;
  l.x = l.tau + n;
  l.scratch = l.x + n;  // 5n: v, w (reduction) | rotations [2][n] x 2 (QL) | products
  l.red = l.scratch + 5 * static_cast<std::size_t>(n);
  l.scalar = l.red + 64;
  l.ctl = l.scalar + 1;  // 6 ints
  l.bytes = sizeof(double) * l.ctl + 6 * sizeof(int);
  return l;
}

// The rotation kernel also stages rotations: kRotChunk (c, s) pairs after the layout,
// 16-byte aligned.
__host__ __device__ inline std::size_t RotateSmemBytes(const Layout& l) {
  return (l.bytes + 15) / 16 * 16 + 2 * kRotChunk * sizeof(double);
}

__global__ void __launch_bounds__(kReduceThreads) ReduceKernel(RunArgs a) {
  extern __shared__ double smem[];
  const PlanDims& D = a.dims;
  const Layout L = MakeLayout(D.nwavetot);
  const int n = L.n, lda = L.lda;
  const RunEntry e = a.entries[blockIdx.x];
  double* m = smem + L.a;
  double* dv = smem + L.d;
  double* ev = smem + L.e;
  double* tau = smem + L.tau;
  double* scr = smem + L.scratch;
  BlockTeam team{smem + L.red};
  double* c = SlotBlock(a, e);
  for (int idx = threadIdx.x; idx < n * n; idx += blockDim.x) {
    const int r = idx % n, col = idx / n;  // column-major element (r, col)
    if (r >= col) {  // lower triangle, mirrored (the CPU's dsyrk/dsyevd use "L" too)
      const double v = c[idx];
      m[col * lda + r] = v;
      m[r * lda + col] = v;
    }
  }
  __syncthreads();
  HouseholderTridiagonalize(team, m, lda, n, dv, ev, tau, scr, scr + n, smem + L.scalar);
  FormReflectorProduct(team, m, lda, n, tau, scr);
  for (int idx = threadIdx.x; idx < n * n; idx += blockDim.x) c[idx] = m[(idx / n) * lda + idx % n];
  const int64_t b = BlockIndex(D) * n;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    a.ql.d[b + i] = a.ql.d0[b + i] = dv[i];
    a.ql.e[b + i] = a.ql.e0[b + i] = ev[i];
  }
}

// The same reduction with the matrix in registers (cuda/register_tridiag.cuh), nt <= 80.
// Three blocks per SM: 80 registers per thread and 72 bytes of spills, 3.49 ms per batch
// of 1,410 r-frame patches against 3.81 ms at two blocks per SM (126 registers, no
// spills) and 5.77 ms for ReduceKernel (H100, ncu).
// kCompact: the reflectors in compact WY form over C (StoreCompactReflectors) instead of H.
template <bool kCompact>
__global__ void __launch_bounds__(kRegThreads, 3) RegisterReduceKernel(RunArgs a) {
  extern __shared__ double smem[];
  const PlanDims& D = a.dims;
  const int n = D.nwavetot;
  const RunEntry e = a.entries[blockIdx.x];
  const RegShared sh = MakeRegShared(smem, n);
  double* c = SlotBlock(a, e);
  RegTile g;
  RegisterTridiagonalize(c, n, sh, g);
  if constexpr (kCompact) {
    StoreCompactReflectors(n, sh, c);
  } else {
    RegisterFormReflectorProduct(n, sh, g);
    StoreReflectorProduct(g, n, c);
  }
  const int64_t b = BlockIndex(D) * n;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    a.ql.d[b + i] = a.ql.d0[b + i] = sh.d[i];
    a.ql.e[b + i] = a.ql.e0[b + i] = sh.e[i];
  }
}

// Applies the logged sweeps of block blk to the rows of z (one row per thread), staging
// the rotations through shared memory kRotChunk at a time: read straight from global
// memory every rotation waited on a load (measured 265 cycles per rotation).
// (c, s) pairs in shared memory: one 16-byte broadcast load per rotation instead of two.
struct PairRotations {
  const double2* cs;
  __device__ void Get(int q, double* cq, double* sq) const {
    const double2 r = cs[q];
    *cq = r.x;
    *sq = r.y;
  }
};

__device__ void ApplyLogStaged(const RunArgs& a, int64_t blk, int sweeps, double* z, int lda,
                               double2* cs) {
  const int n = a.dims.nwavetot, rcap = QlRotationCap(n), scap = QlSweepCap(n);
  const double* gc = a.ql.c + blk * rcap;
  const double* gs = a.ql.s + blk * rcap;
  const int* lohi = a.ql.sweeps + blk * 2 * scap;
  int total = 0;
  for (int k = 0; k < sweeps; ++k) total += lohi[2 * k + 1] - lohi[2 * k] + 1;
  const int row = threadIdx.x;
  int sw = 0, done = 0;  // this row's position: sweep sw, rotations of it already applied
  for (int base = 0; base < total; base += kRotChunk) {
    const int len = min(kRotChunk, total - base);
    __syncthreads();  // the previous chunk is consumed
    for (int k = threadIdx.x; k < len; k += blockDim.x) cs[k] = make_double2(gc[base + k], gs[base + k]);
    __syncthreads();
    if (row >= n) continue;
    for (int pos = 0; pos < len;) {
      const int lo = lohi[2 * sw], hi = lohi[2 * sw + 1];
      const int take = min(hi - lo + 1 - done, len - pos);
      ApplyRotationRange(z, lda, row, hi - done, take, PairRotations{cs + pos});
      pos += take;
      done += take;
      if (done == hi - lo + 1) {
        ++sw;
        done = 0;
      }
    }
  }
}

// The register path stages whole sweeps: slot[r] = (c, s) of the rotation of register
// columns (r, r + 1), kRegMaxN slots per sweep, the identity (1, 0) outside the sweep, so
// that a sweep is applied by branch-free runs of kRotBlock columns (a runtime column index
// would put the row in local memory). The matrix's columns sit at the top of the row
// registers (column c in z[c + kRegMaxN - nt]), so that the sweeps, which mostly end at
// column nt - 2, end at the top of a run.
constexpr int kRotBlock = 4;
constexpr int kSweepChunk = 32;  // sweeps per staging round: 40 KB
// Sweeps applied together (RotateRowSweeps): the kernel waits on the FMA chain of each
// sweep; per batch of 7,050 blocks (H100, ncu) 2 sweeps 4.38 ms, 4: 4.03, 8: 4.78 (250
// registers).
constexpr int kSweepGroup = 4;

// The register path's shared memory after RotateSmemBytes: the sweep table (3 ints per
// sweep: offset in the log, lo and hi in register columns; QlSweepCap(nt) <= 8 kRegMaxN
// sweeps), then kSweepChunk slots of kRegMaxN pairs.
constexpr std::size_t kSweepTableBytes = (sizeof(int) * 3 * (8 * kRegMaxN + 1) + 15) / 16 * 16;

__host__ __device__ inline std::size_t RegRotateSmemBytes(const Layout& l) {
  return RotateSmemBytes(l) + kSweepTableBytes + sizeof(double2) * kSweepChunk * kRegMaxN;
}

// G consecutive sweeps on a row in registers, interleaved: run j applies sweep g to
// register columns 4j+3+2g..4j+2g (g = 0..G-1). Sweep g's rotation of (r, r+1) only needs
// the sweeps before it done on columns >= r - 1, and the rotations it passes touch
// columns below r: disjoint, so nothing that matters changes order, and a run carries G
// independent FMA chains instead of one. table: (offset, lo, hi) of each sweep.
template <int G>
__device__ __forceinline__ void RotateRowSweeps(double (&z)[kRegMaxN], const int* table,
                                                const double2* slots) {
  constexpr int kB = kRotBlock, kLag = 2;
  int lo[G], hi[G];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    lo[g] = table[3 * g + 1];
    hi[g] = table[3 * g + 2];
  }
#pragma unroll
  for (int b = (kRegMaxN - 2) / kB; b >= -(kLag * (G - 1) + kB - 1) / kB; --b) {
    bool above = true, below = true;  // the run misses every sweep: above, or below (stop)
#pragma unroll
    for (int g = 0; g < G; ++g) {
      above = above && b * kB + kLag * g > hi[g];
      below = below && b * kB + kB - 1 + kLag * g < lo[g];
    }
    if (above) continue;
    if (below) break;
#pragma unroll
    for (int j = kB - 1; j >= 0; --j) {
#pragma unroll
      for (int g = 0; g < G; ++g) {
        const int r = b * kB + j + kLag * g;
        if (r >= 0 && r <= kRegMaxN - 2) {
          const double2 cs = slots[g * kRegMaxN + r];
          const double zi = z[r], f = z[r + 1];
          z[r + 1] = fma(cs.x, f, cs.y * zi);
          z[r] = fma(-cs.y, f, cs.x * zi);
        }
      }
    }
  }
}

// ApplyLogStaged for a row in registers (threadIdx.x >= n: no row, barriers only).
// table: kSweepTableBytes of shared memory, slots: kSweepChunk * kRegMaxN pairs.
__device__ void ApplyLogToRow(const RunArgs& a, int64_t blk, int sweeps, double (&z)[kRegMaxN],
                              int* table, double2* slots) {
  const int n = a.dims.nwavetot, rcap = QlRotationCap(n), scap = QlSweepCap(n);
  const int shift = kRegMaxN - n;
  const double* gc = a.ql.c + blk * rcap;
  const double* gs = a.ql.s + blk * rcap;
  const int* lohi = a.ql.sweeps + blk * 2 * scap;
  if (threadIdx.x < 32) {  // offsets = exclusive prefix sum of the sweep lengths
    const int lane = threadIdx.x;
    int carry = 0;
    for (int k0 = 0; k0 < sweeps; k0 += 32) {
      const int k = k0 + lane;
      const int lo = k < sweeps ? lohi[2 * k] : 0, hi = k < sweeps ? lohi[2 * k + 1] : -1;
      int len = hi - lo + 1;
      for (int off = 1; off < 32; off <<= 1) {
        const int t = __shfl_up_sync(0xffffffffu, len, off);
        if (lane >= off) len += t;
      }
      if (k < sweeps) {
        table[3 * k] = carry + len - (hi - lo + 1);
        table[3 * k + 1] = lo + shift;
        table[3 * k + 2] = hi + shift;
      }
      carry += __shfl_sync(0xffffffffu, len, 31);
    }
  }
  constexpr int kU = 4;  // staged pairs in flight per thread
  for (int k0 = 0; k0 < sweeps; k0 += kSweepChunk) {
    const int kc = min(kSweepChunk, sweeps - k0), count = kc * kRegMaxN;
    __syncthreads();  // the table written; the previous chunk consumed
    for (int i0 = threadIdx.x; i0 < count; i0 += kU * blockDim.x) {
      double2 v[kU];
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        const int idx = i0 + u * blockDim.x;
        const int* t = table + 3 * (k0 + idx / kRegMaxN);
        const int r = idx % kRegMaxN;
        v[u] = make_double2(1.0, 0.0);
        if (idx < count && r >= t[1] && r <= t[2]) {
          const int q = t[0] + (t[2] - r);
          v[u] = make_double2(gc[q], gs[q]);
        }
      }
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        if (i0 + u * static_cast<int>(blockDim.x) < count) slots[i0 + u * blockDim.x] = v[u];
      }
    }
    __syncthreads();
    if (static_cast<int>(threadIdx.x) >= n) continue;
    const int* t = table + 3 * k0;
    int k = 0;
    for (; k + kSweepGroup <= kc; k += kSweepGroup) {
      RotateRowSweeps<kSweepGroup>(z, t + 3 * k, slots + k * kRegMaxN);
    }
    for (; k < kc; ++k) RotateRowSweeps<1>(z, t + 3 * k, slots + k * kRegMaxN);
  }
}

// kRegRows: the rows of H in registers (nt <= kRegMaxN, kRegRotThreads threads), else in
// shared memory (kThreads threads, nt <= kThreads).
template <bool kRegRows>
__global__ void __launch_bounds__(kRegRows ? kRegRotThreads : kThreads) __maxnreg__(kRegRows ? 224 : 128)
    RotateKernel(RunArgs a) {
  extern __shared__ double smem[];
  const PlanDims& D = a.dims;
  const Layout L = MakeLayout(D.nwavetot);
  const int n = L.n, lda = L.lda;
  const RunEntry e = a.entries[blockIdx.x];
  const DevicePatch d = a.in.patches[e.patch];
  const int sp = blockIdx.y;  // core spectrum (0..nper-1)
  double* m = smem + L.a;
  double* dv = smem + L.d;
  double* ev = smem + L.e;
  double* x = smem + L.x;
  double* scr = smem + L.scratch;
  int* ctl = reinterpret_cast<int*>(smem + L.ctl);
  const int64_t blk = BlockIndex(D);
  int sweeps = a.slots.eig_info[blk];  // uniform over the thread block
  const double* h = SlotBlock(a, e);
  const double* xs = a.slots.x + static_cast<int64_t>(e.slot) * D.ld +
                     static_cast<int64_t>(d.core_row + sp) * n;
  const bool overflow = sweeps == kQlLogOverflow;
  const bool in_registers = kRegRows && !overflow;  // uniform over the thread block
  if (!in_registers) {
    for (int idx = threadIdx.x; idx < n * n; idx += blockDim.x) m[(idx / n) * lda + idx % n] = h[idx];
  }
  const double* dsrc = (overflow ? a.ql.d0 : a.ql.d) + blk * n;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    x[i] = xs[i];
    dv[i] = dsrc[i];
    if (overflow) ev[i] = a.ql.e0[blk * n + i];
  }
  const std::size_t staged = RotateSmemBytes(L) / sizeof(double) - 2 * kRotChunk;
  if constexpr (kRegRows) {
    if (in_registers) {
      const int row = threadIdx.x, shift = kRegMaxN - n;
      double z[kRegMaxN];  // H(row, c) in z[c + shift] (column-major: H(row, c) = h[c * n + row])
#pragma unroll
      for (int r = 0; r < kRegMaxN; ++r) z[r] = (row < n && r >= shift) ? h[(r - shift) * n + row] : 0.0;
      if (sweeps >= 0) {
        const std::size_t table = RotateSmemBytes(L) / sizeof(double);
        ApplyLogToRow(a, blk, sweeps, z, reinterpret_cast<int*>(smem + table),
                      reinterpret_cast<double2*>(smem + table + kSweepTableBytes / sizeof(double)));
      }
      if (row < n) {
#pragma unroll
        for (int r = 0; r < kRegMaxN; ++r) {
          if (r >= shift) m[(r - shift) * lda + row] = z[r];
        }
      }
    }
  }
  __syncthreads();
  if (overflow) {
    BlockTeam team{smem + L.red};
    sweeps = TridiagonalQl(team, dv, ev, m, lda, n, scr, scr + 2 * n, ctl);
    if (threadIdx.x == 0) a.slots.eig_info[blk] = sweeps < 0 ? -1 : kQlLogOverflow;
  } else if (!in_registers && sweeps >= 0) {
    ApplyLogStaged(a, blk, sweeps, m, lda, reinterpret_cast<double2*>(smem + staged));
  }
  __syncthreads();  // eigenvectors complete; the scratch is free again

  const EigenView V{m, 1, lda};  // eigenvectors in the columns of m
  WriteDecorrelated(a, e, d, sp, V, dv, x,
                    ProductScratch{scr, scr + n, scr + 2 * n, scr + 3 * n, scr + 4 * n},
                    sweeps < 0);
}

}  // namespace

bool TridiagStoresReflectors(int nt, bool use_registers, bool twisted, bool compact) {
  return compact && use_registers && !TridiagNeedsRotationLog(nt, twisted);
}

cudaError_t LaunchTridiagReduce(const RunArgs& args, bool use_registers, bool compact,
                                cudaStream_t stream) {
  if (args.count == 0) return cudaSuccess;
  const dim3 grid(static_cast<unsigned>(args.count), static_cast<unsigned>(args.dims.nper));
  if (args.dims.nwavetot <= kRegMaxN && use_registers) {
    const std::size_t smem = RegSharedBytes(args.dims.nwavetot);
    const auto kernel = compact ? RegisterReduceKernel<true> : RegisterReduceKernel<false>;
    cudaError_t err = PrepareSmem(kernel, smem);
    if (err != cudaSuccess) return err;
    kernel<<<grid, kRegThreads, smem, stream>>>(args);
    return SPEXD_CHECK_LAUNCH(stream);
  }
  if (compact) return cudaErrorInvalidValue;  // only the register kernel stores them
  const std::size_t smem = MakeLayout(args.dims.nwavetot).bytes;
  cudaError_t err = PrepareSmem(ReduceKernel, smem);
  if (err != cudaSuccess) return err;
  ReduceKernel<<<grid, kReduceThreads, smem, stream>>>(args);
  return SPEXD_CHECK_LAUNCH(stream);
}

bool TridiagNeedsRotationLog(int nt, bool twisted) { return !(twisted && nt <= kRegMaxN); }

cudaError_t LaunchTridiagRotate(const RunArgs& args, bool use_registers, bool twisted,
                                bool compact, cudaStream_t stream) {
  if (args.count == 0) return cudaSuccess;
  const bool reg = args.dims.nwavetot <= kRegMaxN && use_registers;
  const Layout layout = MakeLayout(args.dims.nwavetot);
  if (!TridiagNeedsRotationLog(args.dims.nwavetot, twisted)) {
    return LaunchTwistedVectors(args, compact, stream);
  }
  if (compact) return cudaErrorInvalidValue;  // the rotations need H
  const std::size_t rsmem = reg ? RegRotateSmemBytes(layout) : RotateSmemBytes(layout);
  const std::size_t qsmem = QlSmemBytes(args.dims.nwavetot);
  cudaError_t err = reg ? PrepareSmem(RotateKernel<true>, rsmem) : PrepareSmem(RotateKernel<false>, rsmem);
  if (err == cudaSuccess) err = PrepareSmem(QlKernel<true>, qsmem);
  if (err != cudaSuccess) return err;
  const dim3 grid(static_cast<unsigned>(args.count), static_cast<unsigned>(args.dims.nper));
  const int64_t blocks = static_cast<int64_t>(args.count) * args.dims.nper;
  QlKernel<true><<<CeilDiv(blocks, kQlThreads), kQlThreads, qsmem, stream>>>(args, blocks);
  if ((err = SPEXD_CHECK_LAUNCH(stream)) != cudaSuccess) return err;
  if (reg) {
    RotateKernel<true><<<grid, kRegRotThreads, rsmem, stream>>>(args);
  } else {
    RotateKernel<false><<<grid, kThreads, rsmem, stream>>>(args);
  }
  return SPEXD_CHECK_LAUNCH(stream);
}

}  // namespace spexd::cuda
