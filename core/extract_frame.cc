#include "core/extract_frame.h"

#include "core/status_macros.h"

namespace spexd::core {

absl::StatusOr<Frame> ExtractFrame(Backend& backend, const ExtractionJob& job,
                                   const std::function<void(const BundleResult&)>& on_bundle,
                                   ExtractionSummary* summary) {
  if (job.geometry == nullptr) return absl::InvalidArgumentError("job has no geometry");
  FrameAssembler assembler(*job.geometry, job.want_model);
  const std::vector<double>& dwave = job.geometry->dwave();
  auto sink = [&](BundleResult&& bundle) -> absl::Status {
    FinalizeBundle(dwave, &bundle);
    if (on_bundle) on_bundle(bundle);
    return assembler.Add(bundle);
  };
  SPEXD_ASSIGN_OR_RETURN(ExtractionSummary s, backend.Extract(job, sink));
  if (summary != nullptr) *summary = s;
  return assembler.Finish();
}

}  // namespace spexd::core
