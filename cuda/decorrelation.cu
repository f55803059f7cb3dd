// Q = C_ss^{-1/2} and the per-spectrum products (extraction-spec §2.10–2.11). One thread
// block per (patch, core spectrum): the 74x74 block, its eigenvectors and Q live in
// shared memory. The eigenvectors come from cusolverDnXsyevBatched or from the
// shared-memory Jacobi solver below (the default is cuda/tridiag_decorrelation.cu,
// faster than both, docs/performance.md).
#include "cuda/decorrelation.h"
#include "cuda/decorrelation_products.cuh"
#include "cuda/jacobi_math.h"
#include "cuda/kernel_common.cuh"
#include "cuda/launch_check.h"

namespace spexd::cuda {
namespace {

constexpr int kDecorrThreads = 384;

// Shared-memory layout of one block. The Jacobi matrix is padded to an even order m
// (a dummy index that never rotates) with row stride m + 1 (conflict-free columns).
struct DecorrSmem {
  double* a;   // [m][ldp] matrix, later Q
  double* v;   // [m][ldp] eigenvectors (columns)
  double* x;   // [nt] solution segment of this spectrum
  double* g;   // [m] eigenvalues, then 1/sqrt(eigenvalue)
  double* r;   // [nt] row sums
  double* fl;  // [nt] flux
  double* iv;  // [nt] ivar
  double* pc;  // [np] rotation cosines
  double* ps;  // [np] rotation sines
  int* pp;     // [np]
  int* pq;     // [np]
  int* tab;    // [nblk] lower block-triangle pairs, k1 << 16 | k2
};

struct DecorrShape {
  int nt, m, ldp, np, nblk;
};

__host__ __device__ inline DecorrShape MakeShape(int nt) {
  DecorrShape sh;
  sh.nt = nt;
  sh.m = nt + (nt & 1);
  sh.ldp = sh.m + 1;
  sh.np = sh.m / 2;
  sh.nblk = sh.np * (sh.np + 1) / 2;
  return sh;
}

__host__ __device__ inline std::size_t DecorrSmemBytes(int nt) {
  const DecorrShape sh = MakeShape(nt);
  return sizeof(double) * (2 * sh.m * sh.ldp + 4 * nt + sh.m + 2 * sh.np) +
         sizeof(int) * (2 * sh.np + sh.nblk);
}

__device__ DecorrSmem CarveSmem(double* base, const DecorrShape& sh) {
  DecorrSmem s;
  s.a = base;
  s.v = s.a + sh.m * sh.ldp;
  s.x = s.v + sh.m * sh.ldp;
  s.g = s.x + sh.nt;
  s.r = s.g + sh.m;
  s.fl = s.r + sh.nt;
  s.iv = s.fl + sh.nt;
  s.pc = s.iv + sh.nt;
  s.ps = s.pc + sh.np;
  s.pp = reinterpret_cast<int*>(s.ps + sh.np);
  s.pq = s.pp + sh.np;
  s.tab = s.pq + sh.np;
  return s;
}

// Parallel cyclic Jacobi on the symmetric matrix in s.a (eigenvectors accumulated in s.v,
// which must hold the identity). Each round: phase 0 computes the rotations of the
// disjoint round-robin pairs (and reduces "any rotation" with __syncthreads_or, which is
// also the barrier); phase 1 applies J^T A J block by block (RotateBlock: one thread per
// 2x2 block of the lower block triangle, mirrored, so A stays exactly symmetric) and
// V J, one warp per pair. Stops after the first sweep without a rotation.
__device__ int JacobiEigen(const DecorrSmem& s, const DecorrShape& sh) {
  const int ldp = sh.ldp, nt = sh.nt, m = sh.m, np = sh.np;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, nwarps = blockDim.x / 32;
  if (threadIdx.x == 0) {
    double dmax = 0.0;
    for (int i = 0; i < nt; ++i) dmax = fmax(dmax, fabs(s.a[i * ldp + i]));
    s.g[0] = dmax;  // temporary: g is rewritten after the sweeps
  }
  __syncthreads();
  const double abs_tol = kJacobiAbsTol * s.g[0];
  int sweep = 0;
  for (; sweep < kJacobiMaxSweeps; ++sweep) {
    int rotated = 0;
    for (int round = 0; round < m - 1; ++round) {
      int mine = 0;
      for (int k = threadIdx.x; k < np; k += blockDim.x) {
        int p, q;
        RoundRobinPair(round, k, m, &p, &q);
        double c = 1.0, sn = 0.0;
        if (q < nt &&
            JacobiRotation(s.a[p * ldp + p], s.a[q * ldp + q], s.a[q * ldp + p], abs_tol, &c, &sn)) {
          mine = 1;
        }
        s.pp[k] = p;
        s.pq[k] = q;
        s.pc[k] = c;
        s.ps[k] = sn;
      }
      rotated |= __syncthreads_or(mine);
      for (int b = threadIdx.x; b < sh.nblk; b += blockDim.x) {
        const int k1 = s.tab[b] >> 16, k2 = s.tab[b] & 0xffff;
        const double s1 = s.ps[k1], s2 = s.ps[k2];
        if (s1 == 0.0 && s2 == 0.0) continue;
        const double c1 = s.pc[k1], c2 = s.pc[k2];
        const int p1 = s.pp[k1], q1 = s.pq[k1], p2 = s.pp[k2], q2 = s.pq[k2];
        double pp = s.a[p1 * ldp + p2], pq = s.a[p1 * ldp + q2];
        double qp = s.a[q1 * ldp + p2], qq = s.a[q1 * ldp + q2];
        RotateBlock(c1, s1, c2, s2, &pp, &pq, &qp, &qq);
        if (k1 == k2) {  // diagonal block: the rotated pair's own off-diagonal is zero
          s.a[p1 * ldp + p1] = pp;
          s.a[q1 * ldp + q1] = qq;
          s.a[p1 * ldp + q1] = 0.0;
          s.a[q1 * ldp + p1] = 0.0;
        } else {
          s.a[p1 * ldp + p2] = pp;
          s.a[p1 * ldp + q2] = pq;
          s.a[q1 * ldp + p2] = qp;
          s.a[q1 * ldp + q2] = qq;
          s.a[p2 * ldp + p1] = pp;
          s.a[q2 * ldp + p1] = pq;
          s.a[p2 * ldp + q1] = qp;
          s.a[q2 * ldp + q1] = qq;
        }
      }
      for (int k = warp; k < np; k += nwarps) {
        const double sn = s.ps[k];
        if (sn == 0.0) continue;
        const double c = s.pc[k];
        const int p = s.pp[k], q = s.pq[k];
        for (int i = lane; i < m; i += 32) RotatePair(c, sn, &s.v[i * ldp + p], &s.v[i * ldp + q]);
      }
      __syncthreads();
    }
    if (!rotated) break;  // block-uniform: every thread got the same reductions
  }
  return sweep;
}

__global__ void DecorrelateKernel(RunArgs a, int from_eigenvectors) {
  extern __shared__ double smem[];
  const PlanDims& D = a.dims;
  const DecorrShape sh = MakeShape(D.nwavetot);
  const int nt = sh.nt, ldp = sh.ldp, m = sh.m;
  const RunEntry e = a.entries[blockIdx.x];
  const DevicePatch d = a.in.patches[e.patch];
  const int sp = blockIdx.y;  // core spectrum (0..nper-1)
  const int s_loc = d.core_row + sp;
  const DecorrSmem s = CarveSmem(smem, sh);
  const int64_t blk = (static_cast<int64_t>(e.slot) * D.nper + sp) * nt * nt;
  const double* cin = a.slots.c + blk;
  for (int b = threadIdx.x; b < sh.nblk; b += blockDim.x) {
    int k1, k2;
    LowerBlockPair(b, &k1, &k2);
    s.tab[b] = (k1 << 16) | k2;
  }
  for (int i = nt + threadIdx.x; i < m; i += blockDim.x) {  // dummy index of an odd order
    for (int j = 0; j < m; ++j) {
      s.a[i * ldp + j] = s.a[j * ldp + i] = 0.0;
      s.v[i * ldp + j] = s.v[j * ldp + i] = i == j ? 1.0 : 0.0;
    }
  }
  for (int idx = threadIdx.x; idx < nt * nt; idx += blockDim.x) {
    const int r = idx % nt, c = idx / nt;  // column-major element (r, c)
    if (from_eigenvectors) {
      s.v[r * ldp + c] = cin[idx];
    } else {
      if (r >= c) {  // lower triangle, mirrored (the CPU's dsyrk/dsyevd use "L" too)
        const double v = cin[idx];
        s.a[r * ldp + c] = v;
        s.a[c * ldp + r] = v;
      }
      s.v[r * ldp + c] = r == c ? 1.0 : 0.0;
    }
  }
  const double* xs = a.slots.x + static_cast<int64_t>(e.slot) * D.ld + static_cast<int64_t>(s_loc) * nt;
  for (int i = threadIdx.x; i < nt; i += blockDim.x) {
    s.x[i] = xs[i];
    if (from_eigenvectors) s.g[i] = a.slots.evals[(static_cast<int64_t>(e.slot) * D.nper + sp) * nt + i];
  }
  __syncthreads();
  if (!from_eigenvectors) {
    const int sweeps = JacobiEigen(s, sh);
    if (threadIdx.x == 0) a.slots.eig_info[static_cast<int64_t>(blockIdx.x) * D.nper + sp] = sweeps;
    for (int i = threadIdx.x; i < nt; i += blockDim.x) s.g[i] = s.a[i * ldp + i];
    __syncthreads();
  }
  // Jacobi leaves V row-major in s.v; the library path was loaded the same way. Q is
  // never formed, so s.a's first row and pc/ps (m >= nt doubles) serve as scratch.
  const EigenView V{s.v, ldp, 1};
  const bool failed = from_eigenvectors &&
                      a.slots.eig_info[static_cast<int64_t>(blockIdx.x) * D.nper + sp] != 0;
  WriteDecorrelated(a, e, d, sp, V, s.g, s.x, ProductScratch{s.pc, s.a, s.r, s.fl, s.iv}, failed);
}

}  // namespace

cudaError_t LaunchDecorrelate(const RunArgs& args, int from_eigenvectors, cudaStream_t stream) {
  if (args.count == 0) return cudaSuccess;
  const std::size_t smem = DecorrSmemBytes(args.dims.nwavetot);
  if (smem > 48 * 1024) {
    cudaError_t err = cudaFuncSetAttribute(DecorrelateKernel,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(smem));
    if (err != cudaSuccess) return err;
  }
  const dim3 grid(static_cast<unsigned>(args.count), static_cast<unsigned>(args.dims.nper));
  DecorrelateKernel<<<grid, kDecorrThreads, smem, stream>>>(args, from_eigenvectors);
  return SPEXD_CHECK_LAUNCH(stream);
}

}  // namespace spexd::cuda
