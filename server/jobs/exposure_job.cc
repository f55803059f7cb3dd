#include "server/jobs/exposure_job.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/error_text.h"
#include "server/platform/data_roots.h"
#include "server/platform/log.h"
#include "server/platform/metrics.h"
#include "server/state/psf_cache.h"

namespace spexd::server {
namespace {

double Seconds(ExposureRun::Clock::time_point a, ExposureRun::Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// Tag byte of ExtractResponse.summary (field 4, length-delimited) at the start of a
// serialized response: the only message of a frame the exposure keeps.
constexpr unsigned char kSummaryTag = (4 << 3) | 2;

}  // namespace

// One frame's call side: keeps the summary, drops the header and bundles (the frame is
// written by the job), and hands the frame's end to the run. Deletes itself in Finish.
class ExposureRun::FrameStream final : public ResponseStream {
 public:
  FrameStream(std::shared_ptr<ExposureRun> run, int index) : run_(std::move(run)), index_(index) {}

  bool Send(WireMessage message) override {
    const WireMessage::Piece* first = message.pieces.empty() ? nullptr : &message.pieces.front();
    if (first != nullptr && first->borrowed == nullptr && first->size > 0 &&
        static_cast<unsigned char>(message.framing[first->offset]) == kSummaryTag) {
      v1::ExtractResponse response;
      if (response.ParseFromString(message.Flatten()) && response.has_summary()) {
        summary_ = std::move(*response.mutable_summary());
      }
    }
    return !run_->Stopped();
  }

  void Finish(const absl::Status& status) override {
    std::shared_ptr<ExposureRun> run = std::move(run_);
    const int index = index_;
    v1::ExtractSummary summary = std::move(summary_);
    delete this;
    run->FrameEnded(index, status, summary);
  }

 private:
  std::shared_ptr<ExposureRun> run_;
  const int index_;
  v1::ExtractSummary summary_;
};

absl::Status ExposureRun::CheckDistinctOutputs(const std::vector<Frame>& frames) {
  std::map<std::string, std::size_t> first;  // canonical path -> frame
  for (std::size_t i = 0; i < frames.size(); ++i) {
    for (const std::string& path : frames[i].outputs) {
      auto [at, added] = first.emplace(path, i);
      if (added) continue;
      return absl::InvalidArgumentError(absl::StrCat(
          "frames[", i, "]: its output '", core::EchoValue(path), "' is also frames[",
          at->second, "]'s (the same file, however spelled)"));
    }
  }
  return absl::OkStatus();
}

int ExposureRun::Window(Scheduler& scheduler) {
  // As many as the server holds at once (spexd_server.cc, frames_held): those prepared
  // ahead, and per worker the one extracting and those streaming (writing their files).
  return scheduler.prefetch_bound() + scheduler.num_workers() + scheduler.streaming_threads();
}

ExposureRun::ExposureRun(const JobEnvironment& env, Scheduler* scheduler, std::vector<Frame> frames,
                         bool realtime, std::shared_ptr<std::atomic<bool>> cancel,
                         Clock::time_point arrived, Clock::time_point deadline, std::string tag,
                         ExposureSink* sink)
    : env_(env),
      scheduler_(scheduler),
      frames_(std::move(frames)),
      realtime_(realtime),
      cancel_(std::move(cancel)),
      arrived_(arrived),
      deadline_(deadline),
      tag_(std::move(tag)),
      sink_(sink),
      window_(std::max(1, Window(*scheduler))) {
  for (const Frame& f : frames_) {
    paths_.emplace_back(f.input_path, f.output_path);
  }
}

bool ExposureRun::Stopped() const { return cancel_->load() || Clock::now() >= deadline_; }

absl::Status ExposureRun::StopStatus() const {
  // As ExtractJob::StopStatus: a cancel this close to the deadline is the deadline.
  constexpr auto kSlack = std::chrono::milliseconds(100);
  if (deadline_ != Clock::time_point::max() && Clock::now() + kSlack >= deadline_) {
    return absl::DeadlineExceededError("the exposure's deadline passed before this frame finished");
  }
  return absl::CancelledError("the exposure was cancelled before this frame finished");
}

void ExposureRun::Start(Scheduler::Ticket admission) { Fill(std::move(admission)); }

void ExposureRun::Fill(Scheduler::Ticket admission) {
  const int n = static_cast<int>(frames_.size());
  for (;;) {
    int index = -1;
    absl::Status not_run;
    {
      absl::MutexLock lock(&mu_);
      if (next_ >= n) break;
      const Frame& f = frames_[static_cast<std::size_t>(next_)];
      if (!f.refused.ok()) {
        not_run = f.refused;
      } else if (Stopped()) {
        not_run = StopStatus();
      } else if (in_flight_ >= window_) {
        break;  // the next frame goes when one of these ends (FrameEnded)
      } else {
        ++in_flight_;
      }
      index = next_++;
    }
    // The frame at `index` belongs to this thread alone from here.
    if (!not_run.ok()) {
      Report(index, not_run, nullptr);
      continue;
    }
    JobRequest& request = frames_[static_cast<std::size_t>(index)].request;
    if (request.client_tag.empty()) request.client_tag = absl::StrCat(tag_, "#", index);
    request.arrived = arrived_;
    request.admitted = Clock::now();
    request.deadline = deadline_;
    Scheduler::Ticket ticket =
        admission.valid() ? std::move(admission) : scheduler_->ReserveAdmitted(realtime_);
    auto* stream = new FrameStream(shared_from_this(), index);
    auto job = std::make_shared<ExtractJob>(env_, std::move(request), stream, cancel_);
    // A job refused here (shutting down) ends at once through FrameEnded.
    scheduler_->Submit(std::move(ticket), std::move(job));
  }
}

void ExposureRun::FrameEnded(int index, const absl::Status& status, const v1::ExtractSummary& summary) {
  {
    absl::MutexLock lock(&mu_);
    --in_flight_;
  }
  Report(index, status, status.ok() ? &summary : nullptr);
  Fill(Scheduler::Ticket());
}

void ExposureRun::Report(int index, const absl::Status& status, const v1::ExtractSummary* summary) {
  v1::ExposureFrameResult result;
  result.set_index(index);
  result.set_code(static_cast<int>(status.code()));
  result.set_message(std::string(status.message()));
  result.set_server_path(paths_[static_cast<std::size_t>(index)].first);
  result.set_server_output_path(paths_[static_cast<std::size_t>(index)].second);
  if (summary != nullptr) *result.mutable_summary() = *summary;
  if (env_.metrics != nullptr) {
    env_.metrics->CountExposureFrame(std::string(absl::StatusCodeToString(status.code())).c_str());
  }
  sink_->FrameResult(std::move(result));
  bool done = false;
  v1::ExposureSummary total;
  {
    absl::MutexLock lock(&mu_);
    ++reported_;
    if (status.ok()) ++succeeded_;
    done = reported_ == static_cast<int>(frames_.size());
    total.set_frames(reported_);
    total.set_succeeded(succeeded_);
    total.set_failed(reported_ - succeeded_);
  }
  if (!done) return;
  total.set_total_seconds(Seconds(arrived_, Clock::now()));
  if (env_.metrics != nullptr) env_.metrics->ObserveExposure(total.total_seconds());
  Log(total.failed() == 0 ? LogLevel::kInfo : LogLevel::kWarning, "exposure_done",
      {{"tag", tag_},
       {"frames", total.frames()},
       {"succeeded", total.succeeded()},
       {"failed", total.failed()},
       {"total_s", total.total_seconds()}});
  sink_->Done(std::move(total));
}

}  // namespace spexd::server
