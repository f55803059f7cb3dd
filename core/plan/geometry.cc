#include "core/plan/geometry.h"

#include "absl/strings/str_format.h"
#include "core/base/status_macros.h"
#include "core/plan/internal/wavelength_grid.h"

namespace spexd::core {

std::string Geometry::Key(const ExtractionParams& p, int image_height, int image_width) {
  // %a prints doubles exactly, so keys differ whenever the float64 arithmetic could.
  return absl::StrFormat("w%d:%a,%a,%a s%d+%d b%d/%d n%d p%d,%a,%a c%s i%dx%d",
                         p.has_wavelength ? 1 : 0, p.wmin, p.wmax, p.dw, p.specmin, p.nspec,
                         p.bundlesize, p.nsubbundles, p.nwavestep, p.wavepad, p.wavepad_frac,
                         p.pixpad_frac, CompatName(p.compat), image_height, image_width);
}

absl::StatusOr<std::shared_ptr<const Geometry>> Geometry::Create(
    std::shared_ptr<const Psf> psf, const ExtractionParams& params, int image_height,
    int image_width, bool cache_spots) {
  SPEXD_ASSIGN_OR_RETURN(ExtractionPlan request, ExtractionPlan::Create(params, *psf));
  return Create(std::move(psf), request, image_height, image_width, cache_spots);
}

absl::StatusOr<std::shared_ptr<const Geometry>> Geometry::Create(
    std::shared_ptr<const Psf> psf, const ExtractionPlan& request, int image_height,
    int image_width, bool cache_spots) {
  const ExtractionParams& params = request.params();
  // The PSF's trace coordinates are pixels of a CCD of NPIX_Y x NPIX_X: a larger image
  // cannot belong to it. (A smaller one may be a cut-out starting at pixel 0.)
  if (psf->npix_x() > 0 && psf->npix_y() > 0 &&
      (image_height > psf->npix_y() || image_width > psf->npix_x())) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "image is %d x %d pixels but PSF %s was fitted on a %d x %d CCD", image_height,
        image_width, psf->source_name(), psf->npix_y(), psf->npix_x()));
  }
  std::shared_ptr<Geometry> g(new Geometry(request));
  SPEXD_ASSIGN_OR_RETURN(g->plan_, BuildPatchPlan(request, *psf, image_height, image_width));
  bool any_on_ccd = false;
  for (const PatchDesc& d : g->plan_.patches) any_on_ccd |= d.skipped == kSkipNone;
  if (!any_on_ccd) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "no patch of fibres [%d, %d) lies on the %d x %d image: the traces of PSF %s are "
        "off this image (wrong PSF or camera?)",
        params.specmin, params.specmin + params.nspec, image_height, image_width,
        psf->source_name()));
  }
  g->psf_ = std::move(psf);
  g->dwave_ = GridGradient(g->plan_.wave);
  g->cache_spots_ = cache_spots;
  {
    absl::MutexLock lock(&g->mu_);
    g->spots_.resize(g->plan_.nbundles);
  }
  return std::shared_ptr<const Geometry>(std::move(g));
}

std::shared_ptr<const Spots> Geometry::BundleSpots(int b, TaskPool* pool) const {
  {
    absl::MutexLock lock(&mu_);
    if (spots_[b] != nullptr) return spots_[b];
  }
  // Evaluate outside the lock; two racing callers compute the same values.
  auto spots = std::make_shared<const Spots>(
      EvaluateSpots(*psf_, plan_.bundle_fiber_begin(b), plan_.bundlesize, plan_.fullwave, pool));
  if (cache_spots_) {
    absl::MutexLock lock(&mu_);
    if (spots_[b] == nullptr) spots_[b] = spots;
    return spots_[b];
  }
  return spots;
}

bool Geometry::HasSpots(int b) const {
  absl::MutexLock lock(&mu_);
  return b >= 0 && static_cast<std::size_t>(b) < spots_.size() && spots_[b] != nullptr;
}

std::size_t Geometry::MemoryBytes() const {
  std::size_t bytes = plan_.patches.size() * sizeof(PatchDesc) +
                      (plan_.xc.size() + plan_.yc.size()) * sizeof(int32_t) +
                      (plan_.fullwave.size() + plan_.wave.size()) * sizeof(double);
  absl::MutexLock lock(&mu_);
  for (const auto& s : spots_) {
    if (s != nullptr) bytes += s->MemoryBytes();
  }
  return bytes;
}

std::size_t Geometry::SpotsBytes(const ExtractionPlan& request, const Psf& psf) {
  return Spots::Bytes(static_cast<std::size_t>(request.params().nspec) * request.fullwave().size(),
                      2 * psf.hsizey() + 1, 2 * psf.hsizex() + 1);
}

}  // namespace spexd::core
