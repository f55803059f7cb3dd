// Patch planning shared by every backend: bundles -> sub-bundles -> patches, spectral
// padding, pixel windows with the exact float64 trimming, keep ranges and edge handling
// (extraction-spec §2.4–2.6). The plan is plain data (flat arrays of trivially copyable
// descriptors) so that the CUDA backend can upload it as is.
#ifndef SPEXD_CORE_PATCH_PLAN_H_
#define SPEXD_CORE_PATCH_PLAN_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "core/plan/extraction_params.h"
#include "core/plan/spots.h"  // StampCorner

namespace spexd::core {

class Psf;

// One patch. All indices are 0-based; "fullwave" indices refer to PatchPlan::fullwave.
struct PatchDesc {
  int32_t bundle;     // bundle index within the plan (0 = the bundle at params.specmin)
  int32_t fiber0;     // absolute fibre of patch-local spectrum 0
  int32_t nspectot;   // spectra in the patch (core + padding neighbours)
  int32_t core_row;   // patch-local index of the first core spectrum (0 or 1)
  int32_t out_row;    // output row (relative to params.specmin) of the first core spectrum
  int32_t wave0;      // fullwave index of patch wavelength 0
  int32_t out_col;    // output column of the first core wavelength
  int32_t nkeep;      // core wavelengths kept (< nwavestep only for the last patch)
  int32_t y0, ny;     // window rows [y0, y0+ny) (ny truncated at the top edge, compat gpu)
  int32_t x0, nx;     // window columns [x0, x0+nx)
  int32_t n;          // unknowns = nspectot * nwavetot
  int32_t skipped;    // kSkip* reason, 0 when extracted
};

inline constexpr int32_t kSkipNone = 0;
inline constexpr int32_t kSkipBottomEdge = 1;  // y0 < 0 (both paths)
inline constexpr int32_t kSkipTopEdge = 2;     // y0 + ny > H (compat cpu only)
inline constexpr int32_t kSkipXEdge = 3;       // window leaves the CCD in x (not in the
                                               // reference, which reads out of bounds)

// Model canvas of one bundle: the union of its extracted patch windows (spec §2.12);
// empty (ny = nx = 0) when every patch of the bundle is skipped.
struct BundleCanvas {
  int32_t y0, ny, x0, nx;
};

struct PatchPlan {
  // Geometry constants.
  int specmin = 0, nspec = 0, bundlesize = 0, nbundles = 0, nper = 0;
  int nwave = 0, nwavestep = 0, wavepad_eff = 0, nwavetot = 0;
  int ndiag = 0;            // PSF HSIZEY (spec §2.2)
  int stamp_ny = 0, stamp_nx = 0;
  int image_height = 0, image_width = 0;
  std::vector<double> wave;       // output grid
  std::vector<double> fullwave;   // padded grid (spec §2.3)
  // Corners of every stamp: [nspec][fullwave.size()], fibres specmin..specmin+nspec-1.
  std::vector<int32_t> xc, yc;
  // Patches ordered by bundle, sub-bundle, wavelength.
  std::vector<PatchDesc> patches;
  std::vector<int32_t> bundle_first_patch;  // [nbundles + 1] offsets into patches
  std::vector<BundleCanvas> bundle_canvas;  // [nbundles]
  // Per patch: the largest |s - s'| of two patch spectra with any pair of overlapping
  // stamps (CoupledBand). Blocks (s, s') of A^T N A further apart are exactly zero, and so
  // are those of its Cholesky factor (no fill outside a band).
  std::vector<int32_t> coupled_band;        // [patches]
  // Sizes for workspaces.
  int max_n = 0, max_ny = 0, max_nx = 0, max_npix = 0;

  int32_t corner_x(int fiber, int w) const {
    return xc[static_cast<std::size_t>(fiber - specmin) * fullwave.size() + w];
  }
  int32_t corner_y(int fiber, int w) const {
    return yc[static_cast<std::size_t>(fiber - specmin) * fullwave.size() + w];
  }
  int bundle_fiber_begin(int b) const { return specmin + b * bundlesize; }
};

// The band of patch `d` from the stamp corners: spectra s < s' are coupled when a stamp of
// one overlaps a stamp of the other over the patch wavelengths (|dx| < stamp_nx and
// |dy| < stamp_ny, the test of the normal equations, spec §6); pairs are tried only
// where the corner hulls of the two spectra come that close.
int32_t CoupledBand(const PatchPlan& plan, const PatchDesc& d);

// Builds the plan for extracting `request` (validated, with its grids) from an image of
// height x width through `psf`, the PSF it was validated against. Pure function; cheap
// (needs only trace positions). INVALID_ARGUMENT for an empty image or a trace that
// leaves the PSF's sane range on the padded grid.
absl::StatusOr<PatchPlan> BuildPatchPlan(const ExtractionPlan& request, const Psf& psf,
                                         int image_height, int image_width);
// The same from raw parameters, validated here (ExtractionPlan::Create): for tools and
// tests that start from parameters rather than from a validated request.
absl::StatusOr<PatchPlan> BuildPatchPlan(const ExtractionParams& params, const Psf& psf,
                                         int image_height, int image_width);

}  // namespace spexd::core

#endif  // SPEXD_CORE_PATCH_PLAN_H_
