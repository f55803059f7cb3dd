// Conversions between spexd.v1 messages and core types. No gRPC here: only messages.
#ifndef SPEXD_SERVER_PROTO_CONVERT_H_
#define SPEXD_SERVER_PROTO_CONVERT_H_

#include <cstddef>
#include <vector>

#include "absl/status/statusor.h"
#include "core/backend.h"
#include "core/extraction_params.h"
#include "core/extraction_result.h"
#include "core/patch_plan.h"
#include "spexd/v1/spexd.pb.h"

namespace spexd::server {

// Request parameters with desi_extract_spectra's defaults for unset fields. Only the
// wire-level rules are checked here (all three of wmin/wmax/dw or none); the values are
// validated against the PSF by core::ValidateParams when the geometry is built.
absl::StatusOr<core::ExtractionParams> ParamsFromProto(const v1::ExtractionParams& proto,
                                                       bool want_model);

// Plan bundle indices selected by ExtractHeader.bundles / .fibers (ascending, unique).
// Empty input selects every bundle (returns an empty vector, core's "all").
// INVALID_ARGUMENT for indices or fibres outside the plan, or both lists set.
absl::StatusOr<std::vector<int>> SelectBundles(const v1::ExtractHeader& header,
                                               const core::PatchPlan& plan);

// Splits a finalised bundle into BundleData parts of at most `max_part_bytes` of array
// payload each (whole fibres per part, at least one). Counts and seconds go on the
// last part.
std::vector<v1::BundleData> BundleToParts(const core::BundleResult& bundle, double seconds,
                                          std::size_t max_part_bytes);

// Payload bytes one fibre contributes to a BundleData message.
std::size_t BundleBytesPerFiber(int nwave, int ndiag);

void CountsToProto(const core::PatchCounts& counts, v1::PatchCounts* out);

}  // namespace spexd::server

#endif  // SPEXD_SERVER_PROTO_CONVERT_H_
