// Agreement of two extractions of one bundle (shadow parity): what was served
// against the CPU reference backend's result for the same geometry, image and compat
// setting, with the extraction spec's parity bar.
#ifndef SPEXD_CORE_BUNDLE_PARITY_H_
#define SPEXD_CORE_BUNDLE_PARITY_H_

#include <cstdint>
#include <string>

#include "core/frame/extraction_result.h"
#include "core/plan/patch_plan.h"

namespace spexd::core {

// The spec's parity bar ("Decisions": CPU and CUDA backends agree with each other to the
// bar they each meet against gpu_specter). The 1e-10 bars are about 1e3 x the float64
// spread measured between the two backends (flux 3e-13, ivar 1e-12, R 8e-14: docs/design.md), so a healthy GPU never
// trips them, while a wrong result of any scientific consequence (1e-6 of a spectrum's
// peak, say) exceeds them by 1e4.
struct ParityTolerances {
  double flux = 1e-10;        // |Δflux| / max|flux| of the spectrum
  double ivar = 1e-10;        // |Δivar| / max ivar of the spectrum
  double resolution = 1e-10;  // |ΔR| absolute (R's rows sum to 1)
  double pixmask = 1e-12;     // |Δpixmask_fraction| absolute
  double chi2pix = 1e-8;      // |Δchi2pix| / max(|chi2pix|, 1)
  // Ill-conditioned patches (spec "Decisions": next to large fully masked areas or cut
  // at the CCD's top edge) are where float64 rounding alone moves the answer by ~1e-6:
  // the CPU backend's own outputs move that much when ivar changes by 2 ulp. Their bins
  // get `envelope` on the same scales (flux, ivar, R), as tests/cuda/host/backend_parity.h
  // judges them (kIllConditionedBar); chi2pix is not compared there. A patch counts as
  // ill-conditioned when either side's condition estimate is above `ill_conditioned`:
  // float64 rounding (1.1e-16) amplified by the condition reaches the 1e-10 bar near 1e6.
  // Clean patches sit far below (a simulated r frame's worst is ~600); bins with no
  // weight (fully masked) regularised to a tiny diagonal (spec §2.8) climb far above.
  double ill_conditioned = 1e6;
  double envelope = 1e-4;
};

struct ParityReport {
  bool drift = false;
  // Worst deviations on the scales above (over the bins under the 1e-10 bar).
  double flux = 0, ivar = 0, resolution = 0, pixmask = 0, chi2pix = 0;
  int64_t mask_mismatches = 0;  // bins whose LocalMaskBits differ
  int64_t envelope_bins = 0;    // bins compared with the ill-conditioned envelope
  int64_t envelope_violations = 0;
  // The largest of flux, ivar and resolution: the number the histogram shows.
  double worst() const;
  // Where the first failing comparison was, for the log ("" when none failed).
  std::string detail;
};

// Compares `served` with `reference` (both per Angstrom, or both per bin; same bundle of
// `plan`). A shape mismatch is a drift.
ParityReport CompareBundles(const PatchPlan& plan, const BundleResult& served,
                            const BundleResult& reference, const ParityTolerances& tol);

// Test-only fault: adds 1e-6 x max|flux| of each spectrum of `bundle` to the
// bin at its maximum, a wrong result that the parity check must flag. Used by the
// SPEXD_TEST_CPU_FAULTS and SPEXD_TEST_CUDA_FAULTS switches `perturb_bundle_flux=B`.
void PerturbBundleFlux(BundleResult* bundle, double relative = 1e-6);

}  // namespace spexd::core

#endif  // SPEXD_CORE_BUNDLE_PARITY_H_
