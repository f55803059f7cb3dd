// Argument bundles of the extraction kernels (plain C++: no device code). Pointers are
// device pointers; layouts are documented per field.
#ifndef SPEXD_CUDA_KERNEL_ARGS_H_
#define SPEXD_CUDA_KERNEL_ARGS_H_

#include <cstddef>
#include <cstdint>

#include "cuda/kernels/device_types.h"
#include "core/numerics/host_device.h"

namespace spexd::cuda {

// Frame-level inputs: the image, the uploaded plan and the warm spots.
struct FrameInputs {
  const double* image;         // [H][W]
  const double* ivar;          // [H][W]
  const DevicePatch* patches;  // plan patches
  const int32_t* xc;           // plan corners [nspec][nfull]
  const int32_t* yc;
  const double* spots;         // [nspec][nfull][stamp_ny][stamp_nx]
};

// Per-slot buffers of one workspace set. Matrices are column-major with leading dimension
// PlanDims::ld; slot s starts at s * ld * ld.
struct SlotBuffers {
  double* m;        // [slots][ld*ld]  M, then L, then L^-1 in place (core columns)
  double* x;        // [slots][ld]     b, then the solution x
  double* fw;       // [slots][ld]     fluxweight
  double* t;        // [slots][t_stride] GEMM scratch
  double* c;        // [slots][nper][nt*nt] C's core diagonal blocks, then eigenvectors
  double* fmodel;   // [slots][ld]     core flux used by the model (spec §2.11)
  // [slots][max_npix][2]: a pixel's chi2 where weighted (0 elsewhere), and its code:
  // 1 weighted, + 2 where its ivar is 0 (the column sums read one 16-byte pair a pixel).
  double* pix;
  double* model;    // [slots][max_npix] patch model (only when requested)
  int32_t* status;  // [slots] kStatus* bits
  int32_t* mflags;  // [slots] kModel* bits
  int32_t* info;    // [slots] the tiled factor's info, indexed by run entry
  int32_t* eig_info;  // [slots*nper] eigensolver info (library path), by run entry
  double* cond;     // [slots] Cholesky condition estimate (core::CholeskyConditionEstimate)
  double* ldiag;    // [slots][ld] L's diagonal (the leaves overwrite M's copy: RunArgs)
  int64_t t_stride;
  int64_t p_base;  // RunArgs::panel_p: the P_j in a slot's scratch (batch_layout.h's PanelPOffset)
  int p_band;
};

// Batch outputs: [bundle_pos][bundlesize][nwave]; rdiag [bundle_pos][bundlesize][2nd+1][nwave].
struct OutputBuffers {
  double* flux;
  double* ivar;
  double* rdiag;
  double* pixmask;
  double* chi2;
};

// The QL iterations of the tridiagonal eigensolver (cuda/kernels/tridiag_decorrelation.cu), by
// block b = run entry * nper + core spectrum. One set for the whole workspace: runs are
// serialised on the compute stream.
struct QlBuffers {
  double* d;        // [blocks][nt] diagonal of T, then the eigenvalues
  double* e;        // [blocks][nt] subdiagonal of T (destroyed)
  double* d0;       // [blocks][nt] T as reduced, for the in-block fallback
  double* e0;       // [blocks][nt]
  double* c;        // [blocks][QlRotationCap] rotation cosines in order of application
  double* s;        // [blocks][QlRotationCap] sines
  int32_t* sweeps;  // [blocks][2 * QlSweepCap] (lo, hi) of each sweep
};

// Capacity of a block's log: the mean r-frame block needs about 130 sweeps of about
// nt / 2 rotations; a block that needs more falls back to running its QL
// inside the decorrelation kernel.
SPEXD_HD int QlRotationCap(int nt) { return 96 * nt; }
SPEXD_HD int QlSweepCap(int nt) { return 8 * nt; }
// Device bytes of a block's QlBuffers: d, e, d0, e0, and with `log` the rotation log (c, s,
// sweeps: ~118 KB a block at nt = 74, which only the rotate path writes).
inline std::size_t QlBytesPerBlock(int nt, bool log) {
  const std::size_t values = sizeof(double) * 4 * static_cast<std::size_t>(nt);
  if (!log) return values;
  return values + sizeof(double) * 2 * static_cast<std::size_t>(QlRotationCap(nt)) +
         sizeof(int32_t) * 2 * static_cast<std::size_t>(QlSweepCap(nt));
}

struct RunArgs {
  PlanDims dims;
  FrameInputs in;
  SlotBuffers slots;
  QlBuffers ql;
  OutputBuffers out;
  const RunEntry* entries;  // [count]
  int count;
  double psferr;
  int want_model;
  // (The tiled factor, the blocked solve and the trailing-first inversion read nothing of M
  // more than max(band, 1) blocks below the diagonal, so the normal equations leave those
  // blocks unwritten; the factor writes each leaf X_kk = L_kk^{-1} that the trailing-first
  // inversion needs over L_kk on M's diagonal (kernel_common.cuh's LeafOf), and L's diagonal
  // to SlotBuffers::ldiag; it also does the blocked solve's forward pass, step k at the end
  // of its launch k, blocked_forward.cuh.)
  // 1: the DMMA panel kernel of step j also leaves the trailing-first inversion's
  // P_j = L[j+1:j+1+b, j] X_jj (batch_layout.h's NeedsPanelP), so trtri has no gemm 1.
  int panel_p;
  // 1: the tiled factor brings its diagonal block up to date itself, M_kk -= F F^T with
  // F = L[k, BandFirst(k):k] (tiled_cholesky.cu, on the tensor cores where nt <= 80), and
  // the layout's chol_update has no row block k (LayoutChoices::diag_update_in_factor).
  int diag_update;
  // 1: the DMMA panel kernel of step k brings its rows up to date itself before the solve,
  // M[i, k] -= L[i, j] L[k, j]^T over the band's inner blocks j (tiled_panel.cu), and the
  // layout's chol_update has no row block below k (LayoutChoices::panel_update).
  int panel_update;
};

}  // namespace spexd::cuda

#endif  // SPEXD_CUDA_KERNEL_ARGS_H_
