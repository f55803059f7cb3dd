// Sparse weighted normal equations and the per-run bookkeeping kernels
// (extraction-spec §2.7–2.9).
#include "cuda/normal_equations.h"

#include "core/patch_numerics.h"
#include "cuda/kernel_common.cuh"
#include "cuda/launch_check.h"

namespace spexd::cuda {
namespace {

constexpr int kBuildWarps = 16;  // columns per block of the normal-equation kernel
constexpr int kReduceThreads = 256;

__global__ void ResetSlotFlagsKernel(RunArgs a) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= a.count) return;
  const int slot = a.entries[i].slot;
  a.slots.status[slot] = 0;
  a.slots.mflags[slot] = 0;
}

// One warp per column l of one patch (blockIdx.x = run entry). The warp stages
// w_l = ivar * A[:, l] over the window pixels under stamp l in shared memory; then, 32
// rows q >= l at a time, the lanes test which stamps overlap stamp l (stamps are 11x17 and
// only overlap their neighbours: the whole sparsity of A^T N A, spec §6) and the warp
// computes each overlapping M[q, l] = sum_p w_l[p] A[p, q] together, lanes over pixels
// (coalesced stamp reads), reduced with shuffles. Pixels outside the trimmed window carry
// w = 0, so dropped stamp rows (spec §2.7) drop out. Rows without overlap get 0.
__global__ void BuildNormalEquationsKernel(RunArgs a) {
  extern __shared__ double smem[];
  const PlanDims& D = a.dims;
  const RunEntry e = a.entries[blockIdx.x];
  const DevicePatch d = a.in.patches[e.patch];
  const int n = d.n;
  const int col0 = static_cast<int>(blockIdx.y) * kBuildWarps;
  if (col0 >= n) return;  // block-uniform
  const int sny = D.stamp_ny, snx = D.stamp_nx, npx = sny * snx;
  double* s_wa = smem;                                           // [kBuildWarps][npx]
  int* s_oy = reinterpret_cast<int*>(smem + kBuildWarps * npx);  // [ld]
  int* s_ox = s_oy + D.ld;
  int* s_sid = s_ox + D.ld;
  int* s_piy = s_sid + D.ld;  // [npx] stamp row of pixel pp
  int* s_pix = s_piy + npx;   // [npx] stamp column of pixel pp
  for (int q = threadIdx.x; q < n; q += blockDim.x) {
    const int64_t idx = StampIndex(D, d, q);
    s_oy[q] = a.in.yc[idx] - d.y0;
    s_ox[q] = a.in.xc[idx] - d.x0;
    s_sid[q] = static_cast<int>(idx);
  }
  for (int pp = threadIdx.x; pp < npx; pp += blockDim.x) {
    s_piy[pp] = pp / snx;
    s_pix[pp] = pp % snx;
  }
  __syncthreads();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int l = col0 + warp;
  if (l >= n) return;  // no block barrier below
  double* wa = s_wa + warp * npx;
  const int oyl = s_oy[l], oxl = s_ox[l];
  const double* stl = a.in.spots + static_cast<int64_t>(s_sid[l]) * npx;
  double fsum = 0.0, bsum = 0.0;
  for (int pp = lane; pp < npx; pp += 32) {
    const int r = oyl + s_piy[pp], c = oxl + s_pix[pp];
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
  for (int base = l; base < n; base += 32) {
    const int q = base + lane;
    int dy = 0, dx = 0;
    bool overlap = false;
    if (q < n) {
      dy = s_oy[q] - oyl;
      dx = s_ox[q] - oxl;
      overlap = core::StampsOverlap(dy, dx, sny, snx);
    }
    unsigned pending = __ballot_sync(0xffffffffu, overlap);
    double mine = 0.0;
    while (pending != 0u) {
      const int src = __ffs(pending) - 1;
      pending &= pending - 1u;
      const int ody = __shfl_sync(0xffffffffu, dy, src);
      const int odx = __shfl_sync(0xffffffffu, dx, src);
      const double* stq = a.in.spots + static_cast<int64_t>(s_sid[base + src]) * npx;
      double v = 0.0;
      for (int pp = lane; pp < npx; pp += 32) {
        const int qy = s_piy[pp] - ody, qx = s_pix[pp] - odx;
        if (static_cast<unsigned>(qy) < static_cast<unsigned>(sny) &&
            static_cast<unsigned>(qx) < static_cast<unsigned>(snx)) {
          v += wa[pp] * stq[qy * snx + qx];
        }
      }
      v = WarpSum(v);
      if (lane == src) mine = v;
    }
    if (q < n) mcol[q] = mine;
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

__global__ void CheckSolveKernel(RunArgs a) {
  const PlanDims& D = a.dims;
  const RunEntry e = a.entries[blockIdx.x];
  const int n = a.in.patches[e.patch].n;
  const double* x = a.slots.x + static_cast<int64_t>(e.slot) * D.ld;
  int bad = 0;
  for (int q = threadIdx.x; q < n; q += blockDim.x) bad |= !isfinite(x[q]);
  bad = __syncthreads_or(bad);
  if (threadIdx.x == 0) {
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
      sizeof(double) * kBuildWarps * npx + sizeof(int) * (3 * args.dims.ld + 2 * npx);
  if (smem > 48 * 1024) {
    cudaError_t err = cudaFuncSetAttribute(BuildNormalEquationsKernel,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(smem));
    if (err != cudaSuccess) return err;
  }
  const dim3 grid(static_cast<unsigned>(args.count), CeilDiv(args.dims.ld, kBuildWarps));
  BuildNormalEquationsKernel<<<grid, 32 * kBuildWarps, smem, stream>>>(args);
  return SPEXD_CHECK_LAUNCH(stream);
}

cudaError_t LaunchRegularize(const RunArgs& args, cudaStream_t stream) {
  if (args.count == 0) return cudaSuccess;
  RegularizeKernel<<<static_cast<unsigned>(args.count), kReduceThreads, 0, stream>>>(args);
  return SPEXD_CHECK_LAUNCH(stream);
}

cudaError_t LaunchCheckSolve(const RunArgs& args, cudaStream_t stream) {
  if (args.count == 0) return cudaSuccess;
  CheckSolveKernel<<<static_cast<unsigned>(args.count), 256, 0, stream>>>(args);
  return SPEXD_CHECK_LAUNCH(stream);
}

cudaError_t LaunchWiden(const float* src, double* dst, std::size_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  WidenKernel<<<CeilDiv(static_cast<long long>(n), 256), 256, 0, stream>>>(src, dst, n);
  return SPEXD_CHECK_LAUNCH(stream);
}

}  // namespace spexd::cuda
