// The write side of a streaming call: responses queued by the job's threads wait, in
// order, for the one write gRPC allows at a time, and the call ends only after the last
// of them is written, or at once when the client is gone. Its mutex is the call's: the
// reactor guards its read side with it too, so that the watchdog (WaitingOnClient) and
// the drain see one state.
#ifndef SPEXD_SERVER_RPC_RESPONSE_QUEUE_H_
#define SPEXD_SERVER_RPC_RESPONSE_QUEUE_H_

#include <chrono>
#include <cstddef>
#include <deque>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace spexd::server {

template <typename Message>
class ResponseQueue {
 public:
  using Clock = std::chrono::steady_clock;

  // What the reactor does next, outside the lock: start the write of `write` (the
  // queue's until WriteDone), or end the call with `status`.
  struct Step {
    Message* write = nullptr;
    bool end = false;
    absl::Status status;
  };

  absl::Mutex mu;

  // Queues `message`, dropped once the client is gone or the call has ended; the write
  // starts now when none is in flight.
  Step Push(Message message) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (broken_ || ended_) return {};
    pending_.push_back(std::move(message));
    return writing_ ? Step{} : TakeNext();
  }

  // The write in flight completed, or failed (`ok` false: the client is gone, the
  // queue is dropped and broken() set): the next write, or the end decided by End.
  Step WriteDone(bool ok) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    writing_ = false;
    write_started_ = Clock::now();
    if (!ok) {
      broken_ = true;
      pending_.clear();
    }
    if (!broken_ && !pending_.empty()) return TakeNext();
    if (end_requested_ && !ended_) {
      ended_ = true;
      return {nullptr, true, status_};
    }
    return {};
  }

  // The call is to end with `status` once the queued responses are written (at once when
  // none is, or the client is gone). Only the first call counts.
  Step End(const absl::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (end_requested_) return {};
    end_requested_ = true;
    status_ = status;
    if (writing_ || (!pending_.empty() && !broken_)) return {};  // WriteDone ends it
    ended_ = true;
    return {nullptr, true, status_};
  }

  // Ends the call now with `status`, before any response (no write may be in flight).
  void EndNow(const absl::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    end_requested_ = ended_ = true;
    status_ = status;
  }

  // A call whose end is decided but not reached ends with `status` instead.
  void ReplaceEndStatus(const absl::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (end_requested_ && !ended_) status_ = status;
  }

  // For the watchdog: whether a write waits on the client, and since when.
  bool WaitingOnWrite(Clock::time_point* since) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (!writing_ || broken_) return false;
    *since = write_started_;
    return true;
  }

  std::size_t queued() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return pending_.size(); }
  bool broken() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return broken_; }
  bool end_requested() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return end_requested_; }

 private:
  Step TakeNext() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    current_ = std::move(pending_.front());
    pending_.pop_front();
    writing_ = true;
    write_started_ = Clock::now();
    return {&current_, false, {}};
  }

  std::deque<Message> pending_ ABSL_GUARDED_BY(mu);
  Message current_;  // owned by the write in flight while writing_
  bool writing_ ABSL_GUARDED_BY(mu) = false;
  bool broken_ ABSL_GUARDED_BY(mu) = false;
  bool end_requested_ ABSL_GUARDED_BY(mu) = false;
  bool ended_ ABSL_GUARDED_BY(mu) = false;
  absl::Status status_ ABSL_GUARDED_BY(mu);
  Clock::time_point write_started_ ABSL_GUARDED_BY(mu);
};

}  // namespace spexd::server

#endif  // SPEXD_SERVER_RPC_RESPONSE_QUEUE_H_
