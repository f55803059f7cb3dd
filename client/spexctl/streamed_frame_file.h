// spexctl's frame file written while the spectra stream in, so that the host side keeps
// up with the GPU: laid out when the FrameHeader arrives (core::ProgressiveFrameFile in a temporary
// beside the output, core::AtomicFile), each bundle's rows written on a thread of its own
// as the bundle completes (core::FileRowWriter), so that after the stream only the MASK,
// SCORES and headers are left before the fsync and rename. The bytes are those that
// FrameToFits gives for the rebuilt frame (CHECKSUM dates aside), deflated as one gzip
// member chunk by chunk while the rows come for a .gz path: the whole-file path, kept
// for -m (the model comes after the last bundle).
#ifndef SPEXD_CLIENT_STREAMED_FRAME_FILE_H_
#define SPEXD_CLIENT_STREAMED_FRAME_FILE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/base/atomic_file.h"
#include "core/base/task_pool.h"
#include "core/frame/extraction_result.h"
#include "core/frame/file_row_writer.h"
#include "core/frame/frame.h"
#include "core/frame/frame_writer.h"
#include "core/frame/progressive_frame_file.h"
#include "spexd/v1/spexd.pb.h"

namespace spexd::client {

// One at a time per process: a named temporary is removed on SIGINT/SIGTERM/SIGHUP through
// one process-wide slot (spexctl writes one frame).
class StreamedFrameFile {
 public:
  // At the FrameHeader: the temporary for `path` and the file's layout for the header's
  // bundles. `meta` as Metadata gives it; with `scores_given` (a float32 stream, whose
  // scores come after the last bundle) no scores are computed from the rows.
  static absl::StatusOr<std::unique_ptr<StreamedFrameFile>> Create(
      const std::string& path, const v1::FrameHeader& header, core::FrameMetadata meta,
      bool scores_given, const core::FitsWriteOptions& options, bool unnamed_temporary = true);
  // Waits for the rows being written; uncommitted, leaves nothing behind.
  ~StreamedFrameFile();
  StreamedFrameFile(const StreamedFrameFile&) = delete;
  StreamedFrameFile& operator=(const StreamedFrameFile&) = delete;

  // Queues a complete bundle's rows (RemoteFrameBuilder's sink); an earlier write's error.
  absl::Status AddBundle(int row, std::shared_ptr<const core::BundleResult> bundle);
  // The same for a float32 stream's rows as they came (the file's scores are then given).
  absl::Status AddRows(int row, std::shared_ptr<const core::Float32Rows> rows);
  // After the stream: the rows waited for, then MASK (frame.mask), SCORES (`given_scores`
  // when set, else those of the rows), the headers; fsync and rename over the path.
  absl::Status Commit(const core::Frame& frame, const std::vector<core::FrameScore>* given_scores);
  // Where Commit's time went: waiting for rows still queued, the MASK, SCORES and
  // headers (ProgressiveFrameFile::Finish), fsync and rename; and the rows' own time,
  // spent while the stream arrived.
  struct Times {
    double rows_wait = 0, finish = 0, sync = 0, rows = 0;
  };
  const Times& times() const { return times_; }
  // The named temporary, empty when unnamed (tests).
  std::string temporary_name() const { return file_.temporary_name(); }

 private:
  explicit StreamedFrameFile(core::AtomicFile file) : file_(std::move(file)) {}
  // Destroyed in reverse: the writer waits before the layout, its thread and the file go.
  core::AtomicFile file_;
  core::TaskPool thread_;
  std::unique_ptr<core::ProgressiveFrameFile> layout_;
  std::unique_ptr<core::FileRowWriter> rows_;
  Times times_;
};

}  // namespace spexd::client

#endif  // SPEXD_CLIENT_STREAMED_FRAME_FILE_H_
