// The data an extraction job is made of, apart from the job itself (extract_job.h): the
// request as admitted (its values, request_values.h, decoded from the wire once by
// server/rpc/request_decode.h: no job reads a request message), the server state it runs with and the call it answers. The job's
// stages (job_input.h, job_output.h), the exposure job and the services use them without
// the ExtractJob that includes those stages, so no header of a stage includes back.
#ifndef SPEXD_SERVER_JOB_TYPES_H_
#define SPEXD_SERVER_JOB_TYPES_H_

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/base/task_pool.h"
#include "core/frame/frame_array_pool.h"
#include "core/io/plane_buffer.h"
#include "core/io/psf.h"
#include "core/plan/extraction_params.h"
#include "server/jobs/cuda_request.h"
#include "server/jobs/proto_convert.h"
#include "server/jobs/request_values.h"
#include "server/jobs/service_limits.h"
#include "server/platform/data_roots.h"

namespace spexd::server {

class PsfCache;
class ServerMetrics;
class ShadowParity;

// The call side of a job (implemented by the gRPC reactor, or by tests).
class ResponseStream {
 public:
  virtual ~ResponseStream() = default;
  // Queues a serialized ExtractResponse for the client (its borrowed pieces stay alive
  // through message.owner until written). Blocks while too many messages wait to be
  // written (back-pressure from a slow client). Returns false once the call is cancelled
  // or broken: the job should stop.
  virtual bool Send(WireMessage message) = 0;
  // Ends the call after the queued messages. Called exactly once; the stream must not
  // be used afterwards (it may be destroyed).
  virtual void Finish(const absl::Status& status) = 0;
};

// Shared server state a job uses; owned by the server, outlives every job.
struct JobEnvironment {
  PsfCache* cache = nullptr;
  ServerMetrics* metrics = nullptr;  // may be null
  const DataRoots* roots = nullptr;         // inputs (--data_roots)
  const DataRoots* output_roots = nullptr;  // server-side output (--output_roots)
  ServiceLimits limits;
  // Host decoding (all may be null): threads that decode a frame's planes with its loader
  // (and encode server-written frame files with the streaming task, JobOutput), the
  // memory float32 planes reuse from frame to frame, and whether the workers take float32
  // planes (set once the backends exist; PreprocOptions::keep_float32).
  core::TaskPool* decode_pool = nullptr;
  core::TaskPool* file_writes = nullptr;  // server-written frame files' writes
  core::PlaneBufferPool* plane_buffers = nullptr;
  core::PlaneBufferPool* load_buffers = nullptr;  // PreprocOptions::load_buffers
  core::PlaneBufferPool* file_buffers = nullptr;  // server-written frame files' images
  core::PlaneBufferPool* wire_buffers = nullptr;  // float32 streams' rounded bundles
  core::FrameArrayPool* frame_arrays = nullptr;   // assembled frames' per-bin arrays
  const std::atomic<bool>* float32_planes = nullptr;
  // Whether the workers take raw planes (PreprocOptions::keep_raw); set with the above.
  const std::atomic<bool>* raw_planes = nullptr;
  ShadowParity* shadow = nullptr;  // shadow parity sampling; null when off
};

struct JobRequest {
  std::string psf_id;
  std::string in_psf_name;  // what the frame file records as the PSF; empty: its source
  std::string client_tag;
  bool realtime = false;
  ImageSource image;
  OutputTarget output;
  ReplyOptions reply;
  // The parameters, validated once when the header arrived, with their grid
  // (server/rpc/request_decode.h); never re-validated downstream.
  std::optional<core::ExtractionPlan> plan;
  std::vector<int> bundles;  // selected plan bundles; empty: all
  std::shared_ptr<const core::Psf> psf;  // held from admission: eviction cannot race
  CudaRequestRegions cuda;               // CUDA regions it names, held until the job ends
  std::string peer;                      // for logs
  std::chrono::steady_clock::time_point arrived;   // call started
  std::chrono::steady_clock::time_point admitted;  // header (and upload) received, queued
  // Absolute deadline of the call (steady clock); max() when none.
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
};

}  // namespace spexd::server

#endif  // SPEXD_SERVER_JOB_TYPES_H_
