// Warm, immutable state of one (PSF, wavelength grid, patch geometry, image shape):
// the patch plan, and the spots of each bundle evaluated once and kept.
#ifndef SPEXD_CORE_GEOMETRY_H_
#define SPEXD_CORE_GEOMETRY_H_

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "core/plan/extraction_params.h"
#include "core/plan/patch_plan.h"
#include "core/io/psf.h"
#include "core/plan/spots.h"

namespace spexd::core {

class Geometry {
 public:
  // Plans every patch of `request` (validated against `psf`) on an image of that shape.
  // `cache_spots` keeps each bundle's spots after first use (about 90 MB per bundle for
  // the r camera). INVALID_ARGUMENT when the image is larger than the PSF's CCD or no
  // patch lies on it.
  static absl::StatusOr<std::shared_ptr<const Geometry>> Create(
      std::shared_ptr<const Psf> psf, const ExtractionPlan& request, int image_height,
      int image_width, bool cache_spots = true);
  // The same from raw parameters, validated here (ExtractionPlan::Create): for tools and
  // tests that start from parameters rather than from a validated request.
  static absl::StatusOr<std::shared_ptr<const Geometry>> Create(
      std::shared_ptr<const Psf> psf, const ExtractionParams& params, int image_height,
      int image_width, bool cache_spots = true);

  // Host bytes that the spots of every bundle would hold if kept (cache_spots): all
  // nspec fibres on the request's padded grid (spec §2.3).
  static std::size_t SpotsBytes(const ExtractionPlan& request, const Psf& psf);

  // The fields of `params` that shape the geometry, as a string usable as a cache key
  // (together with the PSF identity and the image shape).
  static std::string Key(const ExtractionParams& params, int image_height, int image_width);

  const Psf& psf() const { return *psf_; }
  const std::shared_ptr<const Psf>& psf_ptr() const { return psf_; }
  const PatchPlan& plan() const { return plan_; }
  const ExtractionParams& params() const { return request_.params(); }
  // The validated request the geometry was planned for. A cached geometry serves every
  // request with the same Key: only those fields (and the grids) are theirs too.
  const ExtractionPlan& request() const { return request_; }
  // numpy.gradient of the output grid, for photons/bin -> photons/Angstrom.
  const std::vector<double>& dwave() const { return dwave_; }

  // Spots of bundle `b` for all fullwave wavelengths. Thread-safe; computed on first use,
  // on the caller and `pool`'s threads (EvaluateSpots).
  std::shared_ptr<const Spots> BundleSpots(int b, TaskPool* pool = nullptr) const;
  // Whether BundleSpots keeps what it computed (so holding several bundles' spots at once
  // costs no more memory than the cache will hold anyway).
  bool caches_spots() const { return cache_spots_; }
  // Whether bundle b's spots are already computed and kept (BundleSpots returns at once).
  bool HasSpots(int b) const;
  // Host bytes held (plan + cached spots).
  std::size_t MemoryBytes() const;

 private:
  explicit Geometry(ExtractionPlan request) : request_(std::move(request)) {}
  std::shared_ptr<const Psf> psf_;
  PatchPlan plan_;
  ExtractionPlan request_;
  std::vector<double> dwave_;
  bool cache_spots_ = true;
  mutable absl::Mutex mu_;
  mutable std::vector<std::shared_ptr<const Spots>> spots_ ABSL_GUARDED_BY(mu_);
};

}  // namespace spexd::core

#endif  // SPEXD_CORE_GEOMETRY_H_
