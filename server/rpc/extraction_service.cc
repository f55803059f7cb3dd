#include "server/rpc/extraction_service.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <utility>
#include <vector>

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/rpc/auth.h"
#include "server/rpc/call_watchdog.h"
#include "server/platform/data_roots.h"
#include "server/platform/log.h"
#include "server/platform/metrics.h"
#include "server/state/psf_cache.h"
#include "server/rpc/request_admission.h"
#include "server/state/scheduler.h"
#include "server/platform/status_util.h"
#include "server/rpc/upload_assembly.h"

namespace spexd::server {
namespace {

using Clock = std::chrono::steady_clock;

// Messages allowed to wait for the network per call: enough to keep the stream busy,
// few enough (x 4 MiB) that a slow client cannot make the server buffer a whole frame.
constexpr std::size_t kMaxPendingWrites = 8;

constexpr char kDrainingUpload[] =
    "server is draining: the request was refused before it was complete; retry elsewhere "
    "or after the restart";

// Releases one borrowed slice's reference to the memory its WireMessage borrows from.
void ReleaseOwner(void* owner) { delete static_cast<std::shared_ptr<const void>*>(owner); }

// The WireMessage as gRPC slices: framing bytes copied (tens of bytes), borrowed payload
// wrapped without a copy; each borrowed slice holds a reference to the owner until gRPC
// has written it and drops the slice.
grpc::ByteBuffer ToByteBuffer(WireMessage message) {
  std::vector<grpc::Slice> slices;
  slices.reserve(message.pieces.size());
  for (const WireMessage::Piece& p : message.pieces) {
    if (p.size == 0) continue;
    if (p.borrowed == nullptr) {
      slices.emplace_back(message.framing.data() + p.offset, p.size);
    } else {
      slices.emplace_back(const_cast<char*>(p.borrowed), p.size, &ReleaseOwner,
                          new std::shared_ptr<const void>(message.owner));
    }
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

class ExtractReactor final : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>,
                             public ResponseStream,
                             public CallWatchdog::Watched {
 public:
  ExtractReactor(ServiceContext* service, grpc::CallbackServerContext* call, bool subset)
      : service_(service),
        call_(call),
        subset_(subset),
        rpc_(subset ? "ExtractBundles" : "ExtractFrame"),
        cancel_(std::make_shared<std::atomic<bool>>(false)) {
    if (service_->watchdog != nullptr) service_->watchdog->Add(this);
    arrived_ = Clock::now();
    peer_ = call->peer();
    deadline_ = SteadyDeadline(call->deadline());
    if (service_->env.metrics != nullptr) service_->env.metrics->AddInflight(1);
    absl::Status auth = CheckBearerToken(*call, service_->auth_token);
    if (!auth.ok()) {
      Finish(auth);
      return;
    }
    Read();
  }

  // ---- reactions (gRPC threads; never block)

  void OnReadDone(bool ok) override {
    if (phase_ == Phase::kSubmitted) {
      // The request was complete: anything but the client's half-close is a protocol
      // error (a second header, chunks past upload_size), not to be ignored. The job stops
      // at its next check; the first Finish wins.
      if (ok) {
        {
          absl::MutexLock lock(&mu_);
          protocol_error_ = absl::InvalidArgumentError(
              "unexpected message after the complete request (a second header, or upload "
              "chunks beyond upload_size)");
          if (finish_requested_ && !finished_) final_status_ = protocol_error_;
        }
        cancel_->store(true);
      }
      return;
    }
    {
      absl::MutexLock lock(&mu_);
      read_pending_ = false;
      if (finish_requested_) return;
    }
    if (!ok && stalled_.load()) {
      if (phase_ == Phase::kUpload) CountAborted("idle");
      Finish(absl::DeadlineExceededError(absl::StrCat(
          phase_ == Phase::kHeader ? "no ExtractHeader" : "no upload data", " for ",
          service_->env.limits.upload_idle_seconds,
          " s (--upload_idle_seconds): the call was cancelled")));
      return;
    }
    if (!ok) {
      if (phase_ == Phase::kHeader) {
        Finish(cancel_->load() ? absl::CancelledError("cancelled before the request header")
                               : absl::InvalidArgumentError("stream closed before an ExtractHeader"));
      } else if (phase_ == Phase::kUpload) {
        Finish(cancel_->load()
                   ? absl::CancelledError("upload cancelled")
                   : absl::InvalidArgumentError(absl::StrCat(
                         "truncated upload: the stream ended after ", upload_.received(),
                         " of the announced ", upload_.announced(), " bytes")));
      }
      return;
    }
    absl::Status status = Parse();
    if (status.ok()) status = phase_ == Phase::kHeader ? OnHeader() : OnChunk();
    if (!status.ok()) Finish(status);
  }

  void OnWriteDone(bool ok) override {
    grpc::ByteBuffer* next = nullptr;
    bool finish = false;
    absl::Status final_status;
    {
      absl::MutexLock lock(&mu_);
      writing_ = false;
      write_started_ = Clock::now();
      if (!ok) {  // the client is gone: stop the job at its next Send or bundle
        broken_ = true;
        pending_.clear();
        cancel_->store(true);
      }
      if (!broken_ && !pending_.empty()) {
        current_ = std::move(pending_.front());
        pending_.pop_front();
        writing_ = true;
        next = &current_;
      } else if (finish_requested_ && !finished_) {
        finished_ = true;
        finish = true;
        final_status = final_status_;
      }
    }
    if (next != nullptr) {
      StartWrite(next);
    } else if (finish) {
      CompleteCall(final_status);
    }
  }

  void OnCancel() override {
    absl::MutexLock lock(&mu_);
    cancel_->store(true);  // polled by the backend between bundles and by Send
  }

  void OnDone() override {
    // No watchdog call is in progress once Remove returns.
    if (service_->watchdog != nullptr) service_->watchdog->Remove(this);
    delete this;
  }

  // ---- CallWatchdog::Watched (watchdog thread)

  bool WaitingOnClient(CallWatchdog::Clock::time_point* since,
                       CallWatchdog::Stall* kind) override {
    absl::MutexLock lock(&mu_);
    if (read_pending_ && !finish_requested_) {
      *since = last_read_;
      *kind = CallWatchdog::Stall::kUpload;
      return true;
    }
    if (writing_ && !broken_) {
      *since = write_started_;
      *kind = CallWatchdog::Stall::kWrite;
      return true;
    }
    return false;
  }

  // Cancels the call: a pending read or write then fails, the reactions finish the call,
  // and a running job stops at its next Send or patch batch (the cancel flag).
  void Expire(CallWatchdog::Stall kind) override {
    const bool upload = kind == CallWatchdog::Stall::kUpload;
    stalled_.store(true);
    cancel_->store(true);
    Log(LogLevel::kWarning, upload ? "upload_stalled" : "write_stalled",
        {{"rpc", rpc_}, {"peer", peer_}});
    call_->TryCancel();
  }

  // The server starts draining: a call still waiting for its request's data is refused
  // now with UNAVAILABLE (the client retries elsewhere) instead of taking the whole
  // upload first. Only while a read is pending: then no reaction of this call runs (one
  // that starts sees finish_requested_ and returns), so CompleteCall may touch the read
  // side. A call between reads checks `draining` itself at its next chunk.
  void Drain() override {
    const absl::Status refused = absl::UnavailableError(kDrainingUpload);
    {
      absl::MutexLock lock(&mu_);
      if (!read_pending_ || finish_requested_) return;
      finish_requested_ = true;
      finished_ = true;
      final_status_ = refused;
    }
    if (phase_ == Phase::kUpload) CountAborted("draining");
    CompleteCall(refused);
  }

  // ---- ResponseStream (worker thread)

  bool Send(WireMessage message) override {
    grpc::ByteBuffer buffer = ToByteBuffer(std::move(message));
    grpc::ByteBuffer* next = nullptr;
    {
      absl::MutexLock lock(&mu_);
      if (finish_requested_) return false;
      auto room = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return broken_ || cancel_->load() || pending_.size() < kMaxPendingWrites;
      };
      // Wake up now and then: the cancel flag is set without this mutex's condition
      // being re-evaluated when the deadline passes.
      while (!mu_.AwaitWithTimeout(absl::Condition(&room), absl::Milliseconds(200))) {
        if (Clock::now() >= deadline_) return false;
      }
      if (broken_ || cancel_->load()) return false;
      pending_.push_back(std::move(buffer));
      if (!writing_) {
        current_ = std::move(pending_.front());
        pending_.pop_front();
        writing_ = true;
        write_started_ = Clock::now();
        next = &current_;
      }
    }
    if (next != nullptr) StartWrite(next);
    return true;
  }

  void Finish(const absl::Status& status) override {
    absl::Status final_status;
    {
      absl::MutexLock lock(&mu_);
      if (finish_requested_) return;
      finish_requested_ = true;
      final_status_ = protocol_error_.ok() ? status : protocol_error_;
      if (writing_ || (!pending_.empty() && !broken_)) return;  // OnWriteDone finishes
      finished_ = true;
      final_status = final_status_;
    }
    CompleteCall(final_status);
  }

 private:
  enum class Phase { kHeader, kUpload, kSubmitted };

  static Clock::time_point SteadyDeadline(std::chrono::system_clock::time_point deadline) {
    const auto now_sys = std::chrono::system_clock::now();
    // gRPC reports "no deadline" as a time far in the future.
    if (deadline - now_sys > std::chrono::hours(24 * 365)) return Clock::time_point::max();
    return Clock::now() + std::chrono::duration_cast<Clock::duration>(deadline - now_sys);
  }

  void Read() {
    {
      absl::MutexLock lock(&mu_);
      read_pending_ = true;
    }
    StartRead(&incoming_raw_);
  }

  void CountAborted(const char* reason) {
    if (service_->env.metrics != nullptr) service_->env.metrics->CountUploadAborted(reason);
  }

  // The raw request bytes as an ExtractRequest (what the generated handler would do).
  absl::Status Parse() {
    incoming_.Clear();
    grpc::Status s =
        grpc::SerializationTraits<v1::ExtractRequest>::Deserialize(&incoming_raw_, &incoming_);
    if (!s.ok()) return absl::InvalidArgumentError("malformed ExtractRequest message");
    return absl::OkStatus();
  }

  absl::Status OnHeader() {
    if (incoming_.kind_case() != v1::ExtractRequest::kHeader) {
      return absl::InvalidArgumentError("the first message must be an ExtractHeader");
    }
    if (!service_->serving.load()) {
      return absl::UnavailableError(service_->draining.load() ? "server is draining"
                                                              : "server is warming up");
    }
    const v1::ExtractHeader& h = incoming_.header();
    const ServiceLimits& limits = service_->env.limits;
    // Every parameter once, here, before any upload, file or geometry.
    absl::StatusOr<JobRequest> admitted = AdmitHeader(service_->env, h, subset_, nullptr);
    if (!admitted.ok()) return admitted.status();
    request_ = *std::move(admitted);
    request_.arrived = arrived_;
    request_.peer = peer_;
    request_.deadline = deadline_;
    if (h.has_cuda_image() || h.has_cuda_output()) {
      // Held by the job from here: an unregister waits for it (region_registry.h).
      if (service_->regions == nullptr) {
        return absl::FailedPreconditionError("this server takes no CUDA regions");
      }
      auto regions = ResolveCudaRegions(h, *service_->regions);
      if (!regions.ok()) return regions.status();
      request_.cuda = *std::move(regions);
    }
    const bool realtime = request_.realtime;
    if (h.image_case() != v1::ExtractHeader::kUploadSize) {
      auto ticket = service_->scheduler->Reserve(realtime);
      if (!ticket.ok()) return ticket.status();
      ticket_ = *std::move(ticket);
      return Submit();
    }
    // An upload holds an upload slot (counted apart from queued work); its queue slot
    // is taken when the upload is complete.
    auto ticket = service_->scheduler->ReserveUpload(realtime, /*then_queue=*/true);
    if (!ticket.ok()) return ticket.status();
    ticket_ = *std::move(ticket);
    upload_ = UploadAssembly(h.upload_size(), UploadAssembly::kImageReserve);
    const Clock::time_point now = Clock::now();
    rate_floor_ = UploadRateFloor(limits.upload_min_bytes_per_second,
                                  limits.upload_rate_window_seconds, now);
    {
      absl::MutexLock lock(&mu_);
      last_read_ = now;  // the idle clock starts with the upload
    }
    phase_ = Phase::kUpload;
    Read();
    return absl::OkStatus();
  }

  absl::Status OnChunk() {
    if (incoming_.kind_case() != v1::ExtractRequest::kChunk) {
      return absl::InvalidArgumentError("expected an UploadChunk after the header");
    }
    // Draining: refused now rather than after the whole upload.
    if (service_->draining.load()) {
      CountAborted("draining");
      return absl::UnavailableError(kDrainingUpload);
    }
    const std::string& data = incoming_.chunk().data();
    if (!upload_.Append(data)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "upload is longer than the announced upload_size of ", upload_.announced(), " bytes"));
    }
    const Clock::time_point now = Clock::now();
    if (!data.empty()) {  // an empty chunk is no progress: it must not keep an upload alive
      absl::MutexLock lock(&mu_);
      last_read_ = now;
    }
    if (service_->env.metrics != nullptr) {
      service_->env.metrics->AddUploadBytes(static_cast<double>(data.size()));
    }
    if (!upload_.complete()) {
      if (absl::Status s = rate_floor_.Check(upload_.received(), upload_.announced(), now);
          !s.ok()) {
        CountAborted("slow");
        Log(LogLevel::kWarning, "upload_too_slow",
            {{"rpc", rpc_}, {"peer", peer_}, {"error", std::string(s.message())}});
        return s;
      }
    }
    if (upload_.complete()) {
      request_.image.upload = upload_.Take();
      auto queued = service_->scheduler->Reserve(ticket_.realtime());
      if (!queued.ok()) return queued.status();
      ticket_ = *std::move(queued);  // frees the upload slot
      return Submit();
    }
    Read();
    return absl::OkStatus();
  }

  absl::Status Submit() {
    phase_ = Phase::kSubmitted;
    request_.admitted = Clock::now();
    auto job = std::make_shared<ExtractJob>(service_->env, std::move(request_), this, cancel_);
    // Only the half-close may follow (see OnReadDone). Read before the job can finish
    // the call: no read is started on a finished call.
    StartRead(&incoming_raw_);
    service_->scheduler->Submit(std::move(ticket_), std::move(job));
    return absl::OkStatus();
  }

  // Last use of `this` by our code: gRPC may run OnDone (delete) right after Finish.
  // `final_status` is final_status_, read when finished_ was set.
  void CompleteCall(const absl::Status& final_status) {
    ticket_ = Scheduler::Ticket();  // an early error releases the queue slot
    grpc::Status status = ToGrpcStatus(final_status, call_);
    if (ServerMetrics* m = service_->env.metrics; m != nullptr) {
      m->CountRequest(rpc_, GrpcCodeName(status.error_code()));
      m->AddInflight(-1);
    }
    if (!status.ok() && phase_ != Phase::kSubmitted) {
      Log(LogLevel::kInfo, "extract_rejected",
          {{"rpc", rpc_}, {"peer", peer_}, {"code", GrpcCodeName(status.error_code())},
           {"error", status.error_message()}});
    }
    ServerBidiReactor::Finish(status);
  }

  ServiceContext* const service_;
  grpc::CallbackServerContext* const call_;  // valid until OnDone
  const bool subset_;
  const std::string rpc_;
  std::shared_ptr<std::atomic<bool>> cancel_;
  Clock::time_point arrived_, deadline_;
  std::string peer_;

  // Read side: touched only by reactions, which gRPC serialises for one call.
  Phase phase_ = Phase::kHeader;
  grpc::ByteBuffer incoming_raw_;
  v1::ExtractRequest incoming_;
  JobRequest request_;
  UploadAssembly upload_;
  UploadRateFloor rate_floor_;
  Scheduler::Ticket ticket_;

  // Write side: shared between the worker (Send, Finish) and reactions.
  absl::Mutex mu_;
  std::deque<grpc::ByteBuffer> pending_ ABSL_GUARDED_BY(mu_);
  grpc::ByteBuffer current_;  // owned by the write in flight while writing_
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
  bool finish_requested_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status final_status_ ABSL_GUARDED_BY(mu_);
  // Set when the client sent more after its complete request; replaces the job's status.
  absl::Status protocol_error_ ABSL_GUARDED_BY(mu_);
  // For the watchdog: a read waiting for the client since last_read_, the write in
  // flight since write_started_.
  bool read_pending_ ABSL_GUARDED_BY(mu_) = false;
  Clock::time_point last_read_ ABSL_GUARDED_BY(mu_) = Clock::now();
  Clock::time_point write_started_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> stalled_{false};  // the watchdog cancelled the call
};

}  // namespace

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* ExtractionService::ExtractFrame(
    grpc::CallbackServerContext* call) {
  return new ExtractReactor(context_, call, /*subset=*/false);
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* ExtractionService::ExtractBundles(
    grpc::CallbackServerContext* call) {
  return new ExtractReactor(context_, call, /*subset=*/true);
}

}  // namespace spexd::server
