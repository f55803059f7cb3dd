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
//     The rows are rotated in shared memory.
//     A block whose log overflowed runs TridiagonalQl here instead.
// Only one nt x nt matrix lives in shared memory, so four blocks fit on an SM.
// For nt <= 80 twisted_decorrelation.cu's kernels replace 2 and 3.
#include "cuda/kernels/decorrelation.h"

#include <cuda_pipeline.h>

#include <algorithm>
#include <cstdlib>

#include "cuda/kernels/decorrelation_products.cuh"
#include "cuda/kernels/kernel_common.cuh"
#include "cuda/kernels/launch_check.h"
#include "cuda/kernels/register_tridiag.cuh"
#include "cuda/kernels/tridiag_kernel_common.cuh"
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

// The same reduction with the matrix in registers (cuda/kernels/register_tridiag.cuh), nt <= 80,
// leaving the reflectors in compact WY form over C (StoreCompactReflectors) for the twisted
// kernel instead of forming H. Three blocks per SM: 80 registers per thread and 72 bytes of
// spills, 3.49 ms per batch of 1,410 r-frame patches against 3.81 ms at two blocks per SM
// (126 registers, no spills) and 5.77 ms for ReduceKernel (H100, ncu).
__global__ void __launch_bounds__(kRegThreads, 3) RegisterReduceKernel(RunArgs a) {
  extern __shared__ double smem[];
  const PlanDims& D = a.dims;
  const int n = D.nwavetot;
  const RunEntry e = a.entries[blockIdx.x];
  const RegShared sh = MakeRegShared(smem, n);
  double* c = SlotBlock(a, e);
  RegTile g;
  RegisterTridiagonalize(c, n, sh, g);
  StoreCompactReflectors(n, sh, c);
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

// The rows of H in shared memory (kThreads threads, kRegMaxN < nt <= kThreads).
__global__ void __maxnreg__(128) RotateKernel(RunArgs a) {
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
  for (int idx = threadIdx.x; idx < n * n; idx += blockDim.x) m[(idx / n) * lda + idx % n] = h[idx];
  const double* dsrc = (overflow ? a.ql.d0 : a.ql.d) + blk * n;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    x[i] = xs[i];
    dv[i] = dsrc[i];
    if (overflow) ev[i] = a.ql.e0[blk * n + i];
  }
  const std::size_t staged = RotateSmemBytes(L) / sizeof(double) - 2 * kRotChunk;
  __syncthreads();
  if (overflow) {
    BlockTeam team{smem + L.red};
    sweeps = TridiagonalQl(team, dv, ev, m, lda, n, scr, scr + 2 * n, ctl);
    if (threadIdx.x == 0) a.slots.eig_info[blk] = sweeps < 0 ? -1 : kQlLogOverflow;
  } else if (sweeps >= 0) {
    ApplyLogStaged(a, blk, sweeps, m, lda, reinterpret_cast<double2*>(smem + staged));
  }
  __syncthreads();  // eigenvectors complete; the scratch is free again

  const EigenView V{m, 1, lda};  // eigenvectors in the columns of m
  WriteDecorrelated(a, e, d, sp, V, dv, x,
                    ProductScratch{scr, scr + n, scr + 2 * n, scr + 3 * n, scr + 4 * n},
                    sweeps < 0);
}

}  // namespace

// nt <= kRegMaxN: the register reduction storing its reflectors in compact WY form, and
// the twisted vectors; larger blocks: the shared-memory reduction forming H, QL with logged
// rotations, and the rotations applied to H in shared memory.
cudaError_t LaunchTridiagReduce(const RunArgs& args, cudaStream_t stream) {
  if (args.count == 0) return cudaSuccess;
  const dim3 grid(static_cast<unsigned>(args.count), static_cast<unsigned>(args.dims.nper));
  if (args.dims.nwavetot <= kRegMaxN) {
    const std::size_t smem = RegSharedBytes(args.dims.nwavetot);
    cudaError_t err = PrepareSmem(RegisterReduceKernel, smem);
    if (err != cudaSuccess) return err;
    RegisterReduceKernel<<<grid, kRegThreads, smem, stream>>>(args);
    return SPEXD_CHECK_LAUNCH(stream);
  }
  const std::size_t smem = MakeLayout(args.dims.nwavetot).bytes;
  cudaError_t err = PrepareSmem(ReduceKernel, smem);
  if (err != cudaSuccess) return err;
  ReduceKernel<<<grid, kReduceThreads, smem, stream>>>(args);
  return SPEXD_CHECK_LAUNCH(stream);
}

bool TridiagNeedsRotationLog(int nt) { return nt > kRegMaxN; }

std::size_t DecorrelationSharedBytes(int nt) {
  if (!TridiagNeedsRotationLog(nt)) {
    return std::max({RegSharedBytes(nt), TwistedVectorsSharedBytes(nt), QlSmemBytes(nt)});
  }
  const Layout layout = MakeLayout(nt);
  return std::max({layout.bytes, RotateSmemBytes(layout), QlSmemBytes(nt)});
}

cudaError_t LaunchTridiagRotate(const RunArgs& args, cudaStream_t stream) {
  if (args.count == 0) return cudaSuccess;
  if (!TridiagNeedsRotationLog(args.dims.nwavetot)) return LaunchTwistedVectors(args, stream);
  const Layout layout = MakeLayout(args.dims.nwavetot);
  const std::size_t rsmem = RotateSmemBytes(layout);
  const std::size_t qsmem = QlSmemBytes(args.dims.nwavetot);
  cudaError_t err = PrepareSmem(RotateKernel, rsmem);
  if (err == cudaSuccess) err = PrepareSmem(QlKernel<true>, qsmem);
  if (err != cudaSuccess) return err;
  const dim3 grid(static_cast<unsigned>(args.count), static_cast<unsigned>(args.dims.nper));
  const int64_t blocks = static_cast<int64_t>(args.count) * args.dims.nper;
  QlKernel<true><<<CeilDiv(blocks, kQlThreads), kQlThreads, qsmem, stream>>>(args, blocks);
  if ((err = SPEXD_CHECK_LAUNCH(stream)) != cudaSuccess) return err;
  RotateKernel<<<grid, kThreads, rsmem, stream>>>(args);
  return SPEXD_CHECK_LAUNCH(stream);
}

}  // namespace spexd::cuda
