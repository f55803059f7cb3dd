// Byte ranges of buffers in memory written to one file descriptor by a single pool task
// at a time, behind the threads that make them final. The kernel serialises the writes
// into one file anyway (its inode lock), and on a busy host a frame file's writes take
// longer than the GPU takes to extract it: the threads that encode its rows then queue
// here instead of waiting in line for the file, and the caller that needs the file
// whole (the commit, beside the file's digest, which reads the image in memory, not the
// file) writes what is left itself.
#ifndef SPEXD_CORE_BASE_BACKGROUND_WRITER_H_
#define SPEXD_CORE_BASE_BACKGROUND_WRITER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "core/base/task_pool.h"

namespace spexd::core {

class BackgroundWriter {
 public:
  // `fd` (borrowed) stays open and the bytes given to Add stay valid until Flush has
  // returned or this object is gone. `pool` null or without threads: Add writes on the
  // caller's thread. `name` is for messages.
  BackgroundWriter(int fd, std::string name, TaskPool* pool);
  // Drops what no write has started on and waits for the write in progress, which stops
  // at its next piece (kPieceBytes): the descriptor may close right after.
  ~BackgroundWriter();
  BackgroundWriter(const BackgroundWriter&) = delete;
  BackgroundWriter& operator=(const BackgroundWriter&) = delete;

  // Queues `n` bytes at `data` for `offset` in the file (ranges never overlap) and starts
  // a pool task to write them unless one is posted or writing. Returns the first error
  // of a write so far (nothing is queued after one): a write's failure shows here
  // later, or at Flush.
  absl::Status Add(int64_t offset, const char* data, int64_t n);
  // Writes everything queued on this thread (a pool task posted and not started yet
  // finds nothing left), after the write in progress, if any; the first error. Each
  // written range's writeback is started (sync_file_range), as the pool task does, so
  // that the caller's fsync has less left.
  absl::Status Flush();

 private:
  struct Range {
    int64_t offset;
    const char* data;
    int64_t n;
  };
  // Shared with the posted task, which may start after this object is gone and then
  // touches nothing else.
  struct State {
    absl::Mutex mu;
    std::vector<Range> queue ABSL_GUARDED_BY(mu);
    bool posted ABSL_GUARDED_BY(mu) = false;  // a task posted, not started
    bool writing ABSL_GUARDED_BY(mu) = false;
    absl::Status status ABSL_GUARDED_BY(mu);
    // Set by the destructor: a write in progress stops at its next piece, so that a
    // request ending on a slow disk does not wait for the rest of the file.
    std::atomic<bool> stop{false};
  };
  // Takes the writer's role (none may hold it) and writes until the queue is empty.
  static void WriteQueued(State& s, int fd, const std::string& name)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu);
  // A write's largest single call: where a stop is noticed.
  static constexpr int64_t kPieceBytes = int64_t{8} << 20;

  const int fd_;
  const std::string name_;
  TaskPool* const pool_;
  const std::shared_ptr<State> s_;
};

}  // namespace spexd::core

#endif  // SPEXD_CORE_BASE_BACKGROUND_WRITER_H_
