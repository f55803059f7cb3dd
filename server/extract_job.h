// One extraction request as a scheduler job: reads the image (server path or upload),
// warms the geometry through the PSF cache, runs the worker's backend and streams each
// finished bundle. gRPC-free: it talks to the call through ResponseStream.
#ifndef SPEXD_SERVER_EXTRACT_JOB_H_
#define SPEXD_SERVER_EXTRACT_JOB_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "core/backend.h"
#include "core/psf.h"
#include "server/scheduler.h"
#include "spexd/v1/spexd.pb.h"

namespace spexd::server {

class DataRoots;
class PsfCache;
class ServerMetrics;

// The call side of a job (implemented by the gRPC reactor, or by tests).
class ResponseStream {
 public:
  virtual ~ResponseStream() = default;
  // Queues a message for the client. Blocks while too many messages wait to be written
  // (back-pressure from a slow client). Returns false once the call is cancelled or
  // broken: the job should stop.
  virtual bool Send(v1::ExtractResponse message) = 0;
  // Ends the call after the queued messages. Called exactly once; the stream must not
  // be used afterwards (it may be destroyed).
  virtual void Finish(const absl::Status& status) = 0;
};

struct ServiceLimits {
  int64_t max_message_bytes = 4 << 20;   // no message larger than this, either way
  int64_t max_upload_bytes = 1LL << 30;  // image upload or server-side image file
  int64_t max_image_pixels = 1LL << 26;
};

// Shared server state a job uses; owned by the server, outlives every job.
struct JobEnvironment {
  PsfCache* cache = nullptr;
  ServerMetrics* metrics = nullptr;  // may be null
  const DataRoots* roots = nullptr;
  ServiceLimits limits;
};

struct JobRequest {
  v1::ExtractHeader header;
  bool subset = false;  // ExtractBundles: header must select bundles or fibres
  std::shared_ptr<const core::Psf> psf;  // held from admission: eviction cannot race
  std::string upload;                    // image bytes when uploaded
  std::string peer;                      // for logs
  std::chrono::steady_clock::time_point arrived;   // call started
  std::chrono::steady_clock::time_point admitted;  // header (and upload) received, queued
  // Absolute deadline of the call (steady clock); max() when none.
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
};

class ExtractJob : public Job {
 public:
  // `stream` stays valid until Finish is called on it; `cancel` is set by the call when
  // the client cancels or the deadline passes, and is polled by the backend between
  // bundles.
  ExtractJob(const JobEnvironment& env, JobRequest request, ResponseStream* stream,
             std::shared_ptr<std::atomic<bool>> cancel);

  void Run(core::Backend& backend, int worker) override;
  void Abandon(const absl::Status& status) override;

 private:
  absl::Status Execute(core::Backend& backend, v1::ExtractSummary* summary);
  // Status for a stopped extraction: DEADLINE_EXCEEDED or CANCELLED.
  absl::Status StopStatus() const;
  bool Stopped() const;

  const JobEnvironment& env_;
  JobRequest request_;
  ResponseStream* stream_;
  std::shared_ptr<std::atomic<bool>> cancel_;
  std::chrono::steady_clock::time_point started_;
};

}  // namespace spexd::server

#endif  // SPEXD_SERVER_EXTRACT_JOB_H_
