// Q = C_ss^{-1/2} by Householder tridiagonalisation + implicit QL in shared memory, then
// the decorrelation products (extraction-spec §2.10–2.11). One thread block of
// kThreads per (patch, core spectrum); only one nt x nt matrix lives in shared memory
// (the reflector product is formed in place and rotated into the eigenvectors), so
// four blocks fit on an SM.
#include "cuda/decorrelation.h"
#include "cuda/decorrelation_products.cuh"
#include "cuda/kernel_common.cuh"
#include "cuda/launch_check.h"
#include "cuda/tridiag_eigen.h"

namespace spexd::cuda {
namespace {

// Warp 0 (its lane 0) computes the QL rotations while warps 1..3 apply them to the rows
// (nt <= 96 rows in one pass); more warps would only wait at the barriers.
constexpr int kThreads = 128;

// The thread block as a team of tridiag_eigen.h.
struct BlockTeam {
  double* red;  // [2][32] partial sums, alternating between consecutive Sum calls
  int phase = 0;
  SPEXD_HD int rank() const { return static_cast<int>(threadIdx.x); }
  SPEXD_HD int size() const { return static_cast<int>(blockDim.x); }
  SPEXD_HD int lane() const { return static_cast<int>(threadIdx.x) & 31; }
  SPEXD_HD int lanes() const { return 32; }
  SPEXD_HD int group() const { return static_cast<int>(threadIdx.x) >> 5; }
  SPEXD_HD int groups() const { return static_cast<int>(blockDim.x) >> 5; }
  SPEXD_HD void Sync() {
#if defined(__CUDA_ARCH__)
    __syncthreads();
#endif
  }
  // Fixed order (shuffle-down tree, then warps in order): the same value on every thread
  // and on every run. The alternating buffer is safe because two Sum calls are always
  // separated by this barrier of the later one.
  SPEXD_HD double Sum(double x) {
#if defined(__CUDA_ARCH__)
    for (int off = 16; off > 0; off >>= 1) x += __shfl_down_sync(0xffffffffu, x, off);
    double* r = red + 32 * phase;
    phase ^= 1;
    if (lane() == 0) r[group()] = x;
    __syncthreads();
    double s = 0.0;
    for (int w = 0; w < groups(); ++w) s += r[w];
    return s;
#else
    return x;
#endif
  }
};

struct Layout {
  int n, lda;
  std::size_t a, d, e, tau, x, scratch, red, ctl, bytes;  // offsets in doubles; bytes total
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
  l.scratch = l.x + n;   // 5n: v, w (reduction) | rotations [2][n] x 2 (QL) | products
  l.red = l.scratch + 5 * static_cast<std::size_t>(n);
  l.ctl = l.red + 64;    // 6 ints
  l.bytes = sizeof(double) * l.ctl + 6 * sizeof(int);
  return l;
}

__global__ void __launch_bounds__(kThreads) TridiagDecorrelateKernel(RunArgs a) {
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
  double* tau = smem + L.tau;
  double* x = smem + L.x;
  double* scr = smem + L.scratch;
  int* ctl = reinterpret_cast<int*>(smem + L.ctl);
  BlockTeam team{smem + L.red};

  const int64_t blk = (static_cast<int64_t>(e.slot) * D.nper + sp) * n * n;
  const double* cin = a.slots.c + blk;
  for (int idx = threadIdx.x; idx < n * n; idx += blockDim.x) {
    const int r = idx % n, c = idx / n;  // column-major element (r, c)
    if (r >= c) {  // lower triangle, mirrored (the CPU's dsyrk/dsyevd use "L" too)
      const double v = cin[idx];
      m[c * lda + r] = v;
      m[r * lda + c] = v;
    }
  }
  const double* xs = a.slots.x + static_cast<int64_t>(e.slot) * D.ld +
                     static_cast<int64_t>(d.core_row + sp) * n;
  for (int i = threadIdx.x; i < n; i += blockDim.x) x[i] = xs[i];
  __syncthreads();

  HouseholderTridiagonalize(team, m, lda, n, dv, ev, tau, scr, scr + n);
  FormReflectorProduct(team, m, lda, n, tau, scr);
  const int sweeps = TridiagonalQl(team, dv, ev, m, lda, n, scr, scr + 2 * n, ctl);
  if (threadIdx.x == 0) a.slots.eig_info[static_cast<int64_t>(blockIdx.x) * D.nper + sp] = sweeps;
  __syncthreads();  // the last QL sweep's rows and eigenvalues; scratch becomes free

  const EigenView V{m, 1, lda};  // eigenvectors in the columns of m
  WriteDecorrelated(a, e, d, sp, V, dv, x,
                    ProductScratch{scr, scr + n, scr + 2 * n, scr + 3 * n, scr + 4 * n},
                    sweeps < 0);
}

}  // namespace

cudaError_t LaunchTridiagDecorrelate(const RunArgs& args, cudaStream_t stream) {
  if (args.count == 0) return cudaSuccess;
  const std::size_t smem = MakeLayout(args.dims.nwavetot).bytes;
  if (smem > 48 * 1024) {
    cudaError_t err = cudaFuncSetAttribute(TridiagDecorrelateKernel,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(smem));
    if (err != cudaSuccess) return err;
  }
  const dim3 grid(static_cast<unsigned>(args.count), static_cast<unsigned>(args.dims.nper));
  TridiagDecorrelateKernel<<<grid, kThreads, smem, stream>>>(args);
  return SPEXD_CHECK_LAUNCH(stream);
}

}  // namespace spexd::cuda
