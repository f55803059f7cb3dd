// An ExposureRequest turned into the frames an ExposureRun runs, at the edge as
// ExtractFrame's header is (request_decode.h): the whole-request rules first, then each
// frame admitted as ExtractFrame would admit it alone.
#ifndef SPEXD_SERVER_RPC_EXPOSURE_DECODE_H_
#define SPEXD_SERVER_RPC_EXPOSURE_DECODE_H_

#include "absl/status/status.h"
#include "server/jobs/exposure_job.h"
#include "server/jobs/job_types.h"
#include "spexd/v1/spexd.pb.h"

namespace spexd::server {

// The whole-request rules of an ExposureRequest (INVALID_ARGUMENT naming frames[i]): 1 to
// kMaxExposureFrames frames, each with a server_path input and a server_output_path, no
// upload, CUDA region, bundle or fibre selection or model stream, and no two frames
// writing the same output path. What ExtractFrame would refuse for one frame alone is
// not checked here: that is the frame's own result (DecodeExposureFrame).
absl::Status CheckExposureRequest(const v1::ExposureRequest& request);

// The checks ExtractFrame makes when its header arrives (AdmitHeader: parameters, output
// path, PSF in the cache, memory estimate), for one frame: the frame with its validated
// plan and PSF, or `refused` set. The header's priority is replaced by `realtime`, and
// its results go to its file only (the exposure reports summaries).
ExposureRun::Frame DecodeExposureFrame(const JobEnvironment& env, v1::ExtractHeader header,
                                       bool realtime);

}  // namespace spexd::server

#endif  // SPEXD_SERVER_RPC_EXPOSURE_DECODE_H_
