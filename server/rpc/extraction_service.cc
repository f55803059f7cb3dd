#include "server/rpc/extraction_service.h"

#include <memory>
#include <utility>
#include <vector>

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/platform/log.h"
#include "server/rpc/auth.h"
#include "server/rpc/extract_request_reader.h"
#include "server/rpc/response_queue.h"
#include "server/rpc/watched_reactor.h"
#include "server/state/scheduler.h"

namespace spexd::server {
namespace {

using Clock = std::chrono::steady_clock;

// Messages allowed to wait for the network per call: enough to keep the stream busy,
// few enough (x 4 MiB) that a slow client cannot make the server buffer a whole frame.
constexpr std::size_t kMaxPendingWrites = 8;

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

class ExtractReactor final
    : public WatchedReactor<grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>>,
      public ResponseStream {
 public:
  ExtractReactor(ServiceContext* service, grpc::CallbackServerContext* call, bool subset)
      : WatchedReactor(service, call, subset ? "ExtractBundles" : "ExtractFrame"),
        reader_(service, subset, rpc_, peer_, arrived_, deadline_) {
    Watch();
    absl::Status auth = CheckBearerToken(*call, service_->auth_token);
    if (!auth.ok()) {
      Finish(auth);
      return;
    }
    Read();
  }

  // ---- reactions (gRPC threads; never block)

  void OnReadDone(bool ok) override {
    if (reader_.phase() == Reader::Phase::kComplete) {
      // The request was complete: anything but the client's half-close is a protocol
      // error (a second header, chunks past upload_size), not to be ignored. The job stops
      // at its next check; the first Finish wins.
      if (ok) {
        {
          absl::MutexLock lock(&queue_.mu);
          protocol_error_ = absl::InvalidArgumentError(
              "unexpected message after the complete request (a second header, or upload "
              "chunks beyond upload_size)");
          queue_.ReplaceEndStatus(protocol_error_);
        }
        cancel_->store(true);
      }
      return;
    }
    {
      absl::MutexLock lock(&queue_.mu);
      read_pending_ = false;
      if (queue_.end_requested()) return;
    }
    if (!ok) {
      Finish(reader_.ReadFailed(stalled(), cancelled()));
      return;
    }
    bool progress = false;
    absl::StatusOr<Reader::Next> next = reader_.OnMessage(&progress);
    if (progress) {
      absl::MutexLock lock(&queue_.mu);
      last_read_ = Clock::now();
    }
    if (!next.ok()) {
      Finish(next.status());
    } else if (*next == Reader::Next::kRead) {
      Read();
    } else {
      Submit();
    }
  }

  void OnWriteDone(bool ok) override {
    Queue::Step next;
    {
      absl::MutexLock lock(&queue_.mu);
      next = queue_.WriteDone(ok);
      if (!ok) cancel_->store(true);  // the client is gone: the job stops at its next Send
    }
    if (next.write != nullptr) {
      StartWrite(next.write);
    } else if (next.end) {
      CompleteCall(next.status);
    }
  }

  // ---- CallWatchdog::Watched (watchdog thread; Expire is WatchedReactor's)

  bool WaitingOnClient(CallWatchdog::Clock::time_point* since,
                       CallWatchdog::Stall* kind) override {
    absl::MutexLock lock(&queue_.mu);
    if (read_pending_ && !queue_.end_requested()) {
      *since = last_read_;
      *kind = CallWatchdog::Stall::kUpload;
      return true;
    }
    *kind = CallWatchdog::Stall::kWrite;
    return queue_.WaitingOnWrite(since);
  }

  // The server starts draining: a call still waiting for its request's data is refused
  // now with UNAVAILABLE (the client retries elsewhere) instead of taking the whole
  // upload first. Only while a read is pending: then no reaction of this call runs (one
  // that starts sees the end requested and returns), so CompleteCall may touch the read
  // side. A call between reads checks `draining` itself at its next chunk.
  void Drain() override {
    const absl::Status refused = absl::UnavailableError(kDrainingUpload);
    {
      absl::MutexLock lock(&queue_.mu);
      if (!read_pending_ || queue_.end_requested()) return;
      queue_.EndNow(refused);
    }
    if (reader_.phase() == Reader::Phase::kUpload) reader_.CountAborted("draining");
    CompleteCall(refused);
  }

  // ---- ResponseStream (worker thread)

  bool Send(WireMessage message) override {
    grpc::ByteBuffer buffer = ToByteBuffer(std::move(message));
    Queue::Step step;
    {
      absl::MutexLock lock(&queue_.mu);
      if (queue_.end_requested()) return false;
      auto room = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(queue_.mu) {
        return queue_.broken() || cancel_->load() || queue_.queued() < kMaxPendingWrites;
      };
      // Wake up now and then: the cancel flag is set without this mutex's condition
      // being re-evaluated when the deadline passes.
      while (!queue_.mu.AwaitWithTimeout(absl::Condition(&room), absl::Milliseconds(200))) {
        if (Clock::now() >= deadline_) return false;
      }
      if (queue_.broken() || cancel_->load()) return false;
      step = queue_.Push(std::move(buffer));
    }
    if (step.write != nullptr) StartWrite(step.write);
    return true;
  }

  void Finish(const absl::Status& status) override {
    Queue::Step step;
    {
      absl::MutexLock lock(&queue_.mu);
      step = queue_.End(protocol_error_.ok() ? status : protocol_error_);
    }
    if (step.end) CompleteCall(step.status);
  }

 private:
  using Queue = ResponseQueue<grpc::ByteBuffer>;
  using Reader = ExtractRequestReader;

  // Wakes a Send waiting for room: the mutex's release re-evaluates its condition.
  void WakeWriters() override { absl::MutexLock lock(&queue_.mu); }

  void Read() {
    {
      absl::MutexLock lock(&queue_.mu);
      read_pending_ = true;
    }
    StartRead(reader_.buffer());
  }

  void Submit() {
    JobRequest request = reader_.TakeRequest();
    request.admitted = Clock::now();
    auto job = std::make_shared<ExtractJob>(service_->env, std::move(request), this, cancel_);
    // Only the half-close may follow (see OnReadDone). Read before the job can finish
    // the call: no read is started on a finished call.
    StartRead(reader_.buffer());
    service_->scheduler->Submit(reader_.TakeTicket(), std::move(job));
  }

  // Last use of `this` by our code: gRPC may run OnDone (delete) right after Finish.
  void CompleteCall(const absl::Status& final_status) {
    reader_.ReleaseTicket();  // an early error releases the queue slot
    const grpc::Status status = Ended(final_status);
    if (!status.ok() && reader_.phase() != Reader::Phase::kComplete) {
      Log(LogLevel::kInfo, "extract_rejected",
          {{"rpc", rpc_}, {"peer", peer_}, {"code", GrpcCodeName(status.error_code())},
           {"error", status.error_message()}});
    }
    grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>::Finish(status);
  }

  Reader reader_;  // the read side: touched only by reactions, which gRPC serialises

  // Write side: the worker (Send, Finish) and the reactions. Its mutex also guards what
  // the watchdog and the drain read of the read side.
  Queue queue_;
  // Set when the client sent more after its complete request; replaces the job's status.
  absl::Status protocol_error_ ABSL_GUARDED_BY(queue_.mu);
  // For the watchdog: a read waiting for the client since last_read_.
  bool read_pending_ ABSL_GUARDED_BY(queue_.mu) = false;
  Clock::time_point last_read_ ABSL_GUARDED_BY(queue_.mu) = Clock::now();
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
