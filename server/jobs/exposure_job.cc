#include "server/jobs/exposure_job.h"

#include <limits.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
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

namespace {

// A file a frame reads: which frame, and what it is to it.
struct Reader {
  std::size_t frame = 0;
  const char* what = "";
};

// `path` (absolute) with its directory resolved: what an output path that names the same
// place canonicalises to (DataRoots::CheckOutput), whether or not the file exists; empty
// when the directory does not resolve.
std::string CanonicalPlace(const std::string& path) {
  const std::size_t slash = path.find_last_of('/');
  if (path.empty() || path[0] != '/' || slash == std::string::npos) return "";
  const std::string dir = slash == 0 ? std::string("/") : path.substr(0, slash);
  char buf[PATH_MAX];
  if (::realpath(dir.c_str(), buf) == nullptr) return "";
  const std::string real(buf);
  return absl::StrCat(real == "/" ? "" : real, "/", path.substr(slash + 1));
}

}  // namespace

absl::Status ExposureRun::CheckOutputsSpareInputs(const std::vector<Frame>& frames) {
  // Every file a frame reads, by canonical place and by device and inode (a file there).
  std::map<std::string, Reader> by_path;
  std::map<std::pair<dev_t, ino_t>, Reader> by_inode;
  auto add = [&](const std::string& path, Reader reader) {
    if (const std::string place = CanonicalPlace(path); !place.empty()) {
      by_path.emplace(place, reader);
    }
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0) by_inode.emplace(std::pair(st.st_dev, st.st_ino), reader);
  };
  for (std::size_t i = 0; i < frames.size(); ++i) {
    const Frame& f = frames[i];
    if (!f.refused.ok()) continue;
    if (f.request.image.kind == ImageSource::Kind::kServerPath) {
      add(f.request.image.server_path, {i, "input"});
    }
    // A PSF loaded from a server path has that (canonical) path as its source.
    const std::string& psf = f.request.psf != nullptr ? f.request.psf->source_name() : "";
    if (!psf.empty() && psf[0] == '/') add(psf, {i, "PSF"});
  }
  for (std::size_t i = 0; i < frames.size(); ++i) {
    if (!frames[i].refused.ok()) continue;
    for (const std::string& out : frames[i].outputs) {
      const Reader* reader = nullptr;
      if (auto at = by_path.find(out); at != by_path.end()) reader = &at->second;
      struct stat st {};
      if (reader == nullptr && ::lstat(out.c_str(), &st) == 0) {
        if (auto at = by_inode.find(std::pair(st.st_dev, st.st_ino)); at != by_inode.end()) {
          reader = &at->second;
        }
      }
      if (reader == nullptr) continue;
      return absl::InvalidArgumentError(absl::StrCat(
          "frames[", i, "]: its output '", core::EchoValue(out), "' is ",
          reader->frame == i ? std::string("its own")
                             : absl::StrCat("frames[", reader->frame, "]'s"),
          " ", reader->what,
          " (the same file, however spelled): an exposure never writes a file it reads"));
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
