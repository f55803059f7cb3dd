// The per-column half of the normal equations (extraction-spec §2.7-2.8), one
// implementation for both kernels that build M (normal_equations.cu: entry by entry;
// normal_equations_dmma.cu: by tensor-core tiles). Device-only header.
#ifndef SPEXD_CUDA_NORMAL_EQUATIONS_COLUMNS_CUH_
#define SPEXD_CUDA_NORMAL_EQUATIONS_COLUMNS_CUH_

#include "core/numerics/patch_numerics.h"
#include "cuda/kernels/batch_layout.h"
#include "cuda/kernels/kernel_common.cuh"

namespace spexd::cuda {

// w_l = ivar * A[:, l] over the pixels of stamp l (origin oyl, oxl in the patch window,
// values stl), one warp: put(pp, r, c, w) for each stamp pixel pp at window row r and
// column c (w = 0 outside the trimmed window, so that dropped stamp rows drop out, spec
// §2.7; with kOutside false, put is called inside the window only). Returns the warp's
// sums of w (fluxweight) and w * image (b) in every lane; the order is fixed (pixels
// lane + 32 k, then a butterfly), so are the bits. The pixel's row, column and image offset
// are stepped, not recomputed (the integer work of this loop bounded the kernel).
template <bool kOutside = true, class Put>
__device__ __forceinline__ void StampWeights(const RunArgs& a, const DevicePatch& d, int oyl,
                                             int oxl, const double* stl, const StampWalk& w,
                                             double* fsum, double* bsum, Put put) {
  const PlanDims& D = a.dims;
  const int snx = D.stamp_nx, npx = D.stamp_ny * snx, width = D.image_width;
  double fs = 0.0, bs = 0.0;
  int r = oyl + w.pr, c = oxl + w.pc;
  const int cend = oxl + snx;
  // Image offset of (r, c); read only inside the window.
  int64_t g = static_cast<int64_t>(d.y0 + r) * width + d.x0 + c;
  const int64_t gstep = static_cast<int64_t>(w.step_r) * width + w.step_c;
  const int64_t gwrap = static_cast<int64_t>(width) - snx;
  // A pixel's three loads are issued a pixel ahead of its products, so that the products do not
  // wait on their own loads (the tile kernel 0.96 of its time with the canvas read unmasked,
  // record cuda_frame-h200-issue-scan); the sums keep their order, so their bits.
  const auto inside = [&](int rr, int cc) {
    return static_cast<unsigned>(rr) < static_cast<unsigned>(d.ny) &&
           static_cast<unsigned>(cc) < static_cast<unsigned>(d.nx);
  };
  bool in = w.lane < npx && inside(r, c);
  double iv = 0.0, sp = 0.0, im = 0.0;
  if (in) {
    SPEXD_DEVICE_ASSERT(g >= 0 && g < static_cast<int64_t>(D.image_height) * width);
    iv = a.in.ivar[g];
    sp = stl[w.lane];
    im = a.in.image[g];
  }
  for (int pp = w.lane; pp < npx; pp += 32) {
    int rn = r + w.step_r, cn = c + w.step_c;
    int64_t gn = g + gstep;
    if (cn >= cend) {
      cn -= snx;
      ++rn;
      gn += gwrap;
    }
    const bool in_next = pp + 32 < npx && inside(rn, cn);
    double iv_next = 0.0, sp_next = 0.0, im_next = 0.0;
    if (in_next) {
      SPEXD_DEVICE_ASSERT(gn >= 0 && gn < static_cast<int64_t>(D.image_height) * width);
      iv_next = a.in.ivar[gn];
      sp_next = stl[pp + 32];
      im_next = a.in.image[gn];
    }
    double va = 0.0;
    if (in) {
      va = iv * sp;
      fs += va;
      bs += va * im;
      if (!kOutside) put(pp, r, c, va);
    }
    if (kOutside) put(pp, r, c, va);
    r = rn;
    c = cn;
    g = gn;
    in = in_next;
    iv = iv_next;
    sp = sp_next;
    im = im_next;
  }
  *fsum = WarpSum(fs);
  *bsum = WarpSum(bs);
}

// Column l of M below its diagonal set to zero where it is read (the entries overwrite
// these zeros): as far as the trailing inversion reads past the band (TrailingReadBand). Above the diagonal, the blocks the
// trailing-first inversion multiplies as zeros (NeedsZeroBlock: row blocks core_row+1 ..
// kb-1 of column block kb), zeroed here where the column is written anyway rather than by
// a kernel of their own. One warp; kb = l / nwavetot, the column's spectrum.
__device__ __forceinline__ void ZeroColumn(const RunArgs& a, const RunEntry& e,
                                           const DevicePatch& d, int l, int kb, int lane) {
  const PlanDims& D = a.dims;
  SPEXD_DEVICE_ASSERT(kb == l / D.nwavetot);
  const int n = d.n;
  double* mcol = SlotMatrix(a, e.slot) + static_cast<int64_t>(l) * D.ld;
  const int zend = min(n, (core::BandLast(kb, TrailingReadBand(e.band), d.nspectot) + 1) * D.nwavetot);
  for (int q = l + lane; q < zend; q += 32) mcol[q] = 0.0;
  for (int q = (d.core_row + 1) * D.nwavetot + lane; q < kb * D.nwavetot; q += 32) {
    SPEXD_DEVICE_ASSERT(NeedsZeroBlock(q / D.nwavetot, kb, d.core_row, d.nspectot));
    mcol[q] = 0.0;
  }
}

// fw and b of column l (spec §2.8; b goes to x, which the solve overwrites), lane 0.
__device__ __forceinline__ void StoreColumnSums(const RunArgs& a, const RunEntry& e, int l,
                                                int lane, double fsum, double bsum) {
  const int64_t vbase = static_cast<int64_t>(e.slot) * a.dims.ld;
  if (lane == 0) {
    a.slots.fw[vbase + l] = fsum;
    a.slots.x[vbase + l] = bsum;
  }
}

}  // namespace spexd::cuda

#endif  // SPEXD_CUDA_NORMAL_EQUATIONS_COLUMNS_CUH_
