// Extraction.ExtractExposure: the reactor of one exposure. It checks the
// request (whole-request rules, then each frame as ExtractFrame would), admits it with
// one queue slot, hands the frames to an ExposureRun and writes each frame's result as
// the run reports it, then the summary. Reactions never block: the frames run on the
// scheduler's loaders, workers and streaming stage like single frames. The CallWatchdog
// cuts off a client that stops reading, as for single frames: the frames run without
// waiting for the stream, so only the cut-off stops them (and ends the call).
#include <atomic>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "server/rpc/auth.h"
#include "server/rpc/call_watchdog.h"
#include "server/jobs/exposure_job.h"
#include "server/rpc/extraction_service.h"
#include "server/platform/log.h"
#include "server/platform/metrics.h"
#include "server/state/scheduler.h"
#include "server/platform/status_util.h"

namespace spexd::server {
namespace {

using Clock = std::chrono::steady_clock;

Clock::time_point SteadyDeadline(std::chrono::system_clock::time_point deadline) {
  const auto now_sys = std::chrono::system_clock::now();
  // gRPC reports "no deadline" as a time far in the future.
  if (deadline - now_sys > std::chrono::hours(24 * 365)) return Clock::time_point::max();
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(deadline - now_sys);
}

class ExposureReactor final : public grpc::ServerWriteReactor<v1::ExposureResponse>,
                              public ExposureSink,
                              public CallWatchdog::Watched {
 public:
  ExposureReactor(ServiceContext* service, grpc::CallbackServerContext* call,
                  const v1::ExposureRequest& request)
      : service_(service),
        call_(call),
        peer_(call->peer()),
        cancel_(std::make_shared<std::atomic<bool>>(false)),
        arrived_(Clock::now()),
        deadline_(SteadyDeadline(call->deadline())) {
    if (service_->watchdog != nullptr) service_->watchdog->Add(this);
    if (service_->env.metrics != nullptr) service_->env.metrics->AddInflight(1);
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
    absl::Status end;
    bool finish = false, next = false;
    {
      absl::MutexLock lock(&mu_);
      writing_ = false;
      if (!ok) {  // the client is gone: every frame not finished stops
        broken_ = true;
        pending_.clear();
        cancel_->store(true);
      }
      if (!broken_ && !pending_.empty()) {
        next = TakeNextLocked();
      } else if (done_ && !finished_) {
        finished_ = true;
        finish = true;
        end = final_status_;
      }
    }
    if (next) StartWrite(&current_);
    if (finish) EndCall(end);
  }

  void OnCancel() override { cancel_->store(true); }

  void OnDone() override {
    // No watchdog call is in progress once Remove returns.
    if (service_->watchdog != nullptr) service_->watchdog->Remove(this);
    delete this;
  }

  // ---- CallWatchdog::Watched (watchdog thread)

  bool WaitingOnClient(CallWatchdog::Clock::time_point* since,
                       CallWatchdog::Stall* kind) override {
    absl::MutexLock lock(&mu_);
    if (!writing_ || broken_) return false;
    *since = write_started_;
    *kind = CallWatchdog::Stall::kWrite;
    return true;
  }

  // As ExtractReactor's: the cancel flag stops the frames (running ones at their next
  // patch batch, queued ones before they are read, the rest are never submitted), and
  // TryCancel fails the blocked write, whose reaction or the run's Done ends the call.
  void Expire(CallWatchdog::Stall /*kind*/) override {
    stalled_.store(true);
    cancel_->store(true);
    Log(LogLevel::kWarning, "write_stalled", {{"rpc", "ExtractExposure"}, {"peer", peer_}});
    call_->TryCancel();
  }

  // ---- ExposureSink (the run's threads)

  void FrameResult(v1::ExposureFrameResult result) override {
    v1::ExposureResponse response;
    *response.mutable_frame() = std::move(result);
    Queue(std::move(response));
  }

  void Done(v1::ExposureSummary summary) override {
    // Every frame has its result. A stopped call ends with the stop's code (what the
    // client sees anyway); otherwise OK, the frames carrying their own codes.
    absl::Status end;
    if (cancel_->load() || Clock::now() >= deadline_) {
      end = Clock::now() + std::chrono::milliseconds(100) >= deadline_
                ? absl::DeadlineExceededError("the exposure's deadline passed")
                : absl::CancelledError("the exposure was cancelled");
      if (summary.failed() == 0) end = absl::OkStatus();
    }
    v1::ExposureResponse response;
    *response.mutable_summary() = std::move(summary);
    Queue(std::move(response));
    bool finish = false;
    {
      absl::MutexLock lock(&mu_);
      done_ = true;
      final_status_ = end;
      if (!writing_ && !finished_) {
        finished_ = true;
        finish = true;
      }
    }
    if (finish) EndCall(end);
  }

 private:
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
      frames.push_back(ExposureRun::CheckFrame(service_->env, h, realtime));
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

  void Queue(v1::ExposureResponse response) {
    bool next = false;
    {
      absl::MutexLock lock(&mu_);
      if (broken_ || finished_) return;
      pending_.push_back(std::move(response));
      if (!writing_) next = TakeNextLocked();
    }
    // Outside the lock, as in ExtractReactor: current_ is the write's until OnWriteDone.
    if (next) StartWrite(&current_);
  }

  // Makes the next pending message the write in flight; the caller starts it.
  bool TakeNextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    current_ = std::move(pending_.front());
    pending_.pop_front();
    writing_ = true;
    write_started_ = Clock::now();
    return true;
  }

  // The last use of `this` by our code: gRPC may run OnDone (delete) right after Finish.
  void EndCall(absl::Status status) {
    // A call cut off for a stalled client ends CANCELLED, whatever its frames did: that is
    // what its client sees (and what a single frame's cut-off counts).
    if (stalled_.load()) {
      status = absl::CancelledError(absl::StrCat(
          "responses not read for ", service_->env.limits.write_timeout_seconds,
          " s (--write_timeout_seconds): the call was cancelled"));
    }
    grpc::Status s = ToGrpcStatus(status, call_);
    if (ServerMetrics* m = service_->env.metrics; m != nullptr) {
      m->CountRequest("ExtractExposure", GrpcCodeName(s.error_code()));
      m->AddInflight(-1);
    }
    Finish(s);
  }

  ServiceContext* const service_;
  grpc::CallbackServerContext* const call_;
  const std::string peer_;
  const std::shared_ptr<std::atomic<bool>> cancel_;
  const Clock::time_point arrived_, deadline_;
  std::shared_ptr<ExposureRun> run_;  // alive until the reactor is deleted

  absl::Mutex mu_;
  std::deque<v1::ExposureResponse> pending_ ABSL_GUARDED_BY(mu_);
  v1::ExposureResponse current_;  // owned by the write in flight while writing_
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status final_status_ ABSL_GUARDED_BY(mu_);
  Clock::time_point write_started_ ABSL_GUARDED_BY(mu_);  // the write in flight's, for the watchdog
  std::atomic<bool> stalled_{false};                      // the watchdog cut the call off
};

}  // namespace

grpc::ServerWriteReactor<v1::ExposureResponse>* ExtractionService::ExtractExposure(
    grpc::CallbackServerContext* call, const v1::ExposureRequest* request) {
  return new ExposureReactor(context_, call, *request);
}

}  // namespace spexd::server
