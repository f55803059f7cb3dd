// The admission of an ExtractHeader (its decode, request_decode.h, then what needs the
// server's state: the output roots, the PSF cache, the CUDA regions), apart from the
// decode so that the decode alone builds without the server (tests/fuzz).
#ifndef SPEXD_SERVER_RPC_REQUEST_ADMISSION_H_
#define SPEXD_SERVER_RPC_REQUEST_ADMISSION_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/jobs/job_types.h"
#include "server/state/region_registry.h"
#include "spexd/v1/spexd.pb.h"

namespace spexd::server {

// The admission of one header, as ExtractFrame, ExtractBundles and each frame of an
// exposure make it, in this order: DecodeRequest, CheckServerOutputFiles, the PSF from
// the cache, CheckRequest. The request with its plan, bundles and PSF; `outputs` gets the
// canonical paths of the files it writes (may be null).
absl::StatusOr<JobRequest> AdmitHeader(const JobEnvironment& env, const v1::ExtractHeader& header,
                                       bool subset, std::vector<std::string>* outputs);

// Checks the header's cuda_image and cuda_output (offsets, alignment), looks the regions
// up and checks that the image planes fit their regions and that all regions are on one
// GPU. INVALID_ARGUMENT for malformed fields; FAILED_PRECONDITION for a region that is
// not registered, too small, or on another GPU than the others.
absl::StatusOr<CudaRequestRegions> ResolveCudaRegions(const v1::ExtractHeader& header,
                                                      const RegionRegistry& registry);

}  // namespace spexd::server

#endif  // SPEXD_SERVER_RPC_REQUEST_ADMISSION_H_
