#include "server/rpc/call_watchdog.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "server/platform/metrics.h"

namespace spexd::server {

CallWatchdog::CallWatchdog(absl::Duration upload_idle, absl::Duration write_timeout,
                           ServerMetrics* metrics)
    : upload_idle_(upload_idle), write_timeout_(write_timeout), metrics_(metrics) {
  thread_ = std::thread([this] { Loop(); });
}

CallWatchdog::~CallWatchdog() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

void CallWatchdog::Add(Watched* call) {
  absl::MutexLock lock(&mu_);
  calls_.insert(call);
}

void CallWatchdog::Remove(Watched* call) {
  absl::MutexLock lock(&mu_);
  calls_.erase(call);
  expired_.erase(call);
  auto idle = [this, call]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return expiring_.count(call) == 0;
  };
  mu_.Await(absl::Condition(&idle));
}

template <typename Fn>
void CallWatchdog::Unlocked(Watched* call, Fn fn) {
  if (calls_.count(call) == 0) return;  // removed meanwhile
  auto at = expiring_.insert(call);
  mu_.Unlock();
  fn();
  mu_.Lock();
  expiring_.erase(at);
}

void CallWatchdog::DrainAll() {
  absl::MutexLock lock(&mu_);
  const std::vector<Watched*> calls(calls_.begin(), calls_.end());
  for (Watched* call : calls) Unlocked(call, [call] { call->Drain(); });
}

void CallWatchdog::Loop() {
  // A few checks per timeout: a stalled call ends within ~1.25 timeouts.
  absl::Duration tick = absl::Seconds(1);
  for (absl::Duration d : {upload_idle_, write_timeout_}) {
    if (d > absl::ZeroDuration()) tick = std::min(tick, d / 4);
  }
  tick = std::max(tick, absl::Milliseconds(10));
  absl::MutexLock lock(&mu_);
  for (;;) {
    auto stop = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_; };
    if (mu_.AwaitWithTimeout(absl::Condition(&stop), tick)) return;
    const Clock::time_point now = Clock::now();
    std::vector<std::pair<Watched*, Stall>> stalled;
    for (Watched* call : calls_) {
      Clock::time_point since;
      Stall kind = Stall::kUpload;
      if (expired_.count(call) != 0 || !call->WaitingOnClient(&since, &kind)) continue;
      const absl::Duration limit = kind == Stall::kUpload ? upload_idle_ : write_timeout_;
      if (limit > absl::ZeroDuration() && absl::FromChrono(now - since) > limit) {
        stalled.emplace_back(call, kind);
      }
    }
    for (auto [call, kind] : stalled) {
      if (calls_.count(call) == 0) continue;  // removed while we expired another
      expired_.insert(call);
      Unlocked(call, [this, c = call, k = kind] {
        if (metrics_ != nullptr) metrics_->CountStalledCall(k == Stall::kUpload ? "upload" : "write");
        c->Expire(k);
      });
    }
  }
}

}  // namespace spexd::server
