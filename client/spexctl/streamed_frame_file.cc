#include "client/spexctl/streamed_frame_file.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/io/gzip_name.h"

namespace spexd::client {
namespace {

// A named temporary lives for the whole extraction: an interrupted spexctl (SIGINT,
// SIGTERM, SIGHUP) removes it before dying of the signal. An unnamed one (O_TMPFILE)
// needs nothing: it never had a name. One at a time (spexctl writes one frame).
char g_temporary[PATH_MAX];
struct sigaction g_previous[3];
constexpr int kSignals[3] = {SIGINT, SIGTERM, SIGHUP};

void RemoveTemporaryAndDie(int sig) {
  if (g_temporary[0] != '\0') ::unlink(g_temporary);
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

void RemoveOnSignal(const std::string& name) {
  if (name.empty() || name.size() >= sizeof(g_temporary)) return;
  std::memcpy(g_temporary, name.c_str(), name.size() + 1);
  struct sigaction sa = {};
  sa.sa_handler = RemoveTemporaryAndDie;
  sigemptyset(&sa.sa_mask);
  for (int i = 0; i < 3; ++i) ::sigaction(kSignals[i], &sa, &g_previous[i]);
}

void ForgetOnSignal() {
  if (g_temporary[0] == '\0') return;
  for (int i = 0; i < 3; ++i) ::sigaction(kSignals[i], &g_previous[i], nullptr);
  g_temporary[0] = '\0';
}

}  // namespace

absl::StatusOr<std::unique_ptr<StreamedFrameFile>> StreamedFrameFile::Create(
    const std::string& path, const v1::FrameHeader& h, core::FrameMetadata meta,
    bool scores_given, const core::FitsWriteOptions& options, bool unnamed_temporary) {
  // The rows as RemoteFrameBuilder stacks them: the announced bundles' fibres in order.
  core::FrameFileShape shape;
  if (h.bundles_size() > 0) shape.specmin = h.specmin() + h.bundles(0) * h.bundlesize();
  for (int b : h.bundles()) {
    const int64_t first = int64_t{b} * h.bundlesize();
    shape.nspec += static_cast<int>(std::clamp<int64_t>(int64_t{h.nspec()} - first, 0, h.bundlesize()));
  }
  shape.nwave = h.wave_size();
  shape.ndiag = h.ndiag();
  shape.wave.assign(h.wave().begin(), h.wave().end());
  if (scores_given) meta.given_scores.emplace();  // announced: Commit gives them
  SPEXD_ASSIGN_OR_RETURN(core::AtomicFile file, core::AtomicFile::Create(path, unnamed_temporary));
  std::unique_ptr<StreamedFrameFile> out(new StreamedFrameFile(std::move(file)));
  RemoveOnSignal(out->file_.temporary_name());
  // A .gz file is deflated from the image in memory; a plain one is written without it.
  const bool gzip = core::IsGzipName(path);
  SPEXD_ASSIGN_OR_RETURN(out->layout_, core::ProgressiveFrameFile::Create(
                                           shape, meta, out->file_.fd(), path, options,
                                           /*keep_image=*/gzip, gzip));
  out->thread_.AddThreads(1);
  out->rows_ = std::make_unique<core::FileRowWriter>(out->layout_.get(), &out->thread_);
  return out;
}

StreamedFrameFile::~StreamedFrameFile() {
  rows_.reset();  // before the file it writes into goes
  ForgetOnSignal();
}

absl::Status StreamedFrameFile::AddBundle(int row, std::shared_ptr<const core::BundleResult> b) {
  return rows_->Add(row, std::move(b));
}

absl::Status StreamedFrameFile::AddRows(int row, std::shared_ptr<const core::Float32Rows> rows) {
  return rows_->Add(row, std::move(rows));
}

absl::Status StreamedFrameFile::Commit(const core::Frame& frame,
                                       const std::vector<core::FrameScore>* given_scores) {
  using Clock = std::chrono::steady_clock;
  auto lap = [t = Clock::now()](double* into) mutable {
    const Clock::time_point now = Clock::now();
    *into = std::chrono::duration<double>(now - t).count();
    t = now;
  };
  SPEXD_RETURN_IF_ERROR(rows_->Wait());
  lap(&times_.rows_wait);
  times_.rows = rows_->seconds();
  SPEXD_RETURN_IF_ERROR(layout_->Finish(frame, given_scores));
  lap(&times_.finish);
  SPEXD_RETURN_IF_ERROR(file_.Commit());
  lap(&times_.sync);
  ForgetOnSignal();
  return absl::OkStatus();
}

}  // namespace spexd::client
