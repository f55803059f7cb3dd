#include "core/io/internal/gzip_image.h"

#include <algorithm>
#include <atomic>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "core/base/parallel_for.h"
#include "core/base/status_macros.h"
#include "core/base/write_fully.h"

namespace spexd::core {

struct GzipImage::Work {
  std::vector<absl::string_view> data;  // per chunk: the image's bytes, then the tail's
  std::string tail;
  std::vector<GzipChunk> chunks;
  std::unique_ptr<std::atomic<bool>[]> claimed;  // per image chunk: its deflate has begun
  absl::Mutex mu;
  int running ABSL_GUARDED_BY(mu) = 0;  // tasks inside DeflateClaimed
  int by_tasks ABSL_GUARDED_BY(mu) = 0;
  absl::Status status ABSL_GUARDED_BY(mu);
};

GzipImage::GzipImage(absl::string_view image, std::size_t chunk_bytes, std::vector<int64_t> cuts)
    : image_(image),
      chunk_bytes_(std::clamp<std::size_t>(chunk_bytes, 1, std::size_t{1} << 30)),
      work_(std::make_shared<Work>()) {
  const int64_t size = static_cast<int64_t>(image_.size());
  const int64_t step = static_cast<int64_t>(chunk_bytes_);
  cuts.push_back(size);
  std::sort(cuts.begin(), cuts.end());
  int64_t at = 0;
  for (int64_t cut : cuts) {
    if (cut <= at || cut > size) continue;
    for (; at < cut; at = std::min(cut, at + step)) starts_.push_back(at);
  }
  for (std::size_t i = 0; i < starts_.size(); ++i) {
    const int64_t end = i + 1 < starts_.size() ? starts_[i + 1] : size;
    pending_.push_back(end - starts_[i]);
    work_->data.push_back(image_.substr(static_cast<std::size_t>(starts_[i]),
                                        static_cast<std::size_t>(end - starts_[i])));
  }
  starts_.push_back(size);
  work_->chunks.resize(pending_.size());
  work_->claimed = std::make_unique<std::atomic<bool>[]>(pending_.size());
  for (std::size_t i = 0; i < pending_.size(); ++i) work_->claimed[i].store(false);
}

GzipImage::~GzipImage() {
  Work& w = *work_;
  for (std::size_t i = 0; i < pending_.size(); ++i) w.claimed[i].store(true);
  absl::MutexLock lock(&w.mu);
  w.mu.Await(absl::Condition(+[](int* running) { return *running == 0; }, &w.running));
}

absl::Status GzipImage::Final(int64_t offset, int64_t n) {
  const int64_t size = static_cast<int64_t>(image_.size());
  if (offset < 0 || n < 0 || offset > size || n > size - offset || finished_) {
    return absl::InternalError(absl::StrCat("gzip image: bytes [", offset, ", ", offset + n,
                                            ") are outside the ", size, "-byte image"));
  }
  if (n == 0) return absl::OkStatus();
  // The chunk holding `offset`: the last start at or before it.
  std::size_t i = static_cast<std::size_t>(
      std::upper_bound(starts_.begin(), starts_.end() - 1, offset) - starts_.begin() - 1);
  for (; i + 1 < starts_.size() && starts_[i] < offset + n; ++i) {
    const int64_t overlap = std::min(offset + n, starts_[i + 1]) - std::max(offset, starts_[i]);
    int64_t& left = pending_[i];
    if (overlap > left) {
      return absl::InternalError(
          absl::StrCat("gzip image: bytes of chunk ", i, " declared final twice"));
    }
    left -= overlap;
    if (left == 0) ready_.push_back(i);
  }
  return absl::OkStatus();
}

void GzipImage::DeflateInto(Work& w, std::size_t i, bool last) {
  absl::StatusOr<GzipChunk> chunk = DeflateGzipChunk(w.data[i], last);
  absl::MutexLock lock(&w.mu);
  if (chunk.ok()) {
    w.chunks[i] = *std::move(chunk);
  } else if (w.status.ok()) {
    w.status = chunk.status();
  }
}

void GzipImage::DeflateClaimed(Work& w, std::size_t i) {
  {
    absl::MutexLock lock(&w.mu);
    ++w.running;  // before the claim: Seal and the destructor wait for every claimant
  }
  const bool mine = !w.claimed[i].exchange(true);
  if (mine) DeflateInto(w, i, /*last=*/false);
  absl::MutexLock lock(&w.mu);
  if (mine) ++w.by_tasks;  // with the decrement: Seal counts every chunk it waited for
  --w.running;
}

void GzipImage::CompressReady(TaskPool* pool) {
  for (std::size_t i : ready_) {
    auto task = [w = work_, i] { DeflateClaimed(*w, i); };
    if (pool == nullptr || !pool->Post(task)) task();
  }
  ready_.clear();
}

absl::Status GzipImage::Finish(absl::string_view tail, TaskPool* pool, int workers, int fd,
                               absl::string_view name) {
  SPEXD_RETURN_IF_ERROR(Seal(tail, pool, workers, name));
  return Write(fd, name);
}

absl::Status GzipImage::Seal(absl::string_view tail, TaskPool* pool, int workers,
                             absl::string_view name) {
  const std::size_t nimage = pending_.size();
  for (std::size_t i = 0; i < nimage; ++i) {
    if (pending_[i] != 0) {
      return absl::InternalError(absl::StrCat(name, ": ", pending_[i], " bytes of gzip chunk ", i,
                                              " never written"));
    }
  }
  finished_ = true;
  ready_.clear();
  Work& w = *work_;
  // The chunks whose task has not begun are this call's; then the tasks that have, waited for.
  std::vector<std::size_t> which;
  for (std::size_t i = 0; i < nimage; ++i) {
    if (!w.claimed[i].exchange(true)) which.push_back(i);
  }
  {
    absl::MutexLock lock(&w.mu);
    w.mu.Await(absl::Condition(+[](int* running) { return *running == 0; }, &w.running));
    SPEXD_RETURN_IF_ERROR(w.status);
    early_ = w.by_tasks;
  }
  // The tail's chunks (one empty chunk without a tail, for the final block).
  w.tail.assign(tail.data(), tail.size());
  const std::size_t ntail =
      std::max<std::size_t>(1, (w.tail.size() + chunk_bytes_ - 1) / chunk_bytes_);
  const absl::string_view tail_bytes(w.tail);
  for (std::size_t t = 0; t < ntail; ++t) {
    const std::size_t from = std::min(t * chunk_bytes_, tail_bytes.size());
    w.data.push_back(tail_bytes.substr(from, chunk_bytes_));
    which.push_back(nimage + t);
  }
  w.chunks.resize(nimage + ntail);
  const std::size_t last = w.chunks.size() - 1;
  ParallelFor(pool, std::max(1, workers), static_cast<int>(which.size()), [&](int, int t) {
    const std::size_t i = which[static_cast<std::size_t>(t)];
    DeflateInto(w, i, i == last);
  });
  {
    absl::MutexLock lock(&w.mu);
    SPEXD_RETURN_IF_ERROR(w.status);
  }
  late_ = static_cast<int>(which.size());
  for (std::size_t i : which) late_bytes_ += static_cast<int64_t>(w.chunks[i].input);
  std::vector<const GzipChunk*> order;
  order.reserve(w.chunks.size());
  for (const GzipChunk& c : w.chunks) order.push_back(&c);
  ends_ = MemberEndsOf(order);
  sealed_ = true;
  return absl::OkStatus();
}

absl::Status GzipImage::Write(int fd, absl::string_view name) const {
  if (!sealed_) {
    return absl::InternalError(absl::StrCat(name, ": gzip member written before it was sealed"));
  }
  int64_t at = 0;
  for (absl::string_view piece : pieces()) {
    SPEXD_RETURN_IF_ERROR(WriteFully(fd, piece.data(), piece.size(), at, name));
    at += static_cast<int64_t>(piece.size());
  }
  return absl::OkStatus();
}

std::vector<absl::string_view> GzipImage::pieces() const {
  if (!sealed_) return {};
  std::vector<absl::string_view> out;
  out.reserve(work_->chunks.size() + 2);
  out.emplace_back(ends_.header, sizeof(ends_.header));
  for (const GzipChunk& c : work_->chunks) out.push_back(c.view());
  out.emplace_back(ends_.trailer, sizeof(ends_.trailer));
  return out;
}

int64_t GzipImage::size() const {
  int64_t n = 0;
  for (absl::string_view p : pieces()) n += static_cast<int64_t>(p.size());
  return n;
}

}  // namespace spexd::core
