// ExtractJob's part for desi_extract_spectra's -f/--fibermap and --barycentric-correction,
// apart from extract_job.cc's pipeline.
#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/io/fits_file.h"
#include "core/io/preproc.h"
#include "core/plan/barycentric.h"
#include "core/plan/extraction_params.h"
#include "server/jobs/extract_job.h"

namespace spexd::server {

absl::Status ExtractJob::PrepareDesiOptions() {
  const std::string& request_fibermap = request_.image.fibermap_fits;
  const core::Psf& psf = *request_.psf;
  if (!request_fibermap.empty()) {
    // Checked now, by the rule of every frame writer (a streamed frame's is the client):
    // a table with a row for each fibre of the request.
    const core::ExtractionParams& p = request_.plan->params();
    if (absl::Status s = core::CheckFibermapRows(request_fibermap, p.specmin, p.nspec); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("request fibermap_fits: ", s.message()));
    }
  }
  core::ExtractionParams params = request_.plan->params();
  std::vector<std::string> image_cards;
  std::string fibermap = request_fibermap;
  if (params.barycentric_correction) {
    core::PreprocReader* reader = input_.reader();
    if (reader == nullptr) {
      return absl::InvalidArgumentError(
          "barycentric_correction needs the image header (RA, MJD-OBS): a frame in CUDA "
          "regions has none");
    }
    SPEXD_ASSIGN_OR_RETURN(auto headers, reader->Headers());
    image_cards = std::move(headers.first);
    if (fibermap.empty()) fibermap = std::move(headers.second);
  }
  absl::StatusOr<core::BarycentricGrid> bary =
      core::ApplyBarycentricCorrection(*request_.plan, image_cards, fibermap, &params);
  if (!bary.ok()) return absl::InvalidArgumentError(bary.status().message());
  if (bary->factor != 1.0) {
    // The corrected grid is a new request: validated once more, into its own plan.
    absl::StatusOr<core::ExtractionPlan> plan = core::ExtractionPlan::Create(params, psf);
    if (!plan.ok()) return plan.status();
    SPEXD_RETURN_IF_ERROR(CheckGridFitsMessage(plan->nwave(), psf.hsizey(), env_.limits));
    request_.plan = *std::move(plan);
  }
  output_.SetBarycentric(*std::move(bary));
  return absl::OkStatus();
}

}  // namespace spexd::server
