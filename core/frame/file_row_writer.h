// A frame file's rows (ProgressiveFrameFile::AddRows) written on pool threads, beside the
// thread that receives the bundles: the server's streaming task, which on the H100 spent
// ~0.16 s of rows per frame behind the GPU, and spexctl's receive
// loop, which would otherwise stall the stream. Up to kMaxConcurrentBundles bundles are
// written at once: a bundle's rows (3.5 MB of an r frame) take longer to encode and write
// into a busy host's page cache than the GPU takes to extract the next one, so that one
// writer at a time left most of a frame's rows to be written after its last bundle.
#ifndef SPEXD_CORE_FRAME_FILE_ROW_WRITER_H_
#define SPEXD_CORE_FRAME_FILE_ROW_WRITER_H_

#include <deque>
#include <memory>
#include <utility>
#include <variant>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "core/base/task_pool.h"
#include "core/frame/extraction_result.h"
#include "core/frame/progressive_frame_file.h"

namespace spexd::core {

class FileRowWriter {
 public:
  static constexpr int kMaxConcurrentBundles = 4;

  // `file` and `pool` (null: every write on the caller's thread) outlive this object.
  FileRowWriter(ProgressiveFrameFile* file, TaskPool* pool)
      : s_(std::make_shared<State>(file)), pool_(pool) {}
  // Waits for the writes in progress: they use `file` and the bundles.
  ~FileRowWriter();
  FileRowWriter(const FileRowWriter&) = delete;
  FileRowWriter& operator=(const FileRowWriter&) = delete;

  // Queues the bundle's rows at file row `row`; the bundle is kept until written. Returns
  // the first error of an earlier write, if any (nothing more is written after one).
  absl::Status Add(int row, std::shared_ptr<const BundleResult> bundle);
  // The same for a float32 stream's rows (ProgressiveFrameFile::AddRows of Float32Rows).
  absl::Status Add(int row, std::shared_ptr<const Float32Rows> rows);
  // Waits until every queued bundle is written, writing those that no pool thread has
  // taken yet itself; the first error, if any.
  absl::Status Wait();
  // Seconds spent in AddRows, summed (the stage output_file_rows). After Wait.
  double seconds();

 private:
  using Rows =
      std::variant<std::shared_ptr<const BundleResult>, std::shared_ptr<const Float32Rows>>;
  absl::Status Queue(int row, Rows rows);
  // Shared with the pool task, so that a task still unlocking after its last write never
  // touches a destroyed writer.
  struct State {
    explicit State(ProgressiveFrameFile* f) : file(f) {}
    ProgressiveFrameFile* const file;
    absl::Mutex mu;
    std::deque<std::pair<int, Rows>> queue ABSL_GUARDED_BY(mu);
    int posted ABSL_GUARDED_BY(mu) = 0;  // Drains posted to the pool, not started
    int active ABSL_GUARDED_BY(mu) = 0;  // Drains writing (or about to return)
    absl::Status status ABSL_GUARDED_BY(mu);
    double seconds ABSL_GUARDED_BY(mu) = 0;
  };
  // Writes queued bundles until none is left; `posted`: run as a task that Add posted.
  static void Drain(const std::shared_ptr<State>& s, bool posted);

  const std::shared_ptr<State> s_;
  TaskPool* const pool_;
};

}  // namespace spexd::core

#endif  // SPEXD_CORE_FRAME_FILE_ROW_WRITER_H_
