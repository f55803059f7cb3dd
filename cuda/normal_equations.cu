// Sparse weighted normal equations and the per-run bookkeeping kernels
// (extraction-spec §2.7–2.9).
#include "cuda/normal_equations.h"

#include "core/numerics/patch_numerics.h"
#include "cuda/kernel_common.cuh"
#include "cuda/launch_check.h"

namespace spexd::cuda {
namespace {

// Columns per block of the normal-equation kernel; __launch_bounds__ holds it to 40
// registers, so 6 blocks of 8 warps fit an SM (measured on the H100: 4.48 ms per batch of
// 1,410 patches against 4.88 ms at 48 registers and 5 blocks).
constexpr int kBuildWarps = 8;
constexpr int kReduceThreads = 256;

__global__ void ResetSlotFlagsKernel(RunArgs a) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= a.count) return;
  const int slot = a.entries[i].slot;
  a.slots.status[slot] = 0;
  a.slots.mflags[slot] = 0;
}

// M[q, l] restricted to the pixels where stamp q (corner dy, dx from stamp l's) overlaps
// stamp l: the rows [lo, hi) of stamp l's pixel order and its columns [c0, c1). Lane
// `lane` takes the pixels pp = lane (mod 32) of that range in increasing order, the same
// terms in the same order as a walk over all of stamp l with a per-pixel bounds test (the
// terms it skips are the ones that test drops), so the lane sums are unchanged. Pixel pp
// of stamp l is pixel pp - (dy * snx + dx) of stamp q.
__device__ __forceinline__ double OverlapPartial(const double* wa, const int* s_pix,
                                                 const double* stq, int dy, int dx, int sny,
                                                 int snx, int lane) {
  const int lo = max(dy, 0) * snx, hi = min(sny, sny + dy) * snx;
  const int c0 = max(dx, 0), c1 = min(snx, snx + dx);
  const int off = dy * snx + dx;
  double v = 0.0;
#pragma unroll 1  // 3-6 trips: an unrolled copy's remainder set-up costs more than it saves
  for (int pp = lo + ((lane - lo) & 31); pp < hi; pp += 32) {
    const int c = s_pix[pp];
    if (c >= c0 && c < c1) v += wa[pp] * stq[pp - off];
  }
  return v;
}

// The warp sums of two lane partials v0, v1 with WarpSum's addition tree: the first
// butterfly step (lanes i and i ^ 16) exchanges one of the two, so lanes 0-15 go on with
// pair 0 and lanes 16-31 with pair 1; each addition has the same two operands as in
// WarpSum (IEEE addition commutes), so each sum is bit-identical to WarpSum's. Returns
// pair 0's sum in lanes 0-15 and pair 1's in lanes 16-31.
__device__ __forceinline__ double WarpSumPair(double v0, double v1, int lane) {
  const bool upper = (lane & 16) != 0;
  double r = (upper ? v1 : v0) + __shfl_xor_sync(0xffffffffu, upper ? v0 : v1, 16);
  for (int off = 8; off > 0; off /= 2) r += __shfl_xor_sync(0xffffffffu, r, off);
  return r;
}

// One warp per column l of one patch. Blocks run tile-major (blockIdx.x = run entry *
// tiles + column tile): the blocks resident at a time then cover a few patches and share
// their stamps in L2 (hit rate 35 % -> 80 % on the H100). The warp stages
// w_l = ivar * A[:, l] over the window pixels under stamp l in shared memory; then, 32
// rows q >= l at a time, the lanes test which stamps overlap stamp l (stamps are 11x17 and
// only overlap their neighbours: the whole sparsity of A^T N A, spec §6) and the warp
// computes the overlapping M[q, l] = sum_p w_l[p] A[p, q] two at a time, lanes over the
// overlapping pixels (OverlapPartial), reduced with shuffles (WarpSumPair). Pixels outside
// the trimmed window carry w = 0, so dropped stamp rows (spec §2.7) drop out. Rows without
// overlap get 0; rows of spectra past the patch's coupled band (RunEntry::band, from the
// same overlap rule: core::CoupledBand) cannot overlap and are written as zeros unscanned.
__global__ void __launch_bounds__(32 * kBuildWarps, 6) BuildNormalEquationsKernel(RunArgs a) {
  extern __shared__ double smem[];
  const PlanDims& D = a.dims;
  const int tiles = (D.ld + kBuildWarps - 1) / kBuildWarps;
  const RunEntry e = a.entries[blockIdx.x / tiles];
  const DevicePatch d = a.in.patches[e.patch];
  const int n = d.n;
  const int col0 = static_cast<int>(blockIdx.x % tiles) * kBuildWarps;
  if (col0 >= n) return;  // block-uniform
  const int sny = D.stamp_ny, snx = D.stamp_nx, npx = sny * snx;
  // Rows any column of the block can couple to: up to the last column's spectrum + band.
  const int last = min(n, col0 + kBuildWarps) - 1;
  const int qblock = (core::BandLast(last / D.nwavetot, e.band, d.nspectot) + 1) * D.nwavetot;
  double* s_wa = smem;                                           // [kBuildWarps][npx]
  int* s_oy = reinterpret_cast<int*>(smem + kBuildWarps * npx);  // [ld]
  int* s_ox = s_oy + D.ld;
  int* s_sid = s_ox + D.ld;
  int* s_pix = s_sid + D.ld;  // [npx] stamp column of pixel pp
  for (int q = col0 + threadIdx.x; q < qblock; q += blockDim.x) {  // the rows read below
    const int64_t idx = StampIndex(D, d, q);
    s_oy[q] = a.in.yc[idx] - d.y0;
    s_ox[q] = a.in.xc[idx] - d.x0;
    s_sid[q] = static_cast<int>(idx);
  }
  for (int pp = threadIdx.x; pp < npx; pp += blockDim.x) s_pix[pp] = pp % snx;
  __syncthreads();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int l = col0 + warp;
  if (l >= n) return;  // no block barrier below
  double* wa = s_wa + warp * npx;
  const int oyl = s_oy[l], oxl = s_ox[l];
  const double* stl = a.in.spots + static_cast<int64_t>(s_sid[l]) * npx;
  double fsum = 0.0, bsum = 0.0;
  for (int pp = lane; pp < npx; pp += 32) {
    const int r = oyl + pp / snx, c = oxl + s_pix[pp];
    double va = 0.0;
    if (r >= 0 && r < d.ny && c >= 0 && c < d.nx) {
      const int64_t g = static_cast<int64_t>(d.y0 + r) * D.image_width + d.x0 + c;
      SPEXD_DEVICE_ASSERT(g >= 0 && g < static_cast<int64_t>(D.image_height) * D.image_width);
      va = a.in.ivar[g] * stl[pp];
      fsum += va;
      bsum += va * a.in.image[g];
    }
    wa[pp] = va;
  }
  __syncwarp();
  fsum = WarpSum(fsum);
  bsum = WarpSum(bsum);
  const int64_t vbase = static_cast<int64_t>(e.slot) * D.ld;
  if (lane == 0) {
    a.slots.fw[vbase + l] = fsum;
    a.slots.x[vbase + l] = bsum;
  }
  double* mcol = a.slots.m + static_cast<int64_t>(e.slot) * D.ld * D.ld +
                 static_cast<int64_t>(l) * D.ld;
  // Rows that can overlap: spectra l / nwavetot .. + band of the patch.
  const int qend = (core::BandLast(l / D.nwavetot, e.band, d.nspectot) + 1) * D.nwavetot;
  int base = l;
  for (; base < qend; base += 32) {
    const int q = base + lane;
    int dy = 0, dx = 0;
    bool overlap = false;
    if (q < qend) {
      dy = s_oy[q] - oyl;
      dx = s_ox[q] - oxl;
      overlap = core::StampsOverlap(dy, dx, sny, snx);
    }
    unsigned pending = __ballot_sync(0xffffffffu, overlap);
    double mine = 0.0;
    while (pending != 0u) {  // warp-uniform
      const int src0 = __ffs(pending) - 1;
      pending &= pending - 1u;
      const int src1 = pending != 0u ? __ffs(pending) - 1 : -1;
      if (src1 >= 0) pending &= pending - 1u;
      const double* st0 = a.in.spots + static_cast<int64_t>(s_sid[base + src0]) * npx;
      const double v0 = OverlapPartial(wa, s_pix, st0, __shfl_sync(0xffffffffu, dy, src0),
                                       __shfl_sync(0xffffffffu, dx, src0), sny, snx, lane);
      double v1 = 0.0;
      if (src1 >= 0) {  // warp-uniform
        const double* st1 = a.in.spots + static_cast<int64_t>(s_sid[base + src1]) * npx;
        v1 = OverlapPartial(wa, s_pix, st1, __shfl_sync(0xffffffffu, dy, src1),
                            __shfl_sync(0xffffffffu, dx, src1), sny, snx, lane);
      }
      const double sums = WarpSumPair(v0, v1, lane);
      const double got = __shfl_sync(0xffffffffu, sums, lane == src1 ? 16 : 0);
      if (lane == src0 || lane == src1) mine = got;
    }
    if (q < n) mcol[q] = mine;
  }
  for (; base < n; base += 32) {
    if (base + lane < n) mcol[base + lane] = 0.0;
  }
}

__device__ double BlockMax(double v, double* scratch) {
  scratch[threadIdx.x] = v;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) scratch[threadIdx.x] = fmax(scratch[threadIdx.x], scratch[threadIdx.x + s]);
    __syncthreads();
  }
  const double r = scratch[0];
  __syncthreads();
  return r;
}

// Bad-bin regularisation of every diagonal element (spec §2.8, §2.17; the rule is
// core::DiagonalRegularization, shared with the CPU backend).
__global__ void RegularizeKernel(RunArgs a) {
  __shared__ double scratch[kReduceThreads];
  const PlanDims& D = a.dims;
  const RunEntry e = a.entries[blockIdx.x];
  const int n = a.in.patches[e.patch].n;
  const double* fw = a.slots.fw + static_cast<int64_t>(e.slot) * D.ld;
  double local = 0.0;
  for (int q = threadIdx.x; q < n; q += blockDim.x) local = fmax(local, fw[q]);
  const double minweight = core::MinWeight(BlockMax(local, scratch));
  double* m = a.slots.m + static_cast<int64_t>(e.slot) * D.ld * D.ld;
  for (int q = threadIdx.x; q < n; q += blockDim.x) {
    m[static_cast<int64_t>(q) * D.ld + q] +=
        core::DiagonalRegularization(fw[q], minweight, e.regularize, D.compat_cpu);
  }
}

constexpr int kCheckThreads = 256;

// Flags a failed solve, and records the patch's condition estimate from the diagonal of
// the factor, which is still in place here (issue 23; the same rule as the CPU backend:
// core::CholeskyConditionEstimate): n more reads in a kernel that runs anyway, no sync.
__global__ void CheckSolveKernel(RunArgs a) {
  __shared__ double scratch[kCheckThreads];
  const PlanDims& D = a.dims;
  const RunEntry e = a.entries[blockIdx.x];
  const int n = a.in.patches[e.patch].n;
  const double* x = a.slots.x + static_cast<int64_t>(e.slot) * D.ld;
  const double* m = a.slots.m + static_cast<int64_t>(e.slot) * D.ld * D.ld;
  int bad = 0;
  double dmax = -INFINITY, neg_dmin = -INFINITY;
  for (int q = threadIdx.x; q < n; q += blockDim.x) {
    bad |= !isfinite(x[q]);
    const double d = m[static_cast<int64_t>(q) * D.ld + q];
    dmax = fmax(dmax, d);
    neg_dmin = fmax(neg_dmin, -d);
  }
  bad = __syncthreads_or(bad);
  dmax = BlockMax(dmax, scratch);
  neg_dmin = BlockMax(neg_dmin, scratch);
  if (threadIdx.x == 0) {
    a.slots.cond[e.slot] = core::CholeskyConditionEstimate(dmax, -neg_dmin);
    int flags = 0;
    if (a.slots.info[blockIdx.x] != 0) flags |= kStatusNotSpd;
    if (bad) flags |= kStatusSolveNonFinite;
    if (flags != 0) atomicOr(&a.slots.status[e.slot], flags);
  }
}

__global__ void WidenKernel(const float* src, double* dst, std::size_t n) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) dst[i] = static_cast<double>(src[i]);
}

__global__ void WidenColumnsKernel(const float* src, double* dst, int width, int x0, int ncols) {
  const int c = static_cast<int>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= ncols) return;
  const std::size_t i = static_cast<std::size_t>(blockIdx.y) * width + x0 + c;
  dst[i] = static_cast<double>(src[i]);
}

}  // namespace

cudaError_t LaunchResetSlotFlags(const RunArgs& args, cudaStream_t stream) {
  if (args.count == 0) return cudaSuccess;
  ResetSlotFlagsKernel<<<CeilDiv(args.count, 256), 256, 0, stream>>>(args);
  return SPEXD_CHECK_LAUNCH(stream);
}

cudaError_t LaunchBuildNormalEquations(const RunArgs& args, cudaStream_t stream) {
  if (args.count == 0) return cudaSuccess;
  const int npx = args.dims.stamp_ny * args.dims.stamp_nx;
  const std::size_t smem =
      sizeof(double) * kBuildWarps * npx + sizeof(int) * (3 * args.dims.ld + npx);
  if (smem > 48 * 1024) {
    cudaError_t err = cudaFuncSetAttribute(BuildNormalEquationsKernel,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(smem));
    if (err != cudaSuccess) return err;
  }
  const unsigned blocks = static_cast<unsigned>(args.count) * CeilDiv(args.dims.ld, kBuildWarps);
  BuildNormalEquationsKernel<<<blocks, 32 * kBuildWarps, smem, stream>>>(args);
  return SPEXD_CHECK_LAUNCH(stream);
}

cudaError_t LaunchRegularize(const RunArgs& args, cudaStream_t stream) {
  if (args.count == 0) return cudaSuccess;
  RegularizeKernel<<<static_cast<unsigned>(args.count), kReduceThreads, 0, stream>>>(args);
  return SPEXD_CHECK_LAUNCH(stream);
}

cudaError_t LaunchCheckSolve(const RunArgs& args, cudaStream_t stream) {
  if (args.count == 0) return cudaSuccess;
  CheckSolveKernel<<<static_cast<unsigned>(args.count), kCheckThreads, 0, stream>>>(args);
  return SPEXD_CHECK_LAUNCH(stream);
}

cudaError_t LaunchWidenColumns(const float* src, double* dst, int width, int height, int x0, int x1,
                               cudaStream_t stream) {
  if (x0 >= x1 || height <= 0) return cudaSuccess;
  const dim3 grid(CeilDiv(x1 - x0, 256), static_cast<unsigned>(height));
  WidenColumnsKernel<<<grid, 256, 0, stream>>>(src, dst, width, x0, x1 - x0);
  return SPEXD_CHECK_LAUNCH(stream);
}

cudaError_t LaunchWiden(const float* src, double* dst, std::size_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  WidenKernel<<<CeilDiv(static_cast<long long>(n), 256), 256, 0, stream>>>(src, dst, n);
  return SPEXD_CHECK_LAUNCH(stream);
}

}  // namespace spexd::cuda
