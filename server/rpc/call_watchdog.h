// Ends calls whose client stalled: an upload that sends no data for
// --upload_idle_seconds, or responses that the client does not read for
// --write_timeout_seconds. Without it, such a client holds an upload slot, a sync-server
// thread or a worker for as long as it likes. One thread checks every registered call a
// few times per timeout; the call itself says whether it is waiting on its client and
// since when, and how to end it (TryCancel on its context).
#ifndef SPEXD_SERVER_CALL_WATCHDOG_H_
#define SPEXD_SERVER_CALL_WATCHDOG_H_

#include <chrono>
#include <set>
#include <vector>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace spexd::server {

class ServerMetrics;

class CallWatchdog {
 public:
  using Clock = std::chrono::steady_clock;
  enum class Stall { kUpload, kWrite };

  class Watched {
   public:
    virtual ~Watched() = default;
    // True when the call now waits on its client (for request data, or for a response
    // write to complete); `since` is when it last made progress. Called with the
    // watchdog's lock held: must not call back into the watchdog.
    virtual bool WaitingOnClient(Clock::time_point* since, Stall* kind) = 0;
    // Ends the stalled call (at most once per call). Called on the watchdog thread
    // without its lock; Remove waits for it to return.
    virtual void Expire(Stall kind) = 0;
    // The server starts draining: a call still receiving its request (an upload, or a
    // stream without its header) ends now with UNAVAILABLE rather than take the whole
    // upload only to be refused; one past that point is left alone.
    // Called like Expire, at most once per call.
    virtual void Drain() {}
  };

  // Zero or negative timeouts disable that check. `metrics` may be null.
  CallWatchdog(absl::Duration upload_idle, absl::Duration write_timeout, ServerMetrics* metrics);
  ~CallWatchdog();
  CallWatchdog(const CallWatchdog&) = delete;
  CallWatchdog& operator=(const CallWatchdog&) = delete;

  void Add(Watched* call);
  // After Remove returns, `call` is never touched again (an Expire in progress on the
  // watchdog thread is waited for).
  void Remove(Watched* call);
  // Calls Drain on every registered call (SpexdServer::Drain, before the grace period).
  void DrainAll();

  absl::Duration upload_idle() const { return upload_idle_; }
  absl::Duration write_timeout() const { return write_timeout_; }

 private:
  void Loop();

  const absl::Duration upload_idle_;
  const absl::Duration write_timeout_;
  ServerMetrics* const metrics_;
  absl::Mutex mu_;
  std::set<Watched*> calls_ ABSL_GUARDED_BY(mu_);
  std::set<Watched*> expired_ ABSL_GUARDED_BY(mu_);   // fired once already
  // Calls in Expire or Drain now (the loop and DrainAll may overlap).
  std::multiset<Watched*> expiring_ ABSL_GUARDED_BY(mu_);
  // Runs `fn` on `call` without the lock, unless the call was removed; Remove waits.
  template <typename Fn>
  void Unlocked(Watched* call, Fn fn) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace spexd::server

#endif  // SPEXD_SERVER_CALL_WATCHDOG_H_
