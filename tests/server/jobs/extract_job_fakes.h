// The fakes of the ExtractJob tests (extract_job_test.cc): a ResponseStream that records
// what a job sends (and can stall like a client that stops reading), and a Backend that
// hands over bundles or fails as told.
#ifndef SPEXD_TESTS_SERVER_EXTRACT_JOB_FAKES_H_
#define SPEXD_TESTS_SERVER_EXTRACT_JOB_FAKES_H_

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "server/jobs/extract_job.h"

namespace spexd::server::job_fakes {

// Records every message (parsed back) and the one Finish. Optionally stalls on one
// send as a client that stops reading: after `stall_for` the call is cancelled, as
// CallWatchdog does past --write_timeout_seconds, and the send fails.
class FakeStream : public ResponseStream {
 public:
  explicit FakeStream(std::shared_ptr<std::atomic<bool>> cancel) : cancel_(std::move(cancel)) {}

  bool Send(WireMessage message) override {
    v1::ExtractResponse parsed;
    const bool parsed_ok = parsed.ParseFromString(message.Flatten());
    int index;
    {
      absl::MutexLock lock(&mu_);
      EXPECT_FALSE(finished_) << "Send after Finish";
      EXPECT_TRUE(parsed_ok) << "unparsable message " << messages_.size();
      index = sends_++;
    }
    if (index == delay_at_) std::this_thread::sleep_for(delay_for_);  // a slow write
    if (index == stall_at_) {
      std::this_thread::sleep_for(stall_for_);
      cancel_->store(true);
      return false;
    }
    if (index >= fail_from_) return false;  // the client is gone
    absl::MutexLock lock(&mu_);
    messages_.push_back(std::move(parsed));
    return true;
  }

  void Finish(const absl::Status& status) override {
    absl::MutexLock lock(&mu_);
    ++finishes_;
    finished_ = true;
    status_ = status;
  }

  void StallAt(int send, std::chrono::milliseconds for_how_long) {
    stall_at_ = send;
    stall_for_ = for_how_long;
  }
  void FailFrom(int send) { fail_from_ = send; }
  // Send number `send` takes `how_long` and succeeds (a client slow to read one message).
  void DelayAt(int send, std::chrono::milliseconds how_long) {
    delay_at_ = send;
    delay_for_ = how_long;
  }

  std::vector<v1::ExtractResponse> messages() {
    absl::MutexLock lock(&mu_);
    return messages_;
  }
  absl::Status status() {
    absl::MutexLock lock(&mu_);
    return status_;
  }
  int finishes() {
    absl::MutexLock lock(&mu_);
    return finishes_;
  }
  // The first message with `kind`, or -1.
  int IndexOf(v1::ExtractResponse::KindCase kind) {
    absl::MutexLock lock(&mu_);
    for (std::size_t i = 0; i < messages_.size(); ++i) {
      if (messages_[i].kind_case() == kind) return static_cast<int>(i);
    }
    return -1;
  }

 private:
  const std::shared_ptr<std::atomic<bool>> cancel_;
  int stall_at_ = -1, delay_at_ = -1;
  std::chrono::milliseconds delay_for_{0};
  std::chrono::milliseconds stall_for_{0};
  int fail_from_ = 1 << 30;
  absl::Mutex mu_;
  int sends_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<v1::ExtractResponse> messages_ ABSL_GUARDED_BY(mu_);
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  int finishes_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status status_ ABSL_GUARDED_BY(mu_) = absl::UnknownError("never finished");
};

// Hands over the job's bundles in order, each lit with flux = bundle + 1 photons per bin
// and ivar = 1, or behaves as `mode` says.
class FakeBackend : public core::Backend {
 public:
  enum class Mode {
    kAll,             // every bundle, then OK
    kFailAfterOne,    // one bundle, then `failure`
    kThrowAfterOne,   // one bundle, then std::bad_alloc
    kWaitForCancel,   // one bundle, then wait for job.cancel: CANCELLED (as core backends)
    kUntilSinkStops,  // bundle after bundle (every 20 ms) until the sink refuses one
    kNoUsableBins,    // every bundle with ivar = 0 (nothing usable)
  };
  explicit FakeBackend(Mode mode, absl::Status failure = absl::OkStatus())
      : mode_(mode), failure_(std::move(failure)) {}

  std::string name() const override { return "fake"; }

  absl::StatusOr<core::ExtractionSummary> Extract(const core::ExtractionJob& job,
                                                  const core::BundleSink& sink) override {
    const core::PatchPlan& plan = job.geometry->plan();
    std::vector<int> bundles = job.bundles;
    if (bundles.empty()) {
      for (int b = 0; b < plan.nbundles; ++b) bundles.push_back(b);
    }
    core::ExtractionSummary summary;
    for (std::size_t i = 0;; ++i) {
      if (mode_ != Mode::kUntilSinkStops && i == bundles.size()) break;
      const int b = bundles[i % bundles.size()];
      if (i > 0) {
        if (mode_ == Mode::kFailAfterOne) return failure_;
        if (mode_ == Mode::kThrowAfterOne) throw std::bad_alloc();
        if (mode_ == Mode::kWaitForCancel) {
          while (!core::CancelRequested(job)) std::this_thread::sleep_for(std::chrono::milliseconds(5));
          return absl::CancelledError("cancelled");
        }
        if (mode_ == Mode::kUntilSinkStops) std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      core::BundleResult r;
      const int fiber0 = plan.bundle_fiber_begin(b);
      const int nfib = std::min(plan.bundlesize, plan.specmin + plan.nspec - fiber0);
      r.Allocate(b, fiber0, nfib, plan.nwave, plan.ndiag);
      std::fill(r.flux.begin(), r.flux.end(), b + 1.0);
      std::fill(r.ivar.begin(), r.ivar.end(), mode_ == Mode::kNoUsableBins ? 0.0 : 1.0);
      r.counts.extracted = 1;
      summary.counts += r.counts;
      ++handed_over;
      if (absl::Status s = sink(std::move(r)); !s.ok()) return s;
    }
    summary.stage_seconds["fake"] = 0.5;
    return summary;
  }

  std::atomic<int> handed_over{0};

 private:
  Mode mode_;
  absl::Status failure_;
};

}  // namespace spexd::server::job_fakes

#endif  // SPEXD_TESTS_SERVER_EXTRACT_JOB_FAKES_H_
