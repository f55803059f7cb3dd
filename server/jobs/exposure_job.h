// An exposure as one job (ExtractExposure): many frames, each an ordinary
// ExtractJob (same loaders, workers, streaming stage and frame file as ExtractFrame with
// a server_output_path, hence the same bytes), under one deadline and one cancel flag.
//
// The run keeps a window of its frames admitted to the scheduler (enough to keep every
// loader and worker busy, Window) and submits the next frame as each one ends, so that
// one large exposure neither fills the queue for everyone else nor holds decoded images
// it cannot extract yet; the scheduler orders all admitted frames earliest deadline first
// within their priority (Job::deadline; a frame without one as if due a horizon after its
// own submission, like a single frame). Each frame's end (success or its own error) is
// reported at once to the ExposureSink; a failed frame never stops the others. gRPC-free:
// the reactor (server/rpc/exposure_service.cc) is the sink.
#ifndef SPEXD_SERVER_EXPOSURE_JOB_H_
#define SPEXD_SERVER_EXPOSURE_JOB_H_

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "server/jobs/extract_job.h"
#include "server/state/scheduler.h"
#include "spexd/v1/spexd.pb.h"

namespace spexd::server {

// Frames one ExposureRequest may carry (a DESI exposure has 30; CheckExposureRequest,
// server/rpc/exposure_decode.h).
inline constexpr int kMaxExposureFrames = 1000;

// Where an exposure's results go (the reactor, or a test). FrameResult may be called from
// several threads at once; Done is called once, after every FrameResult has returned,
// and the run never uses the sink afterwards.
class ExposureSink {
 public:
  virtual ~ExposureSink() = default;
  virtual void FrameResult(v1::ExposureFrameResult result) = 0;
  virtual void Done(v1::ExposureSummary summary) = 0;
};

class ExposureRun : public std::enable_shared_from_this<ExposureRun> {
 public:
  using Clock = std::chrono::steady_clock;

  struct Frame {
    JobRequest request;
    absl::Status refused;  // not OK: reported as the frame's result, never submitted
    std::vector<std::string> outputs;  // canonical paths of the files it writes (checked)
    std::string input_path, output_path;  // as requested, for its result
  };

  // No two frames of an exposure may write one file, however spelled: INVALID_ARGUMENT
  // for the whole exposure, naming the later frame, before any frame runs.
  static absl::Status CheckDistinctOutputs(const std::vector<Frame>& frames);

  // No frame may write a file that a frame reads, its own or another's: its input or its
  // PSF (when loaded from a server path), compared by canonical path (a file not there
  // yet included: it would be read or not depending on the order frames run in) and by
  // device and inode (a hard link, a bind mount). With `overwrite` a frame would replace
  // the file another frame reads, racing with that frame. INVALID_ARGUMENT for the whole
  // exposure, naming both frames, before any frame runs; refused frames neither read nor
  // write and are left out.
  static absl::Status CheckOutputsSpareInputs(const std::vector<Frame>& frames);

  // Frames in flight per exposure: the scheduler's prefetch bound, plus per worker the
  // frame extracting and those its streaming threads write.
  static int Window(Scheduler& scheduler);

  // `env`, `scheduler` and `sink` outlive the run's last call to the sink. `cancel` is the
  // call's flag (client cancel, deadline, broken stream); `deadline` the call's (steady
  // clock, max() for none). Create with std::make_shared.
  ExposureRun(const JobEnvironment& env, Scheduler* scheduler, std::vector<Frame> frames,
              bool realtime, std::shared_ptr<std::atomic<bool>> cancel, Clock::time_point arrived,
              Clock::time_point deadline, std::string tag, ExposureSink* sink);

  // Reports the refused frames and submits the first ones: `admission` (a queue slot from
  // Scheduler::Reserve, taken before any result was sent) goes to the first frame, the
  // others get Scheduler::ReserveAdmitted slots. An exposure without a valid frame ends
  // here (Done) and drops the slot.
  void Start(Scheduler::Ticket admission);

 private:
  class FrameStream;

  // A frame ended (its ExtractJob's Finish): reports it, submits the next.
  void FrameEnded(int index, const absl::Status& status, const v1::ExtractSummary& summary);
  void Report(int index, const absl::Status& status, const v1::ExtractSummary* summary);
  // Submits frames while fewer than the window are in flight; once the call is stopped,
  // reports the frames not yet submitted with the stop status instead.
  void Fill(Scheduler::Ticket admission);
  bool Stopped() const;
  absl::Status StopStatus() const;

  const JobEnvironment& env_;
  Scheduler* const scheduler_;
  std::vector<Frame> frames_;
  const bool realtime_;
  const std::shared_ptr<std::atomic<bool>> cancel_;
  const Clock::time_point arrived_, deadline_;
  const std::string tag_;
  ExposureSink* const sink_;
  const int window_;
  // Each frame's input and output path, for its result (the requests move into their jobs).
  std::vector<std::pair<std::string, std::string>> paths_;

  absl::Mutex mu_;
  int next_ ABSL_GUARDED_BY(mu_) = 0;       // next frame to submit or report
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;  // submitted, not ended
  int reported_ ABSL_GUARDED_BY(mu_) = 0;   // FrameResult calls returned
  int succeeded_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace spexd::server

#endif  // SPEXD_SERVER_EXPOSURE_JOB_H_
