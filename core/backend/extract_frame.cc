#include "core/backend/extract_frame.h"

#include "core/base/status_macros.h"
#include "core/frame/usable_data.h"

namespace spexd::core {

absl::StatusOr<Frame> ExtractFrame(Backend& backend, const ExtractionJob& job,
                                   const std::function<void(const BundleResult&)>& on_bundle,
                                   ExtractionSummary* summary) {
  if (job.geometry == nullptr) return absl::InvalidArgumentError("job has no geometry");
  if (job.image != nullptr) SPEXD_RETURN_IF_ERROR(CheckImageHasValidPixel(*job.image));
  FrameAssembler assembler(*job.geometry, job.want_model);
  const std::vector<double>& dwave = job.geometry->dwave();
  int64_t usable_bins = 0;
  auto sink = [&](BundleResult&& bundle) -> absl::Status {
    FinalizeBundle(dwave, &bundle);
    usable_bins += CountUsableBins(bundle);
    if (on_bundle) on_bundle(bundle);
    return assembler.Add(bundle);
  };
  SPEXD_ASSIGN_OR_RETURN(ExtractionSummary s, backend.Extract(job, sink));
  if (summary != nullptr) *summary = s;
  SPEXD_RETURN_IF_ERROR(CheckUsableResult(usable_bins, s.counts));
  return assembler.Finish();
}

}  // namespace spexd::core
