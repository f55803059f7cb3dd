// Pixel model, chi2 and column sums of each patch; model canvases (spec §2.11–2.12).
#include <climits>

#include "cuda/kernels/kernel_common.cuh"
#include "cuda/kernels/launch_check.h"
#include "cuda/kernels/patch_products.h"

namespace spexd::cuda {
namespace {

constexpr int kPixelThreads = 256;
constexpr int kPixelWarps = kPixelThreads / 32;
// One warp's pixel tile: kTileX x kTileY lanes, each owning kRows pixels kTileY rows apart.
constexpr int kTileX = 8, kTileY = 4, kRows = 2, kTileH = kTileY * kRows;
constexpr int kTilesPerWarp = 4;  // grid sizing: about this many tiles per warp
constexpr int kColumnWarps = 8;

// A staged stamp corner: window-relative corner and the offset that, plus py * snx + px,
// indexes the stamp's spot value at window pixel (py, px).
struct alignas(16) StagedCorner {
  int oy, ox;
  int64_t base;
};

// Window-relative bounding box of the corners of 32 consecutive wavelengths of a spectrum.
struct CornerBox {
  int y_lo, y_hi, x_lo, x_hi;  // corner rows [y_lo, y_hi], columns [x_lo, x_hi]
};

// The column sums' per-pixel code (SlotBuffers::pix): exact small integers in a double.
__device__ inline double PixelCode(bool weighted, bool ivar_zero) {
  return (weighted ? 1.0 : 0.0) + (ivar_zero ? 2.0 : 0.0);
}

// The pixel's chi2 term and weight under the compat rule, and its core model (spec §2.11).
__device__ inline void PixelProducts(const RunArgs& a, const RunEntry& e, const DevicePatch& d,
                                     int py, int px, double m, double mc, bool* nonzero,
                                     bool* nonfinite) {
  const PlanDims& D = a.dims;
  const int p = py * d.nx + px;
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
  reinterpret_cast<double2*>(a.slots.pix)[pbase] =
      make_double2(weighted ? chi2 : 0.0, PixelCode(weighted, v == 0.0));
  if (a.want_model) {
    a.slots.model[pbase] = mc;
    *nonzero |= mc != 0.0;
    *nonfinite |= !isfinite(mc);
  }
}

// One warp per pixel tile of 8 columns x 8 rows of a window; lane (lx, ly) owns the pixels
// (y0 + ly + 4 r, x0 + lx), r < kRows. blockIdx.x = run entry; the block's warps
// stride over the window's tiles. The patch's stamp corners, x and the core model flux
// are staged in shared memory with a bounding box per 32 wavelengths of each spectrum.
// The warp lists the stamps that meet its tile in q order (ballot per 32 wavelengths) and
// each pixel adds those that cover it, in that order: the same terms in the same order
// as a scan of all n corners (the CPU sums its pixel entries in q order too), for any
// trace, monotone in wavelength or not. Two listed stamps are taken per step so that their
// spot loads are in flight together (the sums stay in q order). Over 100 lines: the staging,
// the stamp listing and the sums share registers and shared memory, which a split into
// device functions would pass around by the dozen (and risk spilling).
__global__ void __launch_bounds__(kPixelThreads) PixelModelKernel(RunArgs a) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const PlanDims& D = a.dims;
  const RunEntry e = a.entries[blockIdx.x];
  const DevicePatch d = a.in.patches[e.patch];
  const int n = d.n, nt = D.nwavetot, nchunk = (nt + 31) / 32, nbox = d.nspectot * nchunk;
  const int tiles_x = (d.nx + kTileX - 1) / kTileX;
  const int ntiles = tiles_x * ((d.ny + kTileH - 1) / kTileH);
  if (static_cast<int>(blockIdx.y) * kPixelWarps >= ntiles) return;  // block-uniform
  double2* s_xf = reinterpret_cast<double2*>(smem_raw);
  StagedCorner* s_c = reinterpret_cast<StagedCorner*>(s_xf + D.ld);
  CornerBox* s_box = reinterpret_cast<CornerBox*>(s_c + D.ld);
  const int sny = D.stamp_ny, snx = D.stamp_nx, npx = sny * snx;
  const int64_t vbase = static_cast<int64_t>(e.slot) * D.ld;
  for (int q = threadIdx.x; q < n; q += blockDim.x) {
    const int64_t idx = StampIndex(D, d, q);
    const int oy = a.in.yc[idx] - d.y0, ox = a.in.xc[idx] - d.x0;
    s_c[q] = StagedCorner{oy, ox, idx * npx - static_cast<int64_t>(oy) * snx - ox};
    const int s = q / nt, w = q % nt;
    const bool core = s >= d.core_row && s < d.core_row + D.nper && w >= D.wavepad_eff &&
                      w < D.wavepad_eff + D.nwavestep;
    s_xf[q] = make_double2(a.slots.x[vbase + q],
                           (core && a.want_model) ? a.slots.fmodel[vbase + q] : 0.0);
  }
  __syncthreads();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int c = warp; c < nbox; c += kPixelWarps) {
    const int s = c / nchunk, w = (c % nchunk) * 32 + lane;
    const bool in = w < nt;
    const StagedCorner sc = s_c[s * nt + (in ? w : 0)];
    const int y_lo = __reduce_min_sync(0xffffffffu, in ? sc.oy : INT_MAX);
    const int y_hi = __reduce_max_sync(0xffffffffu, in ? sc.oy : INT_MIN);
    const int x_lo = __reduce_min_sync(0xffffffffu, in ? sc.ox : INT_MAX);
    const int x_hi = __reduce_max_sync(0xffffffffu, in ? sc.ox : INT_MIN);
    if (lane == 0) s_box[c] = CornerBox{y_lo, y_hi, x_lo, x_hi};
  }
  __syncthreads();
  const int lx = lane % kTileX, ly = lane / kTileX;
  const int64_t row_step = static_cast<int64_t>(kTileY) * snx;  // spot offset of the next row
  bool nonzero = false, nonfinite = false;
  for (int t = static_cast<int>(blockIdx.y) * kPixelWarps + warp; t < ntiles;
       t += static_cast<int>(gridDim.y) * kPixelWarps) {
    const int y0 = (t / tiles_x) * kTileH, x0 = (t % tiles_x) * kTileX;
    const int py = y0 + ly, px = x0 + lx;
    const bool col_in = px < d.nx;
    const int64_t lofs = static_cast<int64_t>(py) * snx + px;
    double m[kRows], mc[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) m[r] = mc[r] = 0.0;
    // Spot values of stamp sc at the lane's pixels; in[r] says whether it covers pixel r.
    auto load = [&](const StagedCorner& sc, bool* in, double* av) {
      const bool xin = col_in && static_cast<unsigned>(px - sc.ox) < static_cast<unsigned>(snx);
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        const int y = py + kTileY * r;
        in[r] = xin && y < d.ny && static_cast<unsigned>(y - sc.oy) < static_cast<unsigned>(sny);
        av[r] = in[r] ? a.in.spots[sc.base + lofs + r * row_step] : 0.0;
      }
    };
    auto add = [&](int q, const bool* in, const double* av) {
      const double2 xf = s_xf[q];
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        if (in[r]) {
          m[r] += av[r] * xf.x;
          mc[r] += av[r] * xf.y;
        }
      }
    };
    for (int c = 0; c < nbox; ++c) {
      const CornerBox b = s_box[c];  // warp-uniform
      if (b.y_lo >= y0 + kTileH || b.y_hi + sny <= y0 || b.x_lo >= x0 + kTileX ||
          b.x_hi + snx <= x0) {
        continue;
      }
      const int q0 = (c / nchunk) * nt + (c % nchunk) * 32;
      bool meets = false;
      if ((c % nchunk) * 32 + lane < nt) {
        const StagedCorner sc = s_c[q0 + lane];
        meets = sc.oy < y0 + kTileH && sc.oy + sny > y0 && sc.ox < x0 + kTileX && sc.ox + snx > x0;
      }
      unsigned pending = __ballot_sync(0xffffffffu, meets);
      while (pending != 0) {
        const int qa = q0 + __ffs(pending) - 1;
        pending &= pending - 1;
        bool ina[kRows];
        double ava[kRows];
        load(s_c[qa], ina, ava);
        if (pending != 0) {
          const int qb = q0 + __ffs(pending) - 1;
          pending &= pending - 1;
          bool inb[kRows];
          double avb[kRows];
          load(s_c[qb], inb, avb);
          add(qa, ina, ava);
          add(qb, inb, avb);
        } else {
          add(qa, ina, ava);
        }
      }
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const int y = py + kTileY * r;
      if (col_in && y < d.ny) PixelProducts(a, e, d, y, px, m[r], mc[r], &nonzero, &nonfinite);
    }
  }
  if (a.want_model) {
    const int any_nonzero = __syncthreads_or(nonzero);
    const int any_nonfinite = __syncthreads_or(nonfinite);
    if (threadIdx.x == 0 && (any_nonzero || any_nonfinite)) {
      atomicOr(&a.slots.mflags[e.slot],
               (any_nonzero ? kModelNonZero : 0) | (any_nonfinite ? kModelNonFinite : 0));
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
  const double2* pix = reinterpret_cast<const double2*>(a.slots.pix) + static_cast<int64_t>(e.slot) * D.max_npix;
  double pm = 0.0, num = 0.0, wgt = 0.0;
  const StampWalk wk = MakeStampWalk(snx, lane);
  int r = oy + wk.pr, c = ox + wk.pc;  // pixel pp's window row and column, stepped
  for (int pp = lane; pp < npx; pp += 32) {
    if (static_cast<unsigned>(r) < static_cast<unsigned>(d.ny) &&
        static_cast<unsigned>(c) < static_cast<unsigned>(d.nx)) {
      const double av = st[pp];
      const double2 px = pix[r * d.nx + c];  // the pixel model's chi2 and code
      const bool masked = px.y >= 2.0;
      if (masked) pm += av;  // ivar 0: pixmask_fraction (spec §2.11)
      num += av * px.x;
      wgt += av * (px.y - (masked ? 2.0 : 0.0));
    }
    r += wk.step_r;
    c += wk.step_c;
    if (c >= ox + snx) {
      c -= snx;
      ++r;
    }
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
  const PlanDims& D = args.dims;
  const int max_spectra = (D.ld + D.nwavetot - 1) / D.nwavetot;
  const std::size_t smem = (sizeof(double2) + sizeof(StagedCorner)) * D.ld +
                           sizeof(CornerBox) * max_spectra * ((D.nwavetot + 31) / 32);
  if (cudaError_t err = AllowSharedMemory(reinterpret_cast<const void*>(PixelModelKernel), smem); err != cudaSuccess) {
    return err;
  }
  const long long pixels_per_block = static_cast<long long>(kPixelThreads) * kRows * kTilesPerWarp;
  const dim3 grid(static_cast<unsigned>(args.count), CeilDiv(D.max_npix, pixels_per_block));
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
