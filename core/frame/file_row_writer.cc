#include "core/frame/file_row_writer.h"

#include <chrono>

namespace spexd::core {

FileRowWriter::~FileRowWriter() { (void)Wait(); }

absl::Status FileRowWriter::Add(int row, std::shared_ptr<const BundleResult> bundle) {
  {
    absl::MutexLock lock(&s_->mu);
    if (!s_->status.ok()) return s_->status;
    s_->queue.emplace_back(row, std::move(bundle));
    // Each running Drain is busy with a bundle of its own: another one starts for this
    // bundle unless as many run as may (one of them takes it when it is done).
    if (s_->running >= kMaxConcurrentBundles) return absl::OkStatus();
    ++s_->running;
  }
  // Written here instead where no pool thread would run the task: a pool without threads
  // (spexd --cpu_threads=1) keeps it until its shutdown, and one shutting down refuses it.
  if (pool_ == nullptr || pool_->num_threads() == 0 || !pool_->Post([s = s_] { Drain(s); })) {
    Drain(s_);
  }
  return absl::OkStatus();
}

void FileRowWriter::Drain(const std::shared_ptr<State>& s) {
  for (;;) {
    std::pair<int, std::shared_ptr<const BundleResult>> item;
    {
      absl::MutexLock lock(&s->mu);
      if (s->queue.empty() || !s->status.ok()) {
        s->queue.clear();  // after an error the rest is not written
        --s->running;
        return;
      }
      item = std::move(s->queue.front());
      s->queue.pop_front();
    }
    const auto t0 = std::chrono::steady_clock::now();
    const absl::Status st = s->file->AddRows(item.first, *item.second);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    item.second.reset();  // the bundle's arrays go before the next one is written
    absl::MutexLock lock(&s->mu);
    s->seconds += secs;
    if (!st.ok() && s->status.ok()) s->status = st;
  }
}

absl::Status FileRowWriter::Wait() {
  absl::MutexLock lock(&s_->mu);
  s_->mu.Await(absl::Condition(+[](int* running) { return *running == 0; }, &s_->running));
  return s_->status;
}

double FileRowWriter::seconds() {
  absl::MutexLock lock(&s_->mu);
  return s_->seconds;
}

}  // namespace spexd::core
