// Plain-data types shared by the host orchestration and the kernels of the CUDA backend.
// Trivially copyable, no CUDA headers: the launcher headers and batch_layout.cc use them too.
#ifndef SPEXD_CUDA_DEVICE_TYPES_H_
#define SPEXD_CUDA_DEVICE_TYPES_H_

#include <cstdint>

namespace spexd::cuda {

// One patch of a run: which workspace slot holds its matrices and where its outputs go.
struct RunEntry {
  int32_t slot;        // workspace slot (index into the per-slot buffers)
  int32_t patch;       // index into PatchPlan::patches (uploaded as is)
  int32_t bundle_pos;  // bundle position within the batch (output arrays)
  int32_t band;        // core::PatchPlan::coupled_band of the patch
  double regularize;   // job regularize, or core::kRetryRegularize for the retry (§2.15)
};

// Geometry constants of the plan, passed by value to every kernel.
struct PlanDims {
  int32_t nwavetot;     // wavelengths per patch spectrum (74)
  int32_t nwavestep;    // core wavelengths per patch (50)
  int32_t wavepad_eff;  // padding on each side (12)
  int32_t nper;         // core spectra per patch (5)
  int32_t ndiag;        // resolution half band (5)
  int32_t bundlesize;   // fibres per bundle (25)
  int32_t nwave;        // output wavelengths
  int32_t nfull;        // fullwave length
  int32_t specmin;      // first fibre of the plan
  int32_t stamp_ny, stamp_nx;
  int32_t image_height, image_width;
  int32_t ld;           // leading dimension of the slot matrices (= max_n)
  int32_t max_npix;     // per-slot pixel buffer length
  int32_t compat_cpu;   // 1 for Compat::kCpu (spec §2.17)
};

// Per-slot status bits (a failed patch is a flag, never a request error: docs/design.md).
inline constexpr int32_t kStatusNotSpd = 1;         // factor info != 0
inline constexpr int32_t kStatusSolveNonFinite = 2; // x not finite
inline constexpr int32_t kStatusOutputNonFinite = 4;
inline constexpr int32_t kStatusEigenFailed = 8;
// Model flags of a slot (spec §2.12: all-zero or non-finite patch models are skipped).
inline constexpr int32_t kModelNonZero = 1;
inline constexpr int32_t kModelNonFinite = 2;

// Per-bundle model canvas placement (union of the bundle's extracted patch windows).
struct CanvasDesc {
  int32_t y0, x0, ny, nx;
  int32_t list_begin, list_end;  // range in the canvas patch list (patch order)
};
// One entry of a canvas patch list: slot of an extracted patch, or -1 for a skipped one.
struct CanvasPatch {
  int32_t slot;
  int32_t patch;
};

// Device mirror of core::PatchDesc (same field order and types; static_asserts in
// geometry_state.cc check the layout, so the plan is uploaded byte for byte).
struct DevicePatch {
  int32_t bundle, fiber0, nspectot, core_row, out_row, wave0, out_col, nkeep;
  int32_t y0, ny, x0, nx, n, skipped;
};

}  // namespace spexd::cuda

#endif  // SPEXD_CUDA_DEVICE_TYPES_H_
