// An ExtractHeader turned into the typed request a job runs (JobRequest,
// server/jobs/job_types.h), once, on the reaction thread when the header arrives, before
// any upload is accepted, any file opened or any geometry built, so that a hostile header
// costs nothing. Every wire-level rule is checked here and nowhere downstream: jobs never
// see the message. The parameter rules themselves live in core (ExtractionPlan,
// EstimateMemory) and are shared with the local CLI.
#ifndef SPEXD_SERVER_RPC_REQUEST_DECODE_H_
#define SPEXD_SERVER_RPC_REQUEST_DECODE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/io/psf.h"
#include "core/plan/extraction_params.h"
#include "server/jobs/job_types.h"
#include "server/platform/data_roots.h"
#include "spexd/v1/spexd.pb.h"

namespace spexd::server {

// Bounds of the header's free-form fields (documented in docs/service.md).
struct HeaderLimits {
  static constexpr std::size_t kMaxPsfIdChars = 128;    // ids are 64 hex digits
  static constexpr std::size_t kMaxPathChars = 4095;    // PATH_MAX - 1
  static constexpr std::size_t kMaxPathComponent = 255; // NAME_MAX
  static constexpr std::size_t kMaxNameChars = 1024;    // in_img_name, in_psf_name
  static constexpr std::size_t kMaxTagChars = 256;      // client_tag
  static constexpr int kMaxSelections = 100000;         // bundles or fibers entries
};

// Checks of the header alone, before the PSF is looked up: string lengths (paths also
// per component, so ENAMETOOLONG never reaches the file system), enums (priority), the
// size of the bundles/fibers lists. INVALID_ARGUMENT with the value echoed bounded.
absl::Status CheckHeaderFields(const v1::ExtractHeader& header);

// A server path (input, output, or LoadPsf's): length and component length.
absl::Status CheckServerPath(const char* field, const std::string& path);

// Plan bundle indices selected by ExtractHeader.bundles / .fibers (ascending, unique)
// for the fibres [specmin, specmin + nspec) in bundles of `bundlesize` (validated
// parameters). Empty input selects every bundle (returns an empty vector, core's "all").
// INVALID_ARGUMENT for indices or fibres outside the plan, or both lists set.
absl::StatusOr<std::vector<int>> SelectBundles(const v1::ExtractHeader& header, int specmin,
                                               int nspec, int bundlesize);

// A header decoded: the request without its plan, PSF or CUDA regions, and the
// parameters CheckRequest plans.
struct DecodedRequest {
  JobRequest request;             // bundles: the selected plan bundles (ascending); empty: all
  core::ExtractionParams params;  // with want_model from the header (or a model file)
};

// Everything about a request that needs no PSF: the subset rule of the RPC (`subset`:
// ExtractBundles), the header's fields, psf_id present, the image source (upload_size
// against limits.max_upload_bytes), the server-written outputs' rules, and the
// parameters on their own (core::ValidateParamsAlone) with the bundle or fibre
// selection. Run before the PSF is looked up, so a bad request gets the same answer
// whether or not its PSF is cached.
absl::StatusOr<DecodedRequest> DecodeRequest(const v1::ExtractHeader& header, bool subset,
                                             const ServiceLimits& limits);

// The server-written files of a request (the frame file, then the model file when set)
// checked against the output roots (DataRoots::CheckOutput, an existing regular file
// left to the commit's comparison) before any upload or work: their canonical paths, in
// that order. One file under two spellings (`//`, `/./`, a symlinked directory) is
// INVALID_ARGUMENT: written twice, the second rename would silently replace the first.
absl::StatusOr<std::vector<std::string>> CheckServerOutputFiles(const OutputTarget& output,
                                                                const DataRoots& output_roots);

// The decoded parameters validated against the request's PSF into the plan the job
// carries (core::ExtractionPlan), with the grid's length checked against the message
// limit (CheckGridFitsMessage) and the memory estimated (core::EstimateMemory) against
// limits.max_request_bytes: INVALID_ARGUMENT or RESOURCE_EXHAUSTED.
absl::StatusOr<core::ExtractionPlan> CheckRequest(const core::ExtractionParams& params,
                                                  const core::Psf& psf,
                                                  const ServiceLimits& limits);

}  // namespace spexd::server

#endif  // SPEXD_SERVER_RPC_REQUEST_DECODE_H_
