// A job's frame-file rows (core::ProgressiveFrameFile::AddRows) written beside the
// streaming task, one bundle at a time, on a host pool thread (issue 22): on the H100 the
// rows of a frame take ~0.16 s under load, and on the streaming task they put it behind
// the GPU, so that the request ended ~0.3 s after its extraction (docs/perf.md).
#ifndef SPEXD_SERVER_FILE_ROW_WRITER_H_
#define SPEXD_SERVER_FILE_ROW_WRITER_H_

#include <deque>
#include <memory>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "core/base/task_pool.h"
#include "core/frame/extraction_result.h"
#include "core/frame/progressive_frame_file.h"

namespace spexd::server {

class FileRowWriter {
 public:
  // `file` and `pool` (null: every write on the caller's thread) outlive this object.
  FileRowWriter(core::ProgressiveFrameFile* file, core::TaskPool* pool)
      : s_(std::make_shared<State>(file)), pool_(pool) {}
  // Waits for the writes in progress: they use `file` and the bundles.
  ~FileRowWriter();
  FileRowWriter(const FileRowWriter&) = delete;
  FileRowWriter& operator=(const FileRowWriter&) = delete;

  // Queues the bundle's rows at file row `row`; the bundle is kept until written. Returns
  // the first error of an earlier write, if any (nothing more is written after one).
  absl::Status Add(int row, std::shared_ptr<const core::BundleResult> bundle);
  // Waits until every queued bundle is written; the first error, if any.
  absl::Status Wait();
  // Seconds spent in AddRows, summed (the stage output_file_rows). After Wait.
  double seconds();

 private:
  // Shared with the pool task, so that a task still unlocking after its last write never
  // touches a destroyed writer.
  struct State {
    explicit State(core::ProgressiveFrameFile* f) : file(f) {}
    core::ProgressiveFrameFile* const file;
    absl::Mutex mu;
    std::deque<std::pair<int, std::shared_ptr<const core::BundleResult>>> queue ABSL_GUARDED_BY(mu);
    bool running ABSL_GUARDED_BY(mu) = false;  // a Drain is posted or running
    absl::Status status ABSL_GUARDED_BY(mu);
    double seconds ABSL_GUARDED_BY(mu) = 0;
  };
  static void Drain(const std::shared_ptr<State>& s);  // writes queued bundles until none is left

  const std::shared_ptr<State> s_;
  core::TaskPool* const pool_;
};

}  // namespace spexd::server

#endif  // SPEXD_SERVER_FILE_ROW_WRITER_H_
