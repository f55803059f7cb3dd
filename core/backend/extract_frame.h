// Runs a backend over a job and assembles the frame: the driver of the local CLI, the
// benchmarks and the tests. The service streams bundles as they finish and so does the
// same steps itself (server/jobs/job_output.cc: FinalizeBundle, then FrameAssembler), which
// keeps a remote result equal to a local one.
#ifndef SPEXD_CORE_EXTRACT_FRAME_H_
#define SPEXD_CORE_EXTRACT_FRAME_H_

#include <functional>

#include "absl/status/statusor.h"
#include "core/backend/backend.h"
#include "core/frame/frame.h"

namespace spexd::core {

// Extracts the job's bundles with `backend`, converts each to per-Angstrom units
// (FinalizeBundle), calls `on_bundle` (if set) and stitches the frame.
absl::StatusOr<Frame> ExtractFrame(Backend& backend, const ExtractionJob& job,
                                   const std::function<void(const BundleResult&)>& on_bundle = {},
                                   ExtractionSummary* summary = nullptr);

}  // namespace spexd::core

#endif  // SPEXD_CORE_EXTRACT_FRAME_H_
