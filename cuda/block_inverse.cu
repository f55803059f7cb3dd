// Helpers of the in-place block triangular inversion (see batch_layout.h).
#include "cuda/batch_layout.h"
#include "cuda/block_inverse.h"
#include "cuda/kernel_common.cuh"
#include "cuda/launch_check.h"

namespace spexd::cuda {
namespace {

constexpr int kLeafThreads = 128;

// Forward substitution, one thread per column of the inverse; L and X in shared memory.
__global__ void LeafInverseKernel(RunArgs a) {
  extern __shared__ double smem[];
  const RunEntry e = a.entries[blockIdx.x];
  const DevicePatch d = a.in.patches[e.patch];
  const int i = blockIdx.y;
  if (!NeedsLeafInverse(i, d.core_row, d.nspectot)) return;
  const int nt = a.dims.nwavetot, ld = a.dims.ld, ldp = nt + 1;
  double* ls = smem;             // [nt][ldp] row-major
  double* xs = smem + nt * ldp;  // [nt][ldp]
  double* base = SlotMatrix(a, e.slot) + static_cast<int64_t>(i) * nt * (ld + 1);
  for (int idx = threadIdx.x; idx < nt * nt; idx += blockDim.x) {
    const int r = idx % nt, c = idx / nt;
    ls[r * ldp + c] = r >= c ? base[r + static_cast<int64_t>(c) * ld] : 0.0;
  }
  __syncthreads();
  for (int c = threadIdx.x; c < nt; c += blockDim.x) {
    for (int r = 0; r < c; ++r) xs[r * ldp + c] = 0.0;
    xs[c * ldp + c] = 1.0 / ls[c * ldp + c];
    for (int r = c + 1; r < nt; ++r) {
      double sum = 0.0;
      for (int k = c; k < r; ++k) sum += ls[r * ldp + k] * xs[k * ldp + c];
      xs[r * ldp + c] = -sum / ls[r * ldp + r];
    }
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < nt * nt; idx += blockDim.x) {
    const int r = idx % nt, c = idx / nt;
    base[r + static_cast<int64_t>(c) * ld] = xs[r * ldp + c];
  }
}

__global__ void SetLeafIdentityKernel(RunArgs a) {
  const RunEntry e = a.entries[blockIdx.x];
  const DevicePatch d = a.in.patches[e.patch];
  const int i = blockIdx.y;
  if (!NeedsLeafInverse(i, d.core_row, d.nspectot)) return;
  const int nt = a.dims.nwavetot;
  double* t = LeafScratch(a, e.slot, i);
  for (int idx = threadIdx.x; idx < nt * nt; idx += blockDim.x) {
    t[idx] = (idx % nt == idx / nt) ? 1.0 : 0.0;
  }
}

__global__ void CopyLeafBlocksKernel(RunArgs a) {
  const RunEntry e = a.entries[blockIdx.x];
  const DevicePatch d = a.in.patches[e.patch];
  const int i = blockIdx.y;
  if (!NeedsLeafInverse(i, d.core_row, d.nspectot)) return;
  const int nt = a.dims.nwavetot, ld = a.dims.ld;
  const double* t = LeafScratch(a, e.slot, i);
  double* base = SlotMatrix(a, e.slot) + static_cast<int64_t>(i) * nt * (ld + 1);
  for (int idx = threadIdx.x; idx < nt * nt; idx += blockDim.x) {
    const int r = idx % nt, c = idx / nt;
    base[r + static_cast<int64_t>(c) * ld] = t[idx];
  }
}

// The band inversion's prologue of step r (batch_layout.h). blockIdx.y: 0 finishes the
// diagonal block of column jn = nspectot - r (symmetric from its lower triangle, copied to
// C's output when a core block), 1 puts I on block (jn - 1, jn - 1), 2 + a mirrors the
// kept block a of C[K1, jn] above the diagonal. Reads only what it does not write.
__global__ void BandInversePrologueKernel(RunArgs a, int r) {
  const RunEntry e = a.entries[blockIdx.x];
  const DevicePatch d = a.in.patches[e.patch];
  const int nt = a.dims.nwavetot, ld = a.dims.ld, part = blockIdx.y;
  const int jn = BandInverseColumn(r, d.nspectot) + 1;
  double* mat = SlotMatrix(a, e.slot);
  auto at = [&](int64_t row, int64_t col) -> double& { return mat[row + col * ld]; };
  const int64_t n0 = static_cast<int64_t>(jn) * nt;
  if (part == 1) {
    if (jn - 1 < d.core_row || jn - 1 >= d.nspectot) return;
    for (int idx = threadIdx.x; idx < nt * nt; idx += blockDim.x) {
      const int row = idx % nt, col = idx / nt;
      at(n0 - nt + row, n0 - nt + col) = row == col ? 1.0 : 0.0;
    }
    return;
  }
  if (jn < d.core_row || jn >= d.nspectot) return;
  if (part == 0) {
    const int sp = jn - d.core_row;
    double* c = sp < a.dims.nper
                    ? a.slots.c + (static_cast<int64_t>(e.slot) * a.dims.nper + sp) * nt * nt
                    : nullptr;
    for (int idx = threadIdx.x; idx < nt * nt; idx += blockDim.x) {
      const int row = idx % nt, col = idx / nt;
      const double v = row >= col ? at(n0 + row, n0 + col) : at(n0 + col, n0 + row);
      if (row < col) at(n0 + row, n0 + col) = v;
      if (c != nullptr) c[idx] = v;
    }
    return;
  }
  const int blk = part - 2;
  if (blk >= BandInverseKept(jn, e.band, d.nspectot)) return;
  const int64_t k0 = n0 + static_cast<int64_t>(blk + 1) * nt;  // C[k0.., n0..] below
  for (int idx = threadIdx.x; idx < nt * nt; idx += blockDim.x) {
    const int row = idx % nt, col = idx / nt;
    at(n0 + col, k0 + row) = at(k0 + row, n0 + col);
  }
}

}  // namespace

cudaError_t LaunchBandInversePrologue(const RunArgs& args, int r, int max_blocks, cudaStream_t stream) {
  if (args.count == 0 || max_blocks < 1) return cudaSuccess;
  const dim3 grid(static_cast<unsigned>(args.count), static_cast<unsigned>(2 + max_blocks));
  BandInversePrologueKernel<<<grid, 256, 0, stream>>>(args, r);
  return SPEXD_CHECK_LAUNCH(stream);
}

cudaError_t LaunchLeafInverse(const RunArgs& args, int max_blocks, cudaStream_t stream) {
  if (args.count == 0 || max_blocks < 1) return cudaSuccess;
  const int nt = args.dims.nwavetot;
  const std::size_t smem = sizeof(double) * 2 * nt * (nt + 1);
  if (smem > 48 * 1024) {
    cudaError_t err = cudaFuncSetAttribute(LeafInverseKernel,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(smem));
    if (err != cudaSuccess) return err;
  }
  const dim3 grid(static_cast<unsigned>(args.count), static_cast<unsigned>(max_blocks));
  LeafInverseKernel<<<grid, kLeafThreads, smem, stream>>>(args);
  return SPEXD_CHECK_LAUNCH(stream);
}

cudaError_t LaunchSetLeafIdentity(const RunArgs& args, int max_blocks, cudaStream_t stream) {
  if (args.count == 0 || max_blocks < 1) return cudaSuccess;
  const dim3 grid(static_cast<unsigned>(args.count), static_cast<unsigned>(max_blocks));
  SetLeafIdentityKernel<<<grid, 256, 0, stream>>>(args);
  return SPEXD_CHECK_LAUNCH(stream);
}

cudaError_t LaunchCopyLeafBlocks(const RunArgs& args, int max_blocks, cudaStream_t stream) {
  if (args.count == 0 || max_blocks < 1) return cudaSuccess;
  const dim3 grid(static_cast<unsigned>(args.count), static_cast<unsigned>(max_blocks));
  CopyLeafBlocksKernel<<<grid, 256, 0, stream>>>(args);
  return SPEXD_CHECK_LAUNCH(stream);
}

}  // namespace spexd::cuda
