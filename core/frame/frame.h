// A whole extracted frame: bundles stitched in fibre order, fluxes per Angstrom and the
// desispec specmask (extraction-spec §2.12–2.13).
#ifndef SPEXD_CORE_FRAME_H_
#define SPEXD_CORE_FRAME_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "core/base/task_pool.h"
#include "core/frame/extraction_result.h"
#include "core/io/preproc.h"
#include "core/plan/geometry.h"

namespace spexd::core {

struct Frame {
  int specmin = 0;  // fibre of row 0
  int nspec = 0;
  int nwave = 0;
  int ndiag = 0;
  std::vector<double> wave;              // [nwave]
  std::vector<double> flux;              // [nspec][nwave] photons/Angstrom
  std::vector<double> ivar;              // [nspec][nwave]
  std::vector<double> rdiags;            // [nspec][2*ndiag+1][nwave]
  std::vector<double> pixmask_fraction;  // [nspec][nwave]
  std::vector<double> chi2pix;           // [nspec][nwave]
  std::vector<uint32_t> mask;            // [nspec][nwave] specmask bits
  std::vector<uint8_t> failed_bins;      // [nspec][nwave]
  int model_height = 0, model_width = 0;
  std::vector<double> model;             // [H][W] when requested
  PatchCounts counts;
};

class FrameArrayPool;

// Collects finalised bundles into a Frame. Rows are the fibres of the bundles added, in
// bundle order (all bundles of the plan for a whole-frame extraction).
class FrameAssembler {
 public:
  // What the frame keeps of each bundle. kMaskInputs keeps only what the specmask needs
  // (chi2pix, pixmask_fraction, failed bins): a CUDA output region gets flux, ivar and
  // resolution straight from the bundles, and copying them (~130 MB of fresh pages for
  // an r frame) would only cost the hand-off time.
  // kSpectra keeps those and flux and ivar, not the resolution (11x the flux): what a
  // float32 stream's mask, scores and health need from the server's frame.
  enum class Keep { kAll, kSpectra, kMaskInputs };
  // `arrays` (may be null): where the per-bin arrays come from when it has a set idle
  // (a frame's, recycled), instead of new memory.
  FrameAssembler(const Geometry& geometry, bool want_model, Keep keep = Keep::kAll,
                 FrameArrayPool* arrays = nullptr);
  // Makes the pages of the arrays the frame will fill present (core/base/prefault.h), on
  // `pool` when given: done ahead (spexd: on the loader thread), Add's copies then run at
  // memory speed instead of one page fault per 4 KiB on the streaming task.
  void Prefault(TaskPool* pool);
  // `bundle` must have been through FinalizeBundle; bundles arrive in ascending order.
  absl::Status Add(const BundleResult& bundle);
  // Computes the specmask (with `policy`; on `pool` when given, ComputeSpecMask) and
  // returns the frame.
  Frame Finish(MaskPolicy policy = MaskPolicy::kDesispec, TaskPool* pool = nullptr);

 private:
  const Geometry& geometry_;
  const Keep keep_;
  Frame frame_;
  int last_bundle_ = -1;
  // Each fibre's chi2pix median, from Add: the specmask's largest part, done as the
  // bundles come rather than after the last one.
  std::vector<double> fiber_median_;
  std::vector<double> row_;  // Add's copy of a fibre's chi2pix
};

// desispec specmask (spec §2.13): SOMEBADPIX where pixmask_fraction > 0.5, ALLBADPIX where
// it is 1, BAD2DFIT where chi2pix exceeds 5x both its fibre-median and its
// wavelength-median; bins of failed patches get BAD2DFIT too (spexd addition).
// ALLBADPIX: spexd flags pixmask_fraction >= 1 - 1e-12 (a fully masked bin whose stamp
// sums to 1 only up to rounding stays flagged); MaskPolicy::kDesispecExact uses
// desispec's == 1.0, which depends on the summation order (docs/python-client.md).
// The medians and the mask rows are spread over `pool` (null: the calling thread); the
// result does not depend on it: every median sees its values in the same order.
// `fiber_medians`, when given ([nspec]), are each fibre's chi2pix median, computed as
// this function would (FrameAssembler has them from its bundles before the frame ends).
void ComputeSpecMask(Frame* frame, MaskPolicy policy = MaskPolicy::kDesispec,
                     TaskPool* pool = nullptr, const std::vector<double>* fiber_medians = nullptr);

// The specmask bits of one bin that need nothing frame-wide (spec §2.13): SOMEBADPIX and
// ALLBADPIX from its pixmask_fraction, BAD2DFIT when its patch failed. ComputeSpecMask
// adds the chi2pix rule, which needs the frame's medians. `policy` picks the ALLBADPIX
// threshold as ComputeSpecMask does.
uint32_t LocalMaskBits(double pixmask_fraction, bool failed,
                       MaskPolicy policy = MaskPolicy::kDesispec);

// The wavelength half of the chi2pix rule (spec §2.13): a bin is BAD2DFIT when its chi2pix
// exceeds 5x its fibre's median and 5x its wavelength's median over the fibres. The
// second median decides only where some bin exceeds its fibre's limit, so it is computed
// there (a few wavelengths on a healthy frame) and left 0 elsewhere. `chi2` is [ns][nw],
// `fiber_median` [ns]; on `pool` (may be null) in blocks of wavelengths.
std::vector<double> WaveMediansWhereDeciding(const double* chi2, int ns, int nw,
                                             const std::vector<double>& fiber_median,
                                             TaskPool* pool = nullptr);

// numpy.median of a copy of the values (mean of the two middle ones for even sizes; NaN
// when a value is NaN).
double Median(std::vector<double> values);
// The same over [begin, end), reordering it (no copy); 0 for an empty range.
double MedianInPlace(double* begin, double* end);
// The median of the `n` values at `row`, left as they are: copied into `scratch` (reused
// from call to call) for MedianInPlace. A fibre's chi2pix median, as the specmask takes it.
double RowMedian(const double* row, std::size_t n, std::vector<double>* scratch);
// Fibre f's chi2pix median: the one FinalizeBundle selected, or RowMedian where the bundle
// has none.
double BundleFiberMedian(const BundleResult& bundle, int f, std::vector<double>* scratch);

}  // namespace spexd::core

#endif  // SPEXD_CORE_FRAME_H_
