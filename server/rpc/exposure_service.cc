// Extraction.ExtractExposure: the reactor of one exposure. It checks the
// request (whole-request rules, then each frame as ExtractFrame would), admits it with
// one queue slot, hands the frames to an ExposureRun and writes each frame's result as
// the run reports it, then the summary. Reactions never block: the frames run on the
// scheduler's loaders, workers and streaming stage like single frames. The CallWatchdog
// cuts off a client that stops reading, as for single frames: the frames run without
// waiting for the stream, so only the cut-off stops them (and ends the call).
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "server/jobs/exposure_job.h"
#include "server/platform/log.h"
#include "server/rpc/auth.h"
#include "server/rpc/exposure_decode.h"
#include "server/rpc/extraction_service.h"
#include "server/rpc/response_queue.h"
#include "server/rpc/watched_reactor.h"
#include "server/state/scheduler.h"

namespace spexd::server {
namespace {

class ExposureReactor final
    : public WatchedReactor<grpc::ServerWriteReactor<v1::ExposureResponse>>,
      public ExposureSink {
 public:
  ExposureReactor(ServiceContext* service, grpc::CallbackServerContext* call,
                  const v1::ExposureRequest& request)
      : WatchedReactor(service, call, "ExtractExposure") {
    Watch();
    absl::Status status = Start(request);
    if (!status.ok()) {
      Log(LogLevel::kInfo, "exposure_rejected",
          {{"peer", peer_},
           {"code", std::string(absl::StatusCodeToString(status.code()))},
           {"error", std::string(status.message())}});
      EndCall(status);
    }
  }

  // ---- reactions (gRPC threads)

  void OnWriteDone(bool ok) override {
    Queue::Step next;
    {
      absl::MutexLock lock(&queue_.mu);
      next = queue_.WriteDone(ok);
      if (!ok) cancel_->store(true);  // the client is gone: every frame not finished stops
    }
    if (next.write != nullptr) StartWrite(next.write);
    if (next.end) EndCall(next.status);
  }

  // ---- CallWatchdog::Watched (watchdog thread). Expire is WatchedReactor's: the cancel
  // flag stops the frames (running ones at their next patch batch, queued ones before
  // they are read, the rest are never submitted), and TryCancel fails the blocked write,
  // whose reaction or the run's Done ends the call.

  bool WaitingOnClient(CallWatchdog::Clock::time_point* since,
                       CallWatchdog::Stall* kind) override {
    absl::MutexLock lock(&queue_.mu);
    *kind = CallWatchdog::Stall::kWrite;
    return queue_.WaitingOnWrite(since);
  }

  // ---- ExposureSink (the run's threads)

  void FrameResult(v1::ExposureFrameResult result) override {
    v1::ExposureResponse response;
    *response.mutable_frame() = std::move(result);
    Send(std::move(response));
  }

  void Done(v1::ExposureSummary summary) override {
    // Every frame has its result. A stopped call ends with the stop's code (what the
    // client sees anyway); otherwise OK, the frames carrying their own codes.
    absl::Status end;
    if (cancelled() || Clock::now() >= deadline_) {
      end = Clock::now() + std::chrono::milliseconds(100) >= deadline_
                ? absl::DeadlineExceededError("the exposure's deadline passed")
                : absl::CancelledError("the exposure was cancelled");
      if (summary.failed() == 0) end = absl::OkStatus();
    }
    v1::ExposureResponse response;
    *response.mutable_summary() = std::move(summary);
    Send(std::move(response));
    Queue::Step step;
    {
      absl::MutexLock lock(&queue_.mu);
      step = queue_.End(end);
    }
    if (step.end) EndCall(step.status);
  }

 private:
  using Queue = ResponseQueue<v1::ExposureResponse>;

  absl::Status Start(const v1::ExposureRequest& request) {
    if (absl::Status auth = CheckBearerToken(*call_, service_->auth_token); !auth.ok()) return auth;
    if (!service_->serving.load()) {
      return absl::UnavailableError(service_->draining.load() ? "server is draining"
                                                              : "server is warming up");
    }
    if (absl::Status s = CheckExposureRequest(request); !s.ok()) return s;
    const bool realtime = request.priority() == v1::REALTIME;
    std::vector<ExposureRun::Frame> frames;
    frames.reserve(static_cast<std::size_t>(request.frames_size()));
    bool any_valid = false;
    for (const v1::ExtractHeader& h : request.frames()) {
      frames.push_back(DecodeExposureFrame(service_->env, h, realtime));
      frames.back().request.peer = peer_;
      any_valid = any_valid || frames.back().refused.ok();
    }
    if (absl::Status s = ExposureRun::CheckDistinctOutputs(frames); !s.ok()) return s;
    if (absl::Status s = ExposureRun::CheckOutputsSpareInputs(frames); !s.ok()) return s;
    // Admitted as a whole with one slot (refused like a single frame when the queue is
    // full or the server drains); its further frames never wait on the queue's bound.
    Scheduler::Ticket admission;
    if (any_valid) {
      auto ticket = service_->scheduler->Reserve(realtime);
      if (!ticket.ok()) return ticket.status();
      admission = *std::move(ticket);
    }
    const std::string tag = request.client_tag().empty()
                                ? absl::StrCat("exposure@", peer_)
                                : request.client_tag();
    Log(LogLevel::kInfo, "exposure_admitted",
        {{"peer", peer_}, {"tag", tag}, {"frames", request.frames_size()}});
    run_ = std::make_shared<ExposureRun>(service_->env, service_->scheduler, std::move(frames),
                                         realtime, cancel_, arrived_, deadline_, tag, this);
    run_->Start(std::move(admission));
    return absl::OkStatus();
  }

  void Send(v1::ExposureResponse response) {
    Queue::Step step;
    {
      absl::MutexLock lock(&queue_.mu);
      step = queue_.Push(std::move(response));
    }
    // Outside the lock: the message is the write's until OnWriteDone.
    if (step.write != nullptr) StartWrite(step.write);
  }

  // The last use of `this` by our code: gRPC may run OnDone (delete) right after Finish.
  void EndCall(absl::Status status) {
    // A call cut off for a stalled client ends CANCELLED, whatever its frames did: that is
    // what its client sees (and what a single frame's cut-off counts).
    if (stalled()) {
      status = absl::CancelledError(absl::StrCat(
          "responses not read for ", service_->env.limits.write_timeout_seconds,
          " s (--write_timeout_seconds): the call was cancelled"));
    }
    Finish(Ended(status));
  }

  std::shared_ptr<ExposureRun> run_;  // alive until the reactor is deleted
  Queue queue_;
};

}  // namespace

grpc::ServerWriteReactor<v1::ExposureResponse>* ExtractionService::ExtractExposure(
    grpc::CallbackServerContext* call, const v1::ExposureRequest* request) {
  return new ExposureReactor(context_, call, *request);
}

}  // namespace spexd::server
