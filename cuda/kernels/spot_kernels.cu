// GPU spot evaluation: one warp per stamp (extraction-spec §1.4). Compiled with
// --fmad=false (see CMakeLists.txt) so that trace positions and edges round like the host.
#include "cuda/kernels/spot_kernels.h"

#include "cuda/kernels/device_limits.h"
#include "cuda/kernels/launch_check.h"

namespace spexd::cuda {
namespace {

using core::EdgeTerms;
using core::PixelBasis;
using core::StampEdge;
using core::SubPixelOffset;

constexpr int kWarpsPerBlock = 4;

struct SpotLayout {
  int nx, ny, gx, gy;
  int par, ex, ey, px, py, ty, s, total;  // offsets (doubles) inside one warp's area; ty = tx[j][ix]
};

__host__ __device__ SpotLayout MakeLayout(const SpotKernelArgs& a) {
  SpotLayout l{};
  l.nx = 2 * a.hsizex + 1;
  l.ny = 2 * a.hsizey + 1;
  l.gx = a.ghdegx;
  l.gy = a.ghdegy;
  l.par = 0;
  l.ex = l.par + a.nrows;
  l.ey = l.ex + (l.nx + 1) * (1 + l.gx);
  l.px = l.ey + (l.ny + 1) * (1 + l.gy);
  l.py = l.px + (l.gx + 1) * l.nx;
  l.ty = l.py + (l.gy + 1) * l.ny;
  l.s = l.ty + (l.gy + 1) * l.nx;
  l.total = l.s + l.nx * l.ny;
  return l;
}

__global__ void EvaluateSpotsKernel(SpotKernelArgs a, SpotLayout l) {
  extern __shared__ double smem[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const long long nstamps = static_cast<long long>(a.nspec) * a.nfull;
  const long long stamp = static_cast<long long>(blockIdx.x) * kWarpsPerBlock + warp;
  if (stamp >= nstamps) return;  // warp-uniform; the kernel uses no block barrier
  double* sh = smem + warp * l.total;
  const int fl = static_cast<int>(stamp / a.nfull);
  const int w = static_cast<int>(stamp % a.nfull);
  const int fiber = a.specmin + fl;
  const double wave = a.fullwave[w];

  // Parameters of this (fibre, wavelength): X, Y, GHSIGX, GHSIGY, GH-i-j (§1.3).
  for (int r = lane; r < a.nrows; r += 32) {
    const double* c = a.coeff + (static_cast<long long>(r) * a.nspec_psf + fiber) * a.maxc;
    sh[l.par + r] = EvaluateLegendreRow(a.rows[r], c, wave);
  }
  __syncwarp();
  const double* par = sh + l.par;
  const double dx = SubPixelOffset(par[0], a.xc[stamp], a.hsizex);
  const double dy = SubPixelOffset(par[1], a.yc[stamp], a.hsizey);
  const double sigx = par[2], sigy = par[3];

  // Edge terms (§1.4 steps 4–5).
  for (int e = lane; e < (l.nx + 1) + (l.ny + 1); e += 32) {
    if (e <= l.nx) {
      double* dst = sh + l.ex + e * (1 + l.gx);
      EdgeTerms(StampEdge(e, a.hsizex, dx, sigx), l.gx, dst, dst + 1);
    } else {
      const int k = e - (l.nx + 1);
      double* dst = sh + l.ey + k * (1 + l.gy);
      EdgeTerms(StampEdge(k, a.hsizey, dy, sigy), l.gy, dst, dst + 1);
    }
  }
  __syncwarp();
  // Pixel-integrated 1-D bases (§1.4 step 6).
  for (int idx = lane; idx < (l.gx + 1) * l.nx; idx += 32) {
    sh[l.px + idx] = PixelBasis(sh + l.ex, l.gx, idx / l.nx, idx % l.nx);
  }
  for (int idx = lane; idx < (l.gy + 1) * l.ny; idx += 32) {
    sh[l.py + idx] = PixelBasis(sh + l.ey, l.gy, idx / l.ny, idx % l.ny);
  }
  __syncwarp();
  // The core (§1.4 step 7) factored as core/plan/spots.cc does: tx[j][ix] = Σ_i GH_ij Px_i[ix],
  // then S[iy][ix] = Σ_j Py_j[iy] tx[j][ix] (same products, same summation order).
  for (int idx = lane; idx < (l.gy + 1) * l.nx; idx += 32) {
    const int j = idx / l.nx, ix = idx % l.nx;
    double t = 0.0;
    for (int i = 0; i <= l.gx; ++i) t += par[4 + i + (l.gx + 1) * j] * sh[l.px + i * l.nx + ix];
    sh[l.ty + idx] = t;
  }
  __syncwarp();
  double local = 0.0;
  for (int p = lane; p < l.nx * l.ny; p += 32) {
    const int iy = p / l.nx, ix = p % l.nx;
    double v = 0.0;
    for (int j = 0; j <= l.gy; ++j) v += sh[l.py + j * l.ny + iy] * sh[l.ty + j * l.nx + ix];
    v = v < 0.0 ? 0.0 : v;  // positivity (§1.4 step 8); NaN propagates like numpy
    sh[l.s + p] = v;
    local += v;
  }
  for (int off = 16; off > 0; off /= 2) local += __shfl_xor_sync(0xffffffffu, local, off);
  double* out = a.spots + stamp * (l.nx * l.ny);
  // An entirely clipped stamp stays zero (as core/plan/spots.cc) instead of becoming NaN.
  for (int p = lane; p < l.nx * l.ny; p += 32) out[p] = local > 0.0 ? sh[l.s + p] / local : sh[l.s + p];
}

}  // namespace

cudaError_t LaunchEvaluateSpots(const SpotKernelArgs& args, cudaStream_t stream) {
  const SpotLayout layout = MakeLayout(args);
  const long long nstamps = static_cast<long long>(args.nspec) * args.nfull;
  if (nstamps == 0) return cudaSuccess;
  const unsigned blocks = static_cast<unsigned>((nstamps + kWarpsPerBlock - 1) / kWarpsPerBlock);
  const std::size_t smem = sizeof(double) * layout.total * kWarpsPerBlock;
  if (smem > 48 * 1024) {  // as kernel_common.cuh's AllowSharedMemory (not included: device code)
    if (smem > SharedMemoryPerBlock()) return cudaErrorInvalidValue;
    cudaError_t err = cudaFuncSetAttribute(EvaluateSpotsKernel,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(smem));
    if (err != cudaSuccess) return err;
  }
  EvaluateSpotsKernel<<<blocks, 32 * kWarpsPerBlock, smem, stream>>>(args, layout);
  return SPEXD_CHECK_LAUNCH(stream);
}

}  // namespace spexd::cuda
