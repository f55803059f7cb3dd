#include "core/base/background_writer.h"

#include <algorithm>
#include <utility>

#include "core/base/write_fully.h"

namespace spexd::core {

BackgroundWriter::BackgroundWriter(int fd, std::string name, TaskPool* pool)
    : fd_(fd),
      name_(std::move(name)),
      pool_(pool != nullptr && pool->num_threads() > 0 ? pool : nullptr),
      s_(std::make_shared<State>()) {}

BackgroundWriter::~BackgroundWriter() {
  s_->stop.store(true, std::memory_order_relaxed);
  absl::MutexLock lock(&s_->mu);
  s_->posted = false;  // a task that starts later returns at once
  s_->queue.clear();
  s_->mu.Await(absl::Condition(+[](bool* writing) { return !*writing; }, &s_->writing));
}

absl::Status BackgroundWriter::Add(int64_t offset, const char* data, int64_t n) {
  {
    absl::MutexLock lock(&s_->mu);
    if (!s_->status.ok()) return s_->status;
    if (n <= 0) return absl::OkStatus();
    s_->queue.push_back({offset, data, n});
    if (s_->posted || s_->writing) return absl::OkStatus();
    if (pool_ == nullptr) {
      WriteQueued(*s_, fd_, name_);
      return s_->status;
    }
    s_->posted = true;
  }
  const bool posted = pool_->Post([s = s_, fd = fd_, name = name_] {
    absl::MutexLock lock(&s->mu);
    if (!s->posted) return;  // Flush took the queue, or the writer is gone
    s->posted = false;
    WriteQueued(*s, fd, name);
  });
  if (!posted) return Flush();  // a pool shutting down: written here
  return absl::OkStatus();
}

absl::Status BackgroundWriter::Flush() {
  absl::MutexLock lock(&s_->mu);
  s_->posted = false;  // the posted task, when it starts, finds its work done
  s_->mu.Await(absl::Condition(+[](bool* writing) { return !*writing; }, &s_->writing));
  WriteQueued(*s_, fd_, name_);
  return s_->status;
}

void BackgroundWriter::WriteQueued(State& s, int fd, const std::string& name) {
  s.writing = true;
  while (!s.queue.empty() && s.status.ok() && !s.stop.load(std::memory_order_relaxed)) {
    std::vector<Range> batch;
    batch.swap(s.queue);
    s.mu.Unlock();
    // Adjacent ranges (a file's rows, bundle after bundle) go out in one write.
    std::sort(batch.begin(), batch.end(),
              [](const Range& a, const Range& b) { return a.offset < b.offset; });
    std::size_t kept = 0;
    for (std::size_t i = 1; i < batch.size(); ++i) {
      Range& last = batch[kept];
      if (batch[i].offset == last.offset + last.n && batch[i].data == last.data + last.n) {
        last.n += batch[i].n;
      } else {
        batch[++kept] = batch[i];
      }
    }
    batch.resize(kept + 1);
    absl::Status st;
    for (const Range& r : batch) {
      for (int64_t done = 0; done < r.n && st.ok(); done += kPieceBytes) {
        if (s.stop.load(std::memory_order_relaxed)) break;
        const int64_t n = std::min(kPieceBytes, r.n - done);
        st = WriteFully(fd, r.data + done, static_cast<std::size_t>(n), r.offset + done, name);
      }
      if (!st.ok() || s.stop.load(std::memory_order_relaxed)) break;
      StartWriteback(fd, r.offset, r.n);
    }
    s.mu.Lock();
    if (!st.ok() && s.status.ok()) s.status = st;
  }
  if (!s.status.ok()) s.queue.clear();  // nothing more is written after an error
  s.writing = false;
}

}  // namespace spexd::core
