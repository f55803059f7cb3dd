// The request side of one ExtractFrame or ExtractBundles call: its messages parsed, the
// header admitted (request_admission.h) with a queue slot, and an upload's chunks
// assembled under the rate floor, until the request is complete and can be submitted.
// Used by the call's reactor (extraction_service.cc) from its read reactions only, which
// gRPC serialises for one call; it starts no read itself.
#ifndef SPEXD_SERVER_RPC_EXTRACT_REQUEST_READER_H_
#define SPEXD_SERVER_RPC_EXTRACT_REQUEST_READER_H_

#include <chrono>
#include <string>

#include <grpcpp/support/byte_buffer.h>

#include "absl/status/statusor.h"
#include "server/jobs/job_types.h"
#include "server/rpc/service_context.h"
#include "server/rpc/upload_assembly.h"
#include "server/state/scheduler.h"
#include "spexd/v1/spexd.pb.h"

namespace spexd::server {

// What refuses an upload once the server drains (the reactor's drain says it too).
extern const char kDrainingUpload[];

class ExtractRequestReader {
 public:
  using Clock = std::chrono::steady_clock;
  enum class Phase { kHeader, kUpload, kComplete };
  // What the call does after a message: read the next one, or submit the request.
  enum class Next { kRead, kSubmit };

  // `rpc` and `peer` name the call in logs (and outlive the reader); `arrived` and
  // `deadline` (steady clock, max() for none) are the call's, for the job.
  ExtractRequestReader(ServiceContext* service, bool subset, const std::string& rpc,
                       const std::string& peer, Clock::time_point arrived,
                       Clock::time_point deadline);

  // Where the next message is read into (grpc's StartRead).
  grpc::ByteBuffer* buffer() { return &raw_; }
  Phase phase() const { return phase_; }

  // One message read: the header admitted, or an upload chunk taken. `*progress` is set when the idle clock restarts (the
  // upload starts, or a chunk brings bytes). The error ends the call.
  absl::StatusOr<Next> OnMessage(bool* progress);

  // The status that ends a call whose read failed: the watchdog cut an idle client off
  // (`stalled`), the client cancelled, or its stream ended before the request was complete.
  absl::Status ReadFailed(bool stalled, bool cancelled);

  // Counts an upload ended before it was complete (by reason: idle, slow, draining).
  void CountAborted(const char* reason);

  // The complete request and its queue slot, once (after kSubmit); the reader is then
  // kComplete and takes no more messages.
  JobRequest TakeRequest() { return std::move(request_); }
  Scheduler::Ticket TakeTicket() { return std::move(ticket_); }
  // An early end releases the queue or upload slot.
  void ReleaseTicket() { ticket_ = Scheduler::Ticket(); }

 private:
  absl::Status Parse();
  absl::StatusOr<Next> OnHeader(bool* progress);
  absl::StatusOr<Next> OnChunk(bool* progress);

  ServiceContext* const service_;
  const bool subset_;
  const std::string& rpc_;
  const std::string& peer_;
  const Clock::time_point arrived_, deadline_;
  Phase phase_ = Phase::kHeader;
  grpc::ByteBuffer raw_;
  v1::ExtractRequest incoming_;
  JobRequest request_;
  UploadAssembly upload_;
  UploadRateFloor rate_floor_;
  Scheduler::Ticket ticket_;
};

}  // namespace spexd::server

#endif  // SPEXD_SERVER_RPC_EXTRACT_REQUEST_READER_H_
