#include "core/frame/file_row_writer.h"

#include <chrono>

namespace spexd::core {

FileRowWriter::~FileRowWriter() { (void)Wait(); }

absl::Status FileRowWriter::Add(int row, std::shared_ptr<const BundleResult> bundle) {
  return Queue(row, std::move(bundle));
}

absl::Status FileRowWriter::Add(int row, std::shared_ptr<const Float32Rows> rows) {
  return Queue(row, std::move(rows));
}

absl::Status FileRowWriter::Queue(int row, Rows rows) {
  {
    absl::MutexLock lock(&s_->mu);
    if (!s_->status.ok()) return s_->status;
    s_->queue.emplace_back(row, std::move(rows));
    // Each Drain posted or running takes bundles until none is left: another one starts
    // for this bundle unless as many are under way as may be (one of them takes it).
    if (s_->posted + s_->active >= kMaxConcurrentBundles) return absl::OkStatus();
    ++s_->posted;
  }
  // Written here instead where no pool thread would run the task: a pool without threads
  // (spexd --cpu_threads=1) keeps it until its shutdown, and one shutting down refuses it.
  if (pool_ == nullptr || pool_->num_threads() == 0 ||
      !pool_->Post([s = s_] { Drain(s, /*posted=*/true); })) {
    Drain(s_, /*posted=*/true);
  }
  return absl::OkStatus();
}

void FileRowWriter::Drain(const std::shared_ptr<State>& s, bool posted) {
  {
    absl::MutexLock lock(&s->mu);
    if (posted) --s->posted;
    ++s->active;
  }
  for (;;) {
    std::pair<int, Rows> item;
    {
      absl::MutexLock lock(&s->mu);
      if (s->queue.empty() || !s->status.ok()) {
        s->queue.clear();  // after an error the rest is not written
        --s->active;
        return;
      }
      item = std::move(s->queue.front());
      s->queue.pop_front();
    }
    const auto t0 = std::chrono::steady_clock::now();
    const absl::Status st = std::visit(
        [&](const auto& rows) { return s->file->AddRows(item.first, *rows); }, item.second);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    item.second = Rows();  // the bundle's arrays go before the next one is written
    absl::MutexLock lock(&s->mu);
    s->seconds += secs;
    if (!st.ok() && s->status.ok()) s->status = st;
  }
}

absl::Status FileRowWriter::Wait() {
  // Bundles still queued are written here, by the thread that waits for them, rather than
  // after whatever the pool runs before its posted drains; writes already running finish
  // where they are, and a drain that starts later finds nothing left.
  Drain(s_, /*posted=*/false);
  absl::MutexLock lock(&s_->mu);
  s_->mu.Await(absl::Condition(+[](int* active) { return *active == 0; }, &s_->active));
  return s_->status;
}

double FileRowWriter::seconds() {
  absl::MutexLock lock(&s_->mu);
  return s_->seconds;
}

}  // namespace spexd::core
