// What every streaming call of the Extraction service shares (ExtractFrame and
// ExtractBundles, extraction_service.cc; ExtractExposure, exposure_service.cc): its cancel
// flag, its deadline on the steady clock, its place in the CallWatchdog and in the
// in-flight metrics, and how it stops: the client cancels (OnCancel), the watchdog cuts
// off a stalled client (Expire), gRPC is done with it (OnDone).
#ifndef SPEXD_SERVER_RPC_WATCHED_REACTOR_H_
#define SPEXD_SERVER_RPC_WATCHED_REACTOR_H_

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <utility>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "server/platform/log.h"
#include "server/platform/metrics.h"
#include "server/platform/status_util.h"
#include "server/rpc/call_watchdog.h"
#include "server/rpc/service_context.h"

namespace spexd::server {

// `Reactor`: the gRPC reactor the call is (grpc::ServerBidiReactor<...>,
// grpc::ServerWriteReactor<...>).
template <typename Reactor>
class WatchedReactor : public Reactor, public CallWatchdog::Watched {
 public:
  using Clock = std::chrono::steady_clock;

  // The cancel flag stops the job (polled between patch batches and by each response it
  // queues); a response waiting for room in the queue wakes (WakeWriters).
  void OnCancel() override {
    cancel_->store(true);
    WakeWriters();
  }

  // gRPC's last reaction. No watchdog call is in progress once Remove returns.
  void OnDone() override {
    if (service_->watchdog != nullptr) service_->watchdog->Remove(this);
    delete this;
  }

  // The watchdog's cut-off (its thread): a pending read or write then fails, the reactions
  // end the call, and the job stops at its next response or patch batch (the cancel flag).
  void Expire(CallWatchdog::Stall kind) override {
    stalled_.store(true);
    cancel_->store(true);
    Log(LogLevel::kWarning,
        kind == CallWatchdog::Stall::kUpload ? "upload_stalled" : "write_stalled",
        {{"rpc", rpc_}, {"peer", peer_}});
    call_->TryCancel();
  }

 protected:
  WatchedReactor(ServiceContext* service, grpc::CallbackServerContext* call, std::string rpc)
      : service_(service),
        call_(call),
        rpc_(std::move(rpc)),
        peer_(call->peer()),
        cancel_(std::make_shared<std::atomic<bool>>(false)),
        arrived_(Clock::now()),
        deadline_(SteadyDeadline(call->deadline())) {}

  // Registers the call with the watchdog and counts it in flight: first thing in the
  // derived reactor's constructor body, once the watchdog may call it.
  void Watch() {
    if (service_->watchdog != nullptr) service_->watchdog->Add(this);
    if (service_->env.metrics != nullptr) service_->env.metrics->AddInflight(1);
  }

  // The call's end as gRPC will report it, counted (requests by code, one fewer in flight).
  grpc::Status Ended(const absl::Status& status) {
    grpc::Status s = ToGrpcStatus(status, call_);
    if (ServerMetrics* m = service_->env.metrics; m != nullptr) {
      m->CountRequest(rpc_, GrpcCodeName(s.error_code()));
      m->AddInflight(-1);
    }
    return s;
  }

  // Wakes a response waiting for room in the queue, to see the cancel flag now.
  virtual void WakeWriters() {}

  bool stalled() const { return stalled_.load(); }
  bool cancelled() const { return cancel_->load(); }

  ServiceContext* const service_;
  grpc::CallbackServerContext* const call_;  // valid until OnDone
  const std::string rpc_;
  const std::string peer_;
  // Set by the client's cancel, a broken stream, the watchdog; read by the job.
  const std::shared_ptr<std::atomic<bool>> cancel_;
  const Clock::time_point arrived_;
  const Clock::time_point deadline_;  // max() when none

 private:
  static Clock::time_point SteadyDeadline(std::chrono::system_clock::time_point deadline) {
    const auto now_sys = std::chrono::system_clock::now();
    // gRPC reports "no deadline" as a time far in the future.
    if (deadline - now_sys > std::chrono::hours(24 * 365)) return Clock::time_point::max();
    return Clock::now() + std::chrono::duration_cast<Clock::duration>(deadline - now_sys);
  }

  std::atomic<bool> stalled_{false};  // the watchdog cut the call off
};

}  // namespace spexd::server

#endif  // SPEXD_SERVER_RPC_WATCHED_REACTOR_H_
