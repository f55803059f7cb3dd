// Sparse weighted normal equations and the per-run bookkeeping kernels
// (extraction-spec §2.7–2.9).
#include "cuda/kernels/normal_equations.h"

#include <algorithm>

#include "core/numerics/patch_numerics.h"
#include "cuda/kernels/batch_layout.h"
#include "cuda/kernels/kernel_common.cuh"
#include "cuda/kernels/launch_check.h"
#include "cuda/kernels/normal_equations_columns.cuh"

namespace spexd::cuda {
namespace {

// The normal-equation kernel's tiling (H100): 16 columns of M a
// block, 16 warps, an entry's overlap in units of 6 rows, and shared memory for ~25 row
// stamps at a time at the r frame's 11x17 stamps (72 KB), so that three blocks share an
// SM at 40 registers: 3.21 ms a batch against 3.54 at two blocks and 3.78 for the warp-per-
// column kernel it replaced, and the eigen stage beside it 2 ms shorter a frame.
constexpr int kTileCols = 16;
constexpr int kBuildWarps = 16;
constexpr int kBuildThreads = 32 * kBuildWarps;
constexpr int kMaxStagedStamps = 48;
constexpr int kUnitRows = 6;  // rows of an overlap summed by one thread
constexpr std::size_t kBuildSmemTarget = 72 * 1024;
constexpr int kReduceThreads = 256;

__global__ void ResetSlotFlagsKernel(RunArgs a) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= a.count) return;
  const int slot = a.entries[i].slot;
  a.slots.status[slot] = 0;
  a.slots.mflags[slot] = 0;
}

// sum over rows [0, nrows) and columns [c0, c1) of w[r * snx + c] * s[r * snx + c], as four
// partial sums (rows by pairs, columns by pairs) so that consecutive products do not wait on
// one another's multiply-add; the order is fixed, so are the bits.
__device__ __forceinline__ double RectangleSum(const double* w, const double* s, int nrows,
                                               int c0, int c1, int snx) {
  double v00 = 0.0, v01 = 0.0, v10 = 0.0, v11 = 0.0;
  int r = 0;
  for (; r + 1 < nrows; r += 2, w += 2 * snx, s += 2 * snx) {
    int c = c0;
    for (; c + 1 < c1; c += 2) {
      v00 += w[c] * s[c];
      v01 += w[c + 1] * s[c + 1];
      v10 += w[snx + c] * s[snx + c];
      v11 += w[snx + c + 1] * s[snx + c + 1];
    }
    if (c < c1) {
      v00 += w[c] * s[c];
      v10 += w[snx + c] * s[snx + c];
    }
  }
  if (r < nrows) {
    int c = c0;
    for (; c + 1 < c1; c += 2) {
      v00 += w[c] * s[c];
      v01 += w[c + 1] * s[c + 1];
    }
    if (c < c1) v00 += w[c] * s[c];
  }
  return (v00 + v01) + (v10 + v11);
}

// The normal equations M = A^T N A, b, fw (spec §2.7-2.8), an entry of M per overlapping
// stamp pair. A block takes kTileCols consecutive columns l of one patch (blocks run
// tile-major, blockIdx.x = run entry * tiles + column tile, so the blocks resident at a
// time share a few patches' stamps in L2). A warp stages w_l = ivar * A[:, l] over the
// window pixels under stamp l (pixels outside the trimmed window carry w = 0, so dropped
// stamp rows drop out, spec §2.7), sums fw and b for it, and zero-fills its column of M
// below the diagonal. Then the rows q whose stamps overlap a column of the tile (stamps
// only overlap their neighbours: the whole sparsity of A^T N A, spec §6) are staged in
// shared memory, up to `staged` stamps at a time; each overlapping pair (q >= l) is an
// entry M[q, l] = sum over the overlap rectangle of w_l[p] A[p, q], its rectangle cut in
// units of kUnitRows rows, each unit summed by one thread in a fixed order
// (RectangleSum), the units' partials then summed in unit order: the bits depend neither
// on which thread takes which unit nor on the order of the lists (built with shared
// atomics). The warp-per-column kernel this replaced (lanes over one overlap, a shuffle
// tree per entry) issued 2.47 G instructions a batch against 1.41 G: most of its lanes
// idled on the narrow overlaps of neighbouring fibres.
__global__ void __launch_bounds__(kBuildThreads, 3) BuildNormalEquationsKernel(RunArgs a,
                                                                              int staged) {
  extern __shared__ double smem[];
  __shared__ int s_nrows, s_nent, s_nunit;
  const PlanDims& D = a.dims;
  const int tiles = (D.ld + kTileCols - 1) / kTileCols;
  const RunEntry e = a.entries[blockIdx.x / tiles];
  const DevicePatch d = a.in.patches[e.patch];
  const int n = d.n;
  const int col0 = static_cast<int>(blockIdx.x % tiles) * kTileCols;
  if (col0 >= n) return;  // block-uniform
  const int sny = D.stamp_ny, snx = D.stamp_nx, npx = sny * snx;
  const int ncol = min(kTileCols, n - col0);
  // Rows any column of the tile can couple to: up to the last column's spectrum + band.
  const int qblock =
      (core::BandLast((col0 + ncol - 1) / D.nwavetot, e.band, d.nspectot) + 1) * D.nwavetot;
  const int nq = qblock - col0;  // rows [col0, qblock), indexed from col0 below
  double* s_wa = smem;                        // [kTileCols][npx]
  double* s_st = s_wa + kTileCols * npx;      // [staged][npx]
  const int maxu = (sny + kUnitRows - 1) / kUnitRows;  // units of one entry, at most
  const int maxent = staged * kTileCols;
  double* s_part = s_st + static_cast<std::size_t>(staged) * npx;  // [maxent][maxu]
  int* s_oy = reinterpret_cast<int*>(s_part + static_cast<std::size_t>(maxent) * maxu);
  int* s_ox = s_oy + D.ld;
  int* s_sid = s_ox + D.ld;
  int* s_rows = s_sid + D.ld;  // rows overlapping the tile, indices from col0
  int* s_ent = s_rows + D.ld;  // [maxent]: (staged row j, tile column t)
  int* s_unit = s_ent + maxent;  // [maxent * maxu]: entry << 8 | unit
  const int tid = static_cast<int>(threadIdx.x);
  for (int i = tid; i < nq; i += kBuildThreads) {
    const int64_t idx = StampIndex(D, d, col0 + i);
    s_oy[i] = a.in.yc[idx] - d.y0;
    s_ox[i] = a.in.xc[idx] - d.x0;
    s_sid[i] = static_cast<int>(idx);
  }
  if (tid == 0) s_nrows = 0;
  __syncthreads();
  const int warp = tid / 32, lane = tid % 32;
  const StampWalk walk = MakeStampWalk(snx, lane);
  for (int t = warp; t < ncol; t += kBuildWarps) {
    const int l = col0 + t;
    double* wa = s_wa + t * npx;
    const int oyl = s_oy[t], oxl = s_ox[t];
    const double* stl = a.in.spots + static_cast<int64_t>(s_sid[t]) * npx;
    double fsum, bsum;
    StampWeights(a, d, oyl, oxl, stl, walk, &fsum, &bsum,
                 [&](int pp, int, int, double va) { wa[pp] = va; });
    StoreColumnSums(a, e, l, lane, fsum, bsum);
    ZeroColumn(a, e, d, l, l / D.nwavetot, lane);
  }
  // The rows whose stamps overlap a column of the tile at or above them.
  for (int i = tid; i < nq; i += kBuildThreads) {
    bool any = false;
    for (int t = 0; t < ncol && t <= i; ++t) {
      any |= core::StampsOverlap(s_oy[i] - s_oy[t], s_ox[i] - s_ox[t], sny, snx);
    }
    if (any) s_rows[atomicAdd(&s_nrows, 1)] = i;
  }
  __syncthreads();  // the rows, the staged w_l and the zeroed columns are in place
  const int nrows = s_nrows;
  for (int j0 = 0; j0 < nrows; j0 += staged) {
    const int cnt = min(staged, nrows - j0);
    if (tid == 0) s_nent = s_nunit = 0;
    for (int j = warp; j < cnt; j += kBuildWarps) {  // a warp per stamp: no division
      const double* src = a.in.spots + static_cast<int64_t>(s_sid[s_rows[j0 + j]]) * npx;
      for (int pp = lane; pp < npx; pp += 32) s_st[j * npx + pp] = src[pp];
    }
    __syncthreads();
    // The entries (q >= l, overlapping), and each one's units of kUnitRows overlap rows.
    for (int idx = tid; idx < cnt * kTileCols; idx += kBuildThreads) {
      const int j = idx / kTileCols, t = idx % kTileCols;
      if (t >= ncol) continue;
      const int i = s_rows[j0 + j];
      // Rows past column t's coupled band cannot overlap it (core::CoupledBand's rule).
      const int qend =
          (core::BandLast((col0 + t) / D.nwavetot, e.band, d.nspectot) + 1) * D.nwavetot;
      const int dy = s_oy[i] - s_oy[t], dx = s_ox[i] - s_ox[t];
      if (i >= t && col0 + i < qend && core::StampsOverlap(dy, dx, sny, snx)) {
        const int ent = atomicAdd(&s_nent, 1);
        s_ent[ent] = j * kTileCols + t;
        const int nu = (min(sny, sny + dy) - max(dy, 0) + kUnitRows - 1) / kUnitRows;
        const int u0 = atomicAdd(&s_nunit, nu);
        for (int u = 0; u < nu; ++u) s_unit[u0 + u] = ent << 8 | u;  // maxu < 256 (launch)
      }
    }
    __syncthreads();
    // Each unit's partial sum, one thread each (units are at most kUnitRows x snx products,
    // so the threads' loads are even); stored by (entry, unit), not by who summed it.
    const int nunit = s_nunit;
    for (int k = tid; k < nunit; k += kBuildThreads) {
      const int ent = s_unit[k] >> 8, u = s_unit[k] & 255, eu = ent * maxu + u;
      const int j = s_ent[ent] / kTileCols, t = s_ent[ent] % kTileCols, i = s_rows[j0 + j];
      const int dy = s_oy[i] - s_oy[t], dx = s_ox[i] - s_ox[t];
      const int r0 = max(dy, 0) + u * kUnitRows, r1 = min(min(sny, sny + dy), r0 + kUnitRows);
      // Pixel pp of stamp l is pixel pp - (dy * snx + dx) of stamp q.
      s_part[eu] = RectangleSum(s_wa + t * npx + r0 * snx,
                                s_st + j * npx - (dy * snx + dx) + r0 * snx, r1 - r0,
                                max(dx, 0), min(snx, snx + dx), snx);
    }
    __syncthreads();
    // M[q, l]: the units' partials in unit order.
    const int nent = s_nent;
    for (int ent = tid; ent < nent; ent += kBuildThreads) {
      const int j = s_ent[ent] / kTileCols, t = s_ent[ent] % kTileCols, i = s_rows[j0 + j];
      const int dy = s_oy[i] - s_oy[t];
      const int nu = (min(sny, sny + dy) - max(dy, 0) + kUnitRows - 1) / kUnitRows;
      double v = s_part[ent * maxu];
      for (int u = 1; u < nu; ++u) v += s_part[ent * maxu + u];
      SlotMatrix(a, e.slot)[static_cast<int64_t>(col0 + t) * D.ld + col0 + i] = v;
    }
    __syncthreads();  // before the next chunk restages s_st and resets s_nent
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
// the factor (the same rule as the CPU backend: core::CholeskyConditionEstimate): n more
// reads in a kernel that runs anyway, no sync.
__global__ void CheckSolveKernel(RunArgs a) {
  __shared__ double scratch[kCheckThreads];
  const PlanDims& D = a.dims;
  const RunEntry e = a.entries[blockIdx.x];
  const int n = a.in.patches[e.patch].n;
  const double* x = a.slots.x + static_cast<int64_t>(e.slot) * D.ld;
  int bad = 0;
  double dmax = -INFINITY, neg_dmin = -INFINITY;
  for (int q = threadIdx.x; q < n; q += blockDim.x) {
    bad |= !isfinite(x[q]);
    // L's diagonal, in ldiag (the leaves overwrote M's).
    const double d = a.slots.ldiag[static_cast<int64_t>(e.slot) * D.ld + q];
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
  const std::size_t stamp = sizeof(double) * args.dims.stamp_ny * args.dims.stamp_nx;
  const std::size_t maxu = (args.dims.stamp_ny + kUnitRows - 1) / kUnitRows;
  if (maxu > 255) return cudaErrorInvalidValue;  // the kernel packs a unit's index in 8 bits
  const std::size_t fixed = stamp * kTileCols + sizeof(int) * 4 * static_cast<std::size_t>(args.dims.ld);
  // Each staged row stamp: its values, and the entries and units of its kTileCols columns.
  const std::size_t per_row =
      stamp + kTileCols * (sizeof(int) + maxu * (sizeof(double) + sizeof(int)));
  // As many row stamps at a time as keep the target blocks on an SM; at least one.
  const int staged = static_cast<int>(std::clamp<std::size_t>(
      fixed < kBuildSmemTarget ? (kBuildSmemTarget - fixed) / per_row : 1, 1, kMaxStagedStamps));
  const std::size_t smem = fixed + per_row * static_cast<std::size_t>(staged);
  if (cudaError_t err = AllowSharedMemory(reinterpret_cast<const void*>(BuildNormalEquationsKernel), smem); err != cudaSuccess) {
    return err;
  }
  const unsigned blocks = static_cast<unsigned>(args.count) * CeilDiv(args.dims.ld, kTileCols);
  BuildNormalEquationsKernel<<<blocks, kBuildThreads, smem, stream>>>(args, staged);
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
