// Results of an extraction: per-bundle arrays as streamed to clients, and the frame
// they are stitched into (extraction-spec §2.11–2.13).
#ifndef SPEXD_CORE_EXTRACTION_RESULT_H_
#define SPEXD_CORE_EXTRACTION_RESULT_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "core/io/plane_buffer.h"

namespace spexd::core {

// Patch outcome counters (spec §2.15 and the "Decisions" NaN retry rule).
struct PatchCounts {
  int64_t extracted = 0;  // patches solved (including retried ones)
  int64_t skipped = 0;    // patches whose window leaves the CCD (outputs stay 0)
  int64_t retried = 0;    // patches that needed the kRetryRegularize retry
  int64_t failed = 0;     // patches that failed even after the retry (outputs 0, BAD2DFIT)
  PatchCounts& operator+=(const PatchCounts& o) {
    extracted += o.extracted;
    skipped += o.skipped;
    retried += o.retried;
    failed += o.failed;
    return *this;
  }
};

struct BundleResult;

// How a backend hands a bundle's RESOLUTION (ExtractionJob::resolution_form). Where a single
// consumer reads it as float32, a backend may narrow it where it was computed (the CUDA
// backend: on the device, downloading half the bytes) into that consumer's byte order.
enum class ResolutionForm {
  kFloat64,        // rdiags
  kFileBytes,      // rdiags_file: big-endian float32, the frame file's bytes
  kStreamFloat32,  // rdiags_f32: little-endian float32, a float32 stream's bytes
};

// Takes back a bundle's arrays when the bundle is destroyed, to lend them to a later one
// (core/frame/bundle_array_pool.h). Called through this interface so that the code that
// lent them (a backend, possibly in the CUDA module) also takes them back.
class BundleArrayRecycler {
 public:
  virtual ~BundleArrayRecycler() = default;
  // Moves the arrays it keeps out of `bundle`; on any thread, never throws.
  virtual void Recycle(BundleResult& bundle) noexcept = 0;
};

// One bundle, stitched from its patch cores (spec §2.12). Flux and ivar are in photons
// per bin until FinalizeBundle converts them to per Angstrom (spec §2.13).
struct BundleResult {
  int bundle = 0;       // bundle index within the plan
  int fiber_begin = 0;  // absolute fibre of row 0
  int nfibers = 0;
  int nwave = 0;
  int ndiag = 0;  // RESOLUTION has 2*ndiag+1 diagonals
  std::vector<double> flux;              // [nfibers][nwave]
  std::vector<double> ivar;              // [nfibers][nwave]
  std::vector<double> rdiags;            // [nfibers][2*ndiag+1][nwave]
  // RESOLUTION as a frame file stores it: big-endian float32 in rdiags' layout, narrowed
  // where the results were computed (exactly as NarrowToBigEndianFloat32), for a job in
  // which nothing but its frame file reads the resolution data; rdiags is then empty.
  // Empty otherwise. A PlaneBuffer, not a vector: a backend may lend a part of a pooled,
  // page-locked block that its device copied the bytes into, and no consumer can free or
  // move that memory but by dropping the buffer.
  PlaneBuffer<char> rdiags_file;         // 4 bytes per value of rdiags
  // The sum of rdiags_file's big-endian 32-bit words, when its producer took it while the
  // bytes were hot (the file's DATASUM then needs no pass of its own over them); kept
  // exact by whatever changes the bytes (MarkPatchFailed).
  std::optional<uint64_t> rdiags_file_word_sum;
  // RESOLUTION as a float32 stream sends it: little-endian float32 in rdiags' layout,
  // narrowed where the results were computed (exactly as NarrowToFloat32), for a job in
  // which nothing but that stream reads the resolution data; rdiags is then empty. Empty
  // otherwise.
  PlaneBuffer<char> rdiags_f32;  // 4 bytes per value of rdiags (as rdiags_file)
  std::vector<double> pixmask_fraction;  // [nfibers][nwave]
  std::vector<double> chi2pix;           // [nfibers][nwave]
  std::vector<uint8_t> failed_bins;      // [nfibers][nwave] 1 where the patch failed
  // Model image of the bundle (only when requested): rows [model_y0, model_y0+model_ny),
  // columns [model_x0, model_x0+model_nx) of the CCD.
  int model_y0 = 0, model_x0 = 0, model_ny = 0, model_nx = 0;
  std::vector<double> model;
  PatchCounts counts;
  // Per patch of the bundle, in plan order (PatchPlan::bundle_first_patch): the Cholesky
  // condition estimate of the solve that was kept (core::CholeskyConditionEstimate), 0 for
  // a skipped or failed patch. Filled by RecordPatchOutcome (patch_outcome.h).
  std::vector<double> patch_condition;
  bool per_angstrom = false;  // FinalizeBundle applied
  // [nfibers] each fibre's chi2pix median (RowMedian), set by FinalizeBundle: the specmask,
  // the health summary and the metrics each read it, so it is selected once per fibre
  // (BundleFiberMedian); empty where a bundle was finalised elsewhere.
  std::vector<double> fiber_chi2pix_median;

  void Allocate(int bundle_index, int fiber0, int nfib, int nw, int nd) {
    bundle = bundle_index;
    fiber_begin = fiber0;
    nfibers = nfib;
    nwave = nw;
    ndiag = nd;
    const std::size_t n = static_cast<std::size_t>(nfib) * nw;
    flux.assign(n, 0.0);
    ivar.assign(n, 0.0);
    pixmask_fraction.assign(n, 0.0);
    chi2pix.assign(n, 0.0);
    failed_bins.assign(n, 0);
    rdiags.assign(n * (2 * nd + 1), 0.0);
  }
  // Where the arrays go when this bundle is destroyed (a backend's BundleArrayPool); null:
  // they are freed. A moved-from bundle has none; a copy shares it (and gives back its
  // own arrays).
  std::shared_ptr<BundleArrayRecycler> recycler;

  BundleResult() = default;
  BundleResult(const BundleResult&) = default;
  BundleResult(BundleResult&&) noexcept = default;
  BundleResult& operator=(const BundleResult&) = default;
  BundleResult& operator=(BundleResult&&) noexcept = default;
  ~BundleResult() {
    if (recycler != nullptr) recycler->Recycle(*this);
  }
};

// desispec specmask bits set by extraction (desispec maskbits.specmask, spec §2.13).
inline constexpr uint32_t kSomeBadPix = 1u << 0;
inline constexpr uint32_t kAllBadPix = 1u << 1;
inline constexpr uint32_t kBad2DFit = 1u << 7;

// Converts photons/bin to photons/Angstrom with dwave = gradient(wave) (spec §2.13), and
// selects each fibre's chi2pix median (fiber_chi2pix_median).
void FinalizeBundle(const std::vector<double>& dwave, BundleResult* bundle);

}  // namespace spexd::core

#endif  // SPEXD_CORE_EXTRACTION_RESULT_H_
