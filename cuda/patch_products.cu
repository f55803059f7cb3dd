// Pixel model, chi2 and column sums of each patch; model canvases (spec §2.11–2.12).
#include "cuda/kernel_common.cuh"
#include "cuda/launch_check.h"
#include "cuda/patch_products.h"

namespace spexd::cuda {
namespace {

constexpr int kPixelThreads = 256;
constexpr int kColumnWarps = 8;

// One thread per window pixel (blockIdx.x = run entry, blockIdx.y = pixel tile). The
// patch's stamp corners, x and the core model flux are staged in shared memory; each
// pixel scans the n corners in q order (the CPU sums its pixel entries in q order too).
__global__ void PixelModelKernel(RunArgs a) {
  extern __shared__ double smem[];
  const PlanDims& D = a.dims;
  const RunEntry e = a.entries[blockIdx.x];
  const DevicePatch d = a.in.patches[e.patch];
  const int npix = d.ny * d.nx, n = d.n, nt = D.nwavetot;
  const int p0 = static_cast<int>(blockIdx.y) * kPixelThreads;
  if (p0 >= npix) return;  // block-uniform
  double* s_x = smem;
  double* s_f = s_x + D.ld;
  int* s_oy = reinterpret_cast<int*>(s_f + D.ld);
  int* s_ox = s_oy + D.ld;
  int* s_sid = s_ox + D.ld;
  const int64_t vbase = static_cast<int64_t>(e.slot) * D.ld;
  for (int q = threadIdx.x; q < n; q += blockDim.x) {
    const int64_t idx = StampIndex(D, d, q);
    s_oy[q] = a.in.yc[idx] - d.y0;
    s_ox[q] = a.in.xc[idx] - d.x0;
    s_sid[q] = static_cast<int>(idx);
    s_x[q] = a.slots.x[vbase + q];
    const int s = q / nt, w = q % nt;
    const bool core = s >= d.core_row && s < d.core_row + D.nper && w >= D.wavepad_eff &&
                      w < D.wavepad_eff + D.nwavestep;
    s_f[q] = (core && a.want_model) ? a.slots.fmodel[vbase + q] : 0.0;
  }
  // Stamp rows are normally non-decreasing in wavelength within a spectrum (the trace
  // runs up the CCD): then each pixel only visits, per spectrum, the wavelengths whose
  // stamps can cover its row (binary search), in the same q order as the full scan, so the
  // sums are identical. Otherwise every corner is scanned.
  __syncthreads();
  int mono = 1;
  for (int s = threadIdx.x; s < d.nspectot; s += blockDim.x) {
    for (int w = 1; w < nt; ++w) mono &= s_oy[s * nt + w - 1] <= s_oy[s * nt + w];
  }
  mono = __syncthreads_and(mono);
  const int p = p0 + threadIdx.x;
  const bool active = p < npix;
  const int sny = D.stamp_ny, snx = D.stamp_nx, npx = sny * snx;
  double mc = 0.0;
  if (active) {
    const int py = p / d.nx, px = p % d.nx;
    double m = 0.0;
    auto visit = [&](int q) {
      const unsigned dy = static_cast<unsigned>(py - s_oy[q]);
      const unsigned dx = static_cast<unsigned>(px - s_ox[q]);
      if (dy < static_cast<unsigned>(sny) && dx < static_cast<unsigned>(snx)) {
        const double av = a.in.spots[static_cast<int64_t>(s_sid[q]) * npx + dy * snx + dx];
        m += av * s_x[q];
        mc += av * s_f[q];
      }
    };
    if (mono) {
      for (int s = 0; s < d.nspectot; ++s) {
        const int q0 = s * nt;
        int lo = 0, hi = nt;  // first w with oy > py - sny
        while (lo < hi) {
          const int mid = (lo + hi) / 2;
          if (s_oy[q0 + mid] > py - sny) hi = mid; else lo = mid + 1;
        }
        for (int w = lo; w < nt && s_oy[q0 + w] <= py; ++w) visit(q0 + w);
      }
    } else {
      for (int q = 0; q < n; ++q) visit(q);
    }
    const int64_t g = static_cast<int64_t>(d.y0 + py) * D.image_width + d.x0 + px;
    const double v = a.in.ivar[g], pix = a.in.image[g];
    double chi2 = 0.0;
    bool weighted;
    if (D.compat_cpu) {
      // mivar = (m psferr + 1e-32)^-2; weight by tivar > 0 (spec §2.11, CPU path).
      const double mivar = pow(m * a.psferr + 1e-32, -2.0);
      double tivar = 0.0;
      if (mivar > 0.0 && v > 0.0) tivar = 1.0 / (1.0 / mivar + 1.0 / v);
      const double chi = (pix - m) * sqrt(tivar);
      chi2 = chi * chi;
      weighted = tivar > 0.0;
    } else {
      // sigma_m = psferr m; only m > 0 pixels; weight by chi2 > 0 (GPU path).
      const double sm = a.psferr * m;
      double tivar = 0.0;
      if (sm > 0.0 && v > 0.0) tivar = 1.0 / (sm * sm + 1.0 / v);
      chi2 = (pix - m) * (pix - m) * tivar;
      weighted = chi2 > 0.0;
    }
    const int64_t pbase = static_cast<int64_t>(e.slot) * D.max_npix + p;
    a.slots.pix_num[pbase] = weighted ? chi2 : 0.0;
    a.slots.pix_w[pbase] = weighted ? 1.0 : 0.0;
    if (a.want_model) a.slots.model[pbase] = mc;
  }
  if (a.want_model) {
    const int nonzero = __syncthreads_or(active && mc != 0.0);
    const int nonfinite = __syncthreads_or(active && !isfinite(mc));
    if (threadIdx.x == 0 && (nonzero || nonfinite)) {
      atomicOr(&a.slots.mflags[e.slot], (nonzero ? kModelNonZero : 0) | (nonfinite ? kModelNonFinite : 0));
    }
  }
}

// One warp per kept core bin: sums over its (complete) stamp.
__global__ void ColumnSumsKernel(RunArgs a) {
  const PlanDims& D = a.dims;
  const RunEntry e = a.entries[blockIdx.x];
  const DevicePatch d = a.in.patches[e.patch];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int col = static_cast<int>(blockIdx.y) * kColumnWarps + warp;
  if (col >= D.nper * D.nwavestep) return;
  const int sp = col / D.nwavestep, w = col % D.nwavestep;
  if (w >= d.nkeep) return;
  const int q = (d.core_row + sp) * D.nwavetot + D.wavepad_eff + w;
  const int64_t idx = StampIndex(D, d, q);
  const int oy = a.in.yc[idx] - d.y0, ox = a.in.xc[idx] - d.x0;
  const int sny = D.stamp_ny, snx = D.stamp_nx, npx = sny * snx;
  const double* st = a.in.spots + idx * npx;
  const int64_t pbase = static_cast<int64_t>(e.slot) * D.max_npix;
  double pm = 0.0, num = 0.0, wgt = 0.0;
  for (int pp = lane; pp < npx; pp += 32) {
    const int r = oy + pp / snx, c = ox + pp % snx;
    if (r < 0 || r >= d.ny || c < 0 || c >= d.nx) continue;
    const double av = st[pp];
    const int p = r * d.nx + c;
    const int64_t g = static_cast<int64_t>(d.y0 + r) * D.image_width + d.x0 + c;
    if (a.in.ivar[g] == 0.0) pm += av;  // pixmask_fraction (spec §2.11)
    num += av * a.slots.pix_num[pbase + p];
    wgt += av * a.slots.pix_w[pbase + p];
  }
  pm = WarpSum(pm);
  num = WarpSum(num);
  wgt = WarpSum(wgt);
  if (lane == 0) {
    const int64_t o = OutIndex(D, e, d, sp, w);
    a.out.pixmask[o] = pm;
    a.out.chi2[o] = wgt != 0.0 ? num / wgt : 0.0;
  }
}

__global__ void StitchCanvasKernel(CanvasArgs a) {
  const int b = blockIdx.y;
  const CanvasDesc cd = a.desc[b];
  const int64_t pix = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (pix >= static_cast<int64_t>(cd.ny) * cd.nx) return;
  const int y = cd.y0 + static_cast<int>(pix / cd.nx), x = cd.x0 + static_cast<int>(pix % cd.nx);
  double acc = 0.0;
  for (int li = cd.list_begin; li < cd.list_end; ++li) {
    const CanvasPatch cp = a.list[li];
    if (cp.slot < 0) continue;
    const int mf = a.mflags[cp.slot];
    if (a.status[cp.slot] != 0 || !(mf & kModelNonZero) || (mf & kModelNonFinite)) continue;
    const DevicePatch d = a.patches[cp.patch];
    if (y < d.y0 || y >= d.y0 + d.ny || x < d.x0 || x >= d.x0 + d.nx) continue;
    acc += a.model[static_cast<int64_t>(cp.slot) * a.max_npix + (y - d.y0) * d.nx + (x - d.x0)];
  }
  a.canvas[b * a.canvas_stride + pix] = acc;
}

}  // namespace

cudaError_t LaunchPixelModel(const RunArgs& args, cudaStream_t stream) {
  if (args.count == 0) return cudaSuccess;
  const std::size_t smem = (2 * sizeof(double) + 3 * sizeof(int)) * args.dims.ld;
  if (smem > 48 * 1024) {
    cudaError_t err = cudaFuncSetAttribute(PixelModelKernel,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(smem));
    if (err != cudaSuccess) return err;
  }
  const dim3 grid(static_cast<unsigned>(args.count), CeilDiv(args.dims.max_npix, kPixelThreads));
  PixelModelKernel<<<grid, kPixelThreads, smem, stream>>>(args);
  return SPEXD_CHECK_LAUNCH(stream);
}

cudaError_t LaunchColumnSums(const RunArgs& args, cudaStream_t stream) {
  if (args.count == 0) return cudaSuccess;
  const dim3 grid(static_cast<unsigned>(args.count),
                  CeilDiv(static_cast<long long>(args.dims.nper) * args.dims.nwavestep, kColumnWarps));
  ColumnSumsKernel<<<grid, 32 * kColumnWarps, 0, stream>>>(args);
  return SPEXD_CHECK_LAUNCH(stream);
}

cudaError_t LaunchStitchCanvas(const CanvasArgs& args, cudaStream_t stream) {
  if (args.nbundles == 0 || args.canvas_stride == 0) return cudaSuccess;
  const dim3 grid(CeilDiv(args.canvas_stride, 256), static_cast<unsigned>(args.nbundles));
  StitchCanvasKernel<<<grid, 256, 0, stream>>>(args);
  return SPEXD_CHECK_LAUNCH(stream);
}

}  // namespace spexd::cuda
